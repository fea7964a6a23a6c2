"""What a tier needs from the machine (root and network namespaces, the control plane's binaries, the upstream
peer), and the one rule for when it is missing: outside CI the test is skipped with the one line that says how to
provide it; under CI (the environment variable ``CI`` set, as ``.ci/run`` exports it) it fails with that same line,
so a tier CI is meant to run never passes by not running."""

from __future__ import annotations

import os
import shutil

import pytest

from hack.control_plane import cluster as control_plane
from hack.control_plane.shell import sh


def under_ci() -> bool:
    """``CI`` is set to anything but an explicit no (``CI=true``, as .ci/run and the usual CI services set it)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require(reason: str | None) -> None:
    """Nothing when ``reason`` is None (the prerequisite is met); otherwise fail under CI, skip elsewhere, with
    ``reason`` as the whole message. Call it from a fixture: pytest then reports a skip at the test's line."""
    if reason is None:
        return
    if under_ci():
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def network_namespaces() -> str | None:
    """Why network namespaces cannot be made here (the kernel tiers need them), or None."""
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2): hack/control-plane/build.sh installs it"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN): run the tests as root"
    probe = f"naw-check-{os.getpid()}"  # one per pytest worker: two may ask at once
    done = sh("ip", "netns", "add", probe, check=False)
    if done.returncode != 0:
        return f"`ip netns add` refused: {done.stderr.strip()}"
    sh("ip", "netns", "del", probe, check=False)
    return None


def control_plane_built() -> str | None:
    """Why the e2e tier's control plane cannot start (binaries missing), or None."""
    missing = control_plane.missing_binaries()
    if missing:
        return f"the control plane is not built ({', '.join(missing)}): run bash hack/control-plane/build.sh"
    return None


def peer_built() -> str | None:
    """Why the scheduler-plugins conformance test cannot run (the upstream binary is missing), or None."""
    if not (control_plane.BIN / "scheduler-plugins").is_file():
        return "the upstream peer is not built (scheduler-plugins): run bash hack/control-plane/build-peer.sh"
    return None
