"""What the benchmark scripts share besides their figures (:mod:`benchmarks.figures`): a free loopback port (the
control plane's, one definition for the tests, the benchmarks and the control plane) and a shell command's output."""

from __future__ import annotations

import subprocess

from hack.control_plane.cluster import free_port

__all__ = ["free_port", "sh"]


def sh(*args: str, check: bool = True) -> str:
    """The command's standard output (``check``: a non-zero exit raises)."""
    return subprocess.run(args, capture_output=True, text=True, check=check).stdout
