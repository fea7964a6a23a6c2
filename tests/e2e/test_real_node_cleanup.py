"""A real node's cluster started and stopped on the host: nothing of it stays (namespaces, mounts, cgroups,
processes, sockets). Its own module: it must not run while test_real_node.py's cluster (same namespace names) runs."""

from __future__ import annotations

import pathlib
import subprocess

import pytest

from hack.control_plane import cluster as control_plane
from hack.control_plane.cluster import ControlPlane
from tests.support.e2e import eventually, kubectl_json, not_built
from tests.support.prerequisites import require

pytestmark = [pytest.mark.e2e, pytest.mark.realnode]


@pytest.fixture
def built() -> None:
    require(not_built())  # in a fixture: a skip is reported at the test, not at the helper


def test_a_real_nodes_cluster_leaves_nothing_on_the_host(built: None, tmp_path: pathlib.Path) -> None:
    """One node started and stopped on a plane of its own: no namespace, mount, cgroup, process or socket left."""
    plane = ControlPlane(tmp_path, real_nodes=1)
    plane.start([])
    try:
        plane.kubectl(
            "run",
            "one",
            "--image=localhost/netaware:dev",
            "--image-pull-policy=Never",
            "--command",
            "--",
            "python3",
            "-c",
            "import time; time.sleep(600)",
        )
        eventually(lambda: kubectl_json(plane, "get", "pod", "one")["status"].get("phase") == "Running", 60, "a pod")
    finally:
        plane.stop()
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert "naw-node" not in namespaces and "naw-fabric" not in namespaces
    assert "netaware-real-node" not in pathlib.Path("/proc/self/mountinfo").read_text()
    assert not list(pathlib.Path("/sys/fs/cgroup").glob("*/netaware-real-node-*"))
    assert not [p for p in ("/run/netaware-real-node-1", "/var/lib/netaware-real-node-1") if pathlib.Path(p).exists()]
    assert control_plane.realnode.RealNode(1).processes() == []
    assert not pathlib.Path("/run/containerd/s").exists() or not list(pathlib.Path("/run/containerd/s").iterdir())
