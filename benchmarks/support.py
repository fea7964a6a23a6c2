"""What the benchmark scripts share besides their figures (:mod:`benchmarks.figures`): a free loopback port (the
control plane's, one definition for the tests, the benchmarks and the control plane) and one way to run a command."""

from __future__ import annotations

from hack.control_plane.cluster import free_port, free_ports
from hack.control_plane.shell import sh

__all__ = ["free_port", "free_ports", "sh"]
