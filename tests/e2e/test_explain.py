"""`netaware explain pod` against the real API server agrees with `netaware schedule` on a dump of the same
state, and `kubectl netaware explain pod` works through real kubectl's plugin mechanism."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any

import pytest

from hack.control_plane import cluster as control_plane
from hack.control_plane.cluster import ControlPlane
from tests.support.e2e import EXAMPLES, ROOT

pytestmark = pytest.mark.e2e

CONFIG = str(ROOT / "hack" / "configs" / "scheduler-config.yaml")


def netaware(*args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "operators.cli", *args], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(done.stdout)


def answers(cluster: ControlPlane, tmp_path: pathlib.Path) -> tuple[Any, Any, Any]:
    """`netaware schedule` on a dump, `netaware explain pod` live, `kubectl netaware explain pod` (whyNot aside)."""
    dump = tmp_path / "cluster.yaml"
    dump.write_text(cluster.kubectl("get", "nodes,pods,appgroups,networktopologies,namespaces,nodeslos", "-A", "-o",
                                    "yaml").stdout)  # fmt: skip
    scheduled = netaware("schedule", "-f", str(dump), "--pod", "default/p1-explained", "--config", CONFIG, "-o", "json")
    live = netaware(
        "explain", "pod", "default/p1-explained", "--kubeconfig", str(cluster.kubeconfig), "--config", CONFIG,
        "-o", "json",
    )  # fmt: skip
    assert live.pop("whyNot") == []
    assert live.pop("unavailable") == ""  # kube-scheduler's FailedScheduling message: none, a node fits
    env = {**os.environ, "PATH": f"{pathlib.Path(sys.executable).parent}:{os.environ['PATH']}"}
    env["KUBECONFIG"] = str(cluster.kubeconfig)
    done = subprocess.run(
        [str(control_plane.BIN / "kubectl"), "netaware", "explain", "pod", "p1-explained", "--config", CONFIG,
         "-o", "json"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    plugin = json.loads(done.stdout)
    plugin.pop("whyNot")
    plugin.pop("unavailable")
    return scheduled, live, plugin


def test_explain_pod_agrees_with_schedule_on_a_dump_and_runs_as_a_kubectl_plugin(
    cluster: ControlPlane, tmp_path: pathlib.Path
) -> None:
    cluster.kubectl(
        "apply", "-f", str(EXAMPLES / "pods.yaml"), "-f", str(EXAMPLES / "appgroup-a1.yaml"),
        "-f", str(EXAMPLES / "networktopology.yaml"),
    )  # fmt: skip
    pending = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1-explained", "namespace": "default",
                     "labels": {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": "p1"},
                     "annotations": {"kubernetes.io/egress-request": "100Mi"}},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
    }  # fmt: skip
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pending))
    try:
        # The same state for both: the session's other tests may still be deleting pods (KWOK removes them over
        # a few seconds), so the dump and the live answers are taken back to back until nothing moved between.
        for _ in range(10):
            scheduled, live, plugin = answers(cluster, tmp_path)
            if live == scheduled == plugin:
                break
            time.sleep(2)
        assert live == scheduled
        assert plugin == scheduled  # kubectl found kubectl-netaware on the PATH and handed it the command line
        assert scheduled["selectedNode"]
    finally:
        cluster.kubectl("delete", "pod", "p1-explained", "--ignore-not-found", "--wait=false")
