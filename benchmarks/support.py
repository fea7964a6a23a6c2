"""What the benchmark scripts share besides their figures (:mod:`benchmarks.figures`): a free loopback port (the
control plane's, one definition for the tests, the benchmarks and the control plane), one way to run a command,
and a serving pair for components on loopback."""

from __future__ import annotations

import base64
import pathlib
import socket
import subprocess
import time
from collections.abc import Sequence
from typing import TypeVar

from hack.control_plane.ports import free_port, free_ports
from hack.control_plane.shell import sh

__all__ = ["free_port", "free_ports", "loopback_tls", "rotated", "sh", "tls_flags"]

T = TypeVar("T")


def rotated(columns: Sequence[T], run: int) -> list[T]:
    """``columns`` in the order of ``run`` (the run-th rotation): no column always follows the same one, so
    one's trailing work does not always land in the same next one's seconds."""
    turn = run % len(columns) if columns else 0
    return [*columns[turn:], *columns[:turn]]


def loopback_tls(folder: pathlib.Path) -> str:
    """A new CA and a serving pair for 127.0.0.1 written to ``folder``/tls.crt and tls.key (the CA to ca.crt); the
    CA bundle (base64, as a webhook configuration or an extender's tlsConfig takes it)."""
    import trustme

    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1")
    leaf.private_key_and_cert_chain_pem.write_to_path(str(folder / "tls.crt"))
    leaf.private_key_pem.write_to_path(str(folder / "tls.key"))
    ca.cert_pem.write_to_path(str(folder / "ca.crt"))
    return base64.b64encode(ca.cert_pem.bytes()).decode()


def tls_flags(folder: pathlib.Path) -> list[str]:
    """A netaware server's flags for the pair :func:`loopback_tls` wrote to ``folder``."""
    return ["--tls-cert-file", str(folder / "tls.crt"), "--tls-private-key-file", str(folder / "tls.key")]


def wait_listening(
    port: int, what: str, log: pathlib.Path, process: subprocess.Popen[bytes] | None = None, within: float = 60.0
) -> None:
    """Until something listens on loopback ``port`` (``what``, logging to ``log``, started as ``process``); exits
    naming the log when it does not within ``within`` seconds or the process ended."""
    deadline = time.monotonic() + within
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline or (process is not None and process.poll() is not None):
                raise SystemExit(f"the {what} did not listen within {within:.0f} s (see {log})") from None
            time.sleep(0.3)
