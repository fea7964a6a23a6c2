"""What an uninstall leaves to undo (engine/status/uninstall.py), and ``netaware cleanup -f`` reporting it: each rule
on a hand-made cluster, the expected pods and nodes written out by hand."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from operators.cli.main import cli
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.status.uninstall import what_to_undo
from tests.support.uninstall import ADVERTISED, EGRESS, GATE, SCHEDULER, node, pod


def cluster() -> list[dict[str, Any]]:
    return [
        node("busy", ADVERTISED),  # runs a pod that requests netaware's resources: kept
        node("idle", ADVERTISED),  # advertises them, runs no such pod: cleaned
        node("plain"),  # never advertised them: nothing to do
        pod("running", "busy", requests=EGRESS),
        pod("done", "idle", requests=EGRESS, phase="Succeeded"),  # finished: holds nothing
        pod("gated", gates=(GATE, "other.io/hold")),
        pod("foreign-gate", gates=("other.io/hold",)),
        pod("second-owned", scheduler=SCHEDULER, owner="web-1"),
        pod("second-bare", scheduler=SCHEDULER),
        pod("second-gated", scheduler=SCHEDULER, gates=(GATE,), owner="web-1"),
        pod("asks-owned", requests=EGRESS, owner="web-2"),
        pod("bound-second", "busy", scheduler=SCHEDULER),  # bound: already scheduled, nothing to do
    ]


def test_each_rule_on_a_hand_made_cluster() -> None:
    undo = what_to_undo(build_snapshot(cluster()), SCHEDULER, reschedule=True)
    assert [(a.pod.name, a.reason) for a in undo.delete] == [
        ("asks-owned", "requests netaware.io/egress-bandwidth, which no node advertises any more; "
                       "ReplicaSet/web-2 creates it again"),
        ("second-gated", f"names the removed scheduler {SCHEDULER}; ReplicaSet/web-1 creates it again"),
        ("second-owned", f"names the removed scheduler {SCHEDULER}; ReplicaSet/web-1 creates it again"),
    ]  # fmt: skip
    assert [a.pod.name for a in undo.release] == ["gated"]  # a foreign gate alone is not ours
    assert [(a.pod.name, a.reason) for a in undo.left] == [
        ("second-bare", f"names the removed scheduler {SCHEDULER}; no controller creates it again: delete it and "
                        "create it again"),
    ]  # fmt: skip
    nodes = {action.node.name: action for action in undo.nodes}
    assert sorted(nodes) == ["busy", "idle"]
    assert nodes["busy"].patch == {} and nodes["busy"].reason.endswith("1 running pod(s) request them (apps/running)")
    assert nodes["idle"].patch == {"status": {
        "capacity": {"netaware.io/ingress-bandwidth": None, "netaware.io/egress-bandwidth": None},
        "allocatable": {"netaware.io/ingress-bandwidth": None, "netaware.io/egress-bandwidth": None},
    }}  # fmt: skip
    assert not undo.empty


def test_without_rescheduling_nothing_is_deleted_and_the_stuck_pods_are_reported() -> None:
    undo = what_to_undo(build_snapshot(cluster()), SCHEDULER, reschedule=False)
    assert undo.delete == ()
    assert [a.pod.name for a in undo.left] == ["asks-owned", "second-bare", "second-gated", "second-owned"]
    assert all("deleting it was not asked for" in a.reason for a in undo.left)
    assert [a.pod.name for a in undo.release] == ["gated"]  # a stuck pod is not released: its gate is moot


def test_without_a_second_scheduler_its_pods_are_anyone_elses() -> None:
    undo = what_to_undo(build_snapshot(cluster()), "", reschedule=True)
    assert [a.pod.name for a in undo.delete] == ["asks-owned"]
    assert sorted(a.pod.name for a in undo.release) == ["gated", "second-gated"]


def test_a_cleaned_cluster_has_nothing_left_to_undo() -> None:
    objects = [node("idle"), pod("released"), pod("running", "idle")]
    assert what_to_undo(build_snapshot(objects), SCHEDULER, reschedule=True).empty


def test_the_cli_reports_what_a_live_run_would_undo(tmp_path: pathlib.Path) -> None:
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(yaml.safe_dump_all(cluster()))
    runner = CliRunner()
    done = runner.invoke(cli, ["cleanup", "-f", str(snapshot), "--scheduler-name", SCHEDULER, "--reschedule-pending",
                               "-o", "json"])  # fmt: skip
    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert [entry["pod"] for entry in report["deleted"]] == ["apps/asks-owned", "apps/second-gated",
                                                             "apps/second-owned"]  # fmt: skip
    assert report["released"] == [{"pod": "apps/gated", "reason": f"held by the gate {GATE}"}]
    assert [entry["pod"] for entry in report["left"]] == ["apps/second-bare"]
    assert report["nodes"] == [
        {"node": "busy", "kept": "keeps netaware.io/ingress-bandwidth, netaware.io/egress-bandwidth: 1 running pod(s) "
                                 "request them (apps/running)"},
        {"node": "idle", "cleaned": "removed netaware.io/ingress-bandwidth, netaware.io/egress-bandwidth"},
    ]  # fmt: skip
    table = runner.invoke(cli, ["cleanup", "-f", str(snapshot)])
    assert table.exit_code == 0
    assert "pod apps/gated: to release (held by the gate netaware.io/topology-order)" in table.output
    assert "node idle: to clean" in table.output and "node busy: kept" in table.output


@pytest.mark.parametrize("bad", ["no-slash", "/selector", "ns/"])
def test_a_wait_target_names_a_namespace_and_a_selector(bad: str, tmp_path: pathlib.Path) -> None:
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(yaml.safe_dump_all(cluster()))
    done = CliRunner().invoke(cli, ["cleanup", "-f", str(snapshot), "--wait-for", bad])
    assert done.exit_code == 2 and "expected NAMESPACE/SELECTOR" in done.output
