"""``netaware cleanup`` against the emulator, as the chart's post-delete Job runs it: it waits for netaware's own
pods, then writes what engine/status/uninstall.py decided — the gated pod released (its gate alone), the stuck pod
that a controller owns deleted (by its uid), the bare one left and reported, the nodes' netaware resources removed
where no running pod requests them — and a second run finds nothing left to do."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from operators.emulator import ApiEmulator
from tests.support.uninstall import ADVERTISED, EGRESS, GATE, SCHEDULER, node, pod

pytestmark = pytest.mark.integration


def cluster() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}},
        node("busy", ADVERTISED),
        node("idle", ADVERTISED),
        pod("running", "busy", requests=EGRESS),
        pod("gated", gates=(GATE, "other.io/hold")),
        pod("second-owned", scheduler=SCHEDULER, owner="web-1"),
        pod("second-bare", scheduler=SCHEDULER),
    ]


async def cleanup(emulator: ApiEmulator, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "operators.cli", "cleanup", "--server", emulator.base_url, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_live_cleanup_writes_what_the_engine_decided_and_a_second_finds_nothing(emulator: ApiEmulator) -> None:
    await emulator.seed(cluster())
    code, out, err = await cleanup(emulator, "--scheduler-name", SCHEDULER, "--reschedule-pending", "-o", "json")
    assert code == 0, err
    report = json.loads(out)
    assert [entry["pod"] for entry in report["deleted"]] == ["apps/second-owned"]
    assert [entry["pod"] for entry in report["released"]] == ["apps/gated"]
    pods = {p["metadata"]["name"]: p for p in emulator.list_objects("v1/pods", "apps")}
    assert set(pods) == {"running", "gated", "second-bare"}  # deleted: the one its ReplicaSet makes again
    assert pods["gated"]["spec"]["schedulingGates"] == [{"name": "other.io/hold"}]  # a foreign gate stays
    nodes = {n["metadata"]["name"]: n for n in emulator.list_objects("v1/nodes")}
    assert not [r for r in nodes["idle"]["status"]["allocatable"] if r.startswith("netaware.io/")]
    assert not [r for r in nodes["idle"]["status"]["capacity"] if r.startswith("netaware.io/")]
    assert nodes["busy"]["status"]["allocatable"]["netaware.io/egress-bandwidth"] == "1G"  # its pod requests it
    code, out, _ = await cleanup(emulator, "--scheduler-name", SCHEDULER, "--reschedule-pending")
    assert code == 0
    assert "to release" not in out and "deleted" not in out and "released" not in out
    assert "pod apps/second-bare: left" in out and "node busy: kept" in out


async def test_it_waits_for_netawares_own_pods_and_says_which_when_they_stay(emulator: ApiEmulator) -> None:
    operator = pod("netaware-operator-1", "busy")
    operator["metadata"].update(namespace="netaware-system", labels={"app.kubernetes.io/component": "operator"})
    ready = [{"type": "Ready", "status": "True"}]
    busy = node("busy", ADVERTISED)
    busy["status"]["conditions"] = ready
    await emulator.seed([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "netaware-system"}},
                         {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}}, busy, operator,
                         pod("gated", gates=(GATE,))])  # fmt: skip
    code, _, err = await cleanup(emulator, "--wait-for", "netaware-system/app.kubernetes.io/component=operator",
                                 "--wait-seconds", "1")  # fmt: skip
    assert code == 1 and "pods netaware-operator-1 in netaware-system" in err and "still exist" in err
    assert emulator.get_object("v1/pods", "apps", "gated")["spec"]["schedulingGates"] == [{"name": GATE}]  # untouched
    # a pod on a node that is not Ready never ends (its kubelet is gone): not waited for, named
    busy["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    await emulator.seed([busy])
    code, out, err = await cleanup(emulator, "--wait-for", "netaware-system/app.kubernetes.io/component=operator",
                                   "--wait-seconds", "1")  # fmt: skip
    assert code == 0, err
    assert "not waiting for netaware-operator-1: their node is not Ready" in err
    assert "pod apps/gated: released" in out
