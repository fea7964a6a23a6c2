"""What the benchmark scripts share besides their figures (:mod:`benchmarks.figures`): a free loopback port and a
shell command's output."""

from __future__ import annotations

import socket
import subprocess


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def sh(*args: str, check: bool = True) -> str:
    """The command's standard output (``check``: a non-zero exit raises)."""
    return subprocess.run(args, capture_output=True, text=True, check=check).stdout
