"""The control plane's processes are stopped at once: a process that ignores SIGTERM is killed after the grace, and
a zombie whose parent is not this process counts as ended (no wait for a reaper that never comes)."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time

from hack.control_plane import cluster
from hack.control_plane.cluster import ControlPlane


def test_a_process_ignoring_sigterm_is_killed_after_the_grace(tmp_path: pathlib.Path) -> None:
    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"]
    )
    polite = subprocess.Popen(["sleep", "60"])
    time.sleep(0.3)  # the handler installed
    plane = ControlPlane(tmp_path, pids={"kube-apiserver": stubborn.pid, "etcd": polite.pid})
    started = time.monotonic()
    plane.stop()
    took = time.monotonic() - started
    assert cluster.STOP_GRACE_SECONDS <= took < cluster.STOP_GRACE_SECONDS + 2  # was 15 s
    assert plane.pids == {}
    for process in (stubborn, polite):
        assert not pathlib.Path(f"/proc/{process.pid}").exists()  # reaped, not left a zombie
    assert stubborn.poll() is not None and polite.poll() is not None  # (already reaped by stop())


def test_a_zombie_of_another_parent_has_exited() -> None:
    # sh starts a short sleep in the background and becomes a long sleep, which never reaps it
    parent = subprocess.Popen(["sh", "-c", "sleep 0.1 & echo $!; exec sleep 30"], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        zombie = int(parent.stdout.readline())
        time.sleep(0.5)
        assert pathlib.Path(f"/proc/{zombie}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
        assert cluster.exited(zombie)
        assert not cluster.exited(parent.pid) or parent.poll() is not None
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
