"""AppGroup status: order, running workloads, placements, conditions, last-good semantics."""

from __future__ import annotations

import copy
import datetime
import json
import pathlib
from typing import Any

import pytest
import yaml

from operators.api.appgroup import AppGroup
from operators.api.errors import FieldError
from operators.engine.cluster.snapshot import Snapshot, build_snapshot
from operators.engine.status.appgroup import appgroup_status

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "hack" / "examples"
NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)
LATER = NOW + datetime.timedelta(hours=1)


def raw_a1() -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / "appgroup-a1.yaml").read_text())


def cluster(*extra: dict[str, Any]) -> Snapshot:
    documents = [
        d for name in ("cluster.yaml", "pods.yaml") for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d
    ]
    return build_snapshot([*documents, *extra])


def pod(
    name: str,
    selector: str,
    namespace: str = "default",
    phase: str = "Running",
    node: str | None = "n-5",
    group: str = "a1",
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"appgroup.diktyo.x-k8s.io": group, "appgroup.diktyo.x-k8s.io.workload": selector},
        },
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": phase},
    }


def status_of(raw: dict[str, Any], snapshot: Snapshot, now: datetime.datetime = NOW) -> dict[str, Any]:
    return appgroup_status(AppGroup.model_validate(raw), snapshot, now).to_wire()


def with_status(raw: dict[str, Any], status: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    result = copy.deepcopy(raw)
    result["metadata"]["generation"] = generation
    result["status"] = status
    return result


def test_valid_appgroup_gets_order_running_placements_and_ready() -> None:
    raw = raw_a1()
    raw["metadata"]["generation"] = 1
    status = status_of(raw, cluster(pod("p1-x", "p1", phase="Pending", node=None)))
    assert [(entry["workload"]["selector"], entry["index"]) for entry in status["topologyOrder"]] == [
        ("p1", 1),
        ("p2", 2),
        ("p3", 3),
    ]
    assert status["topologyOrder"][0]["workload"] == raw["spec"]["workloads"][0]["workload"]
    assert status["runningWorkloads"] == 2
    assert status["topologyCalculationTime"] == "2026-11-22T12:00:00Z"
    assert status["placements"] == [
        {"selector": "p1", "pods": [{"name": "p1-x", "namespace": "default", "phase": "Pending"}]},
        {
            "selector": "p2",
            "pods": [
                {
                    "name": "p2-deployment-7d4b9c-abcde",
                    "namespace": "default",
                    "phase": "Running",
                    "node": "n-1",
                    "zone": "Z1",
                    "region": "us-west-1",
                }
            ],
        },
        {
            "selector": "p3",
            "pods": [
                {
                    "name": "p3-deployment-5f6c7d-fghij",
                    "namespace": "default",
                    "phase": "Running",
                    "node": "n-4",
                    "zone": "Z2",
                    "region": "us-west-1",
                }
            ],
        },
    ]
    (ready, complete) = status["conditions"]
    assert (complete["type"], complete["status"], complete["reason"]) == ("StatusComplete", "True", "Complete")
    assert ready == {
        "type": "Ready",
        "status": "True",
        "reason": "TopologyComputed",
        "message": "3 workloads ordered by KahnSort",
        "lastTransitionTime": "2026-11-22T12:00:00Z",
        "observedGeneration": 1,
    }
    assert status["observedGeneration"] == 1


def test_running_workloads_are_counted_per_namespace_not_cluster_wide() -> None:
    raw = raw_a1()
    raw["metadata"]["namespace"] = "team-b"
    for entry in raw["spec"]["workloads"]:
        entry["workload"].pop("namespace")
    snapshot = cluster(pod("b-p1", "p1", namespace="team-b"))
    assert status_of(raw, snapshot)["runningWorkloads"] == 1  # not the two a1 pods of "default"
    raw["spec"]["workloads"][1]["workload"]["namespace"] = "default"  # a workload naming another namespace
    assert status_of(raw, snapshot)["runningWorkloads"] == 3


def test_online_boutique_order_is_upstreams() -> None:
    raw = yaml.safe_load((EXAMPLES / "appgroup-onlineboutique.yaml").read_text())
    status = status_of(raw, cluster())
    index = {entry["workload"]["selector"]: entry["index"] for entry in status["topologyOrder"]}
    order = sorted(index, key=index.__getitem__)
    assert order == ["p1", "p10", "p9", "p8", "p7", "p6", "p5", "p4", "p3", "p2", "p11"]
    assert [entry["workload"]["selector"] for entry in status["topologyOrder"]] == sorted(index)  # stored by selector


def workload(selector: str, *dependencies: str) -> dict[str, Any]:
    return {
        "workload": {"kind": "Deployment", "name": f"{selector}-deployment", "selector": selector},
        "dependencies": [
            {"workload": {"kind": "Deployment", "name": f"{d}-deployment", "selector": d}} for d in dependencies
        ],
    }


@pytest.mark.parametrize(
    ("workloads", "algorithm", "members", "reason", "message"),
    [
        (
            [workload("a", "b"), workload("b", "c"), workload("c", "a")],
            "KahnSort",
            3,
            "DependencyCycle",
            "dependency cycle: a -> b -> c -> a",
        ),
        ([workload("a", "a")], "KahnSort", 1, "DependencyCycle", "dependency cycle: a -> a"),
        (
            [workload("a", "zz")],
            "KahnSort",
            1,
            "UnknownDependency",
            'workload "a" depends on "zz" (spec.workloads[0].dependencies[0]), which is not in spec.workloads',
        ),
        (
            [workload("a"), workload("a")],
            "KahnSort",
            2,
            "DuplicateSelector",
            'spec.workloads[0] (a-deployment) and spec.workloads[1] (a-deployment) share the selector "a"',
        ),
        (
            [workload("a")],
            "BubbleSort",
            1,
            "UnknownAlgorithm",
            'spec.topologySortingAlgorithm "BubbleSort" is not one of',
        ),
        (
            [workload("a"), workload("b")],
            "KahnSort",
            1,
            "NumMembersTooSmall",
            "spec.numMembers is 1, smaller than the 2 workloads",
        ),
    ],
)
def test_invalid_specs_keep_the_last_good_order(
    workloads: list[dict[str, Any]], algorithm: str, members: int, reason: str, message: str
) -> None:
    good = with_status(raw_a1(), status_of(with_status(raw_a1(), {}), cluster()))
    broken = copy.deepcopy(good)
    broken["metadata"]["generation"] = 2
    broken["spec"].update(workloads=workloads, topologySortingAlgorithm=algorithm, numMembers=members)
    status = status_of(broken, cluster(), LATER)
    (ready, _complete) = status["conditions"]
    assert ready["status"] == "False" and ready["reason"] == reason
    assert message in ready["message"]
    assert ready["lastTransitionTime"] == "2026-11-22T13:00:00Z"
    assert status["topologyOrder"] == good["status"]["topologyOrder"]  # never replaced by a made-up default
    assert status["topologyCalculationTime"] == good["status"]["topologyCalculationTime"]
    assert status["runningWorkloads"] == 2  # the rest of the status is still maintained


def test_an_invalid_spec_without_history_has_no_order() -> None:
    raw = raw_a1()
    raw["spec"]["workloads"] = [workload("a", "b"), workload("b", "a")]
    status = status_of(raw, cluster())
    assert "topologyOrder" not in status
    assert status["conditions"][0]["reason"] == "DependencyCycle"


def test_order_is_recomputed_only_when_the_spec_changed() -> None:
    first = status_of(with_status(raw_a1(), {}, generation=1), cluster())
    tampered = copy.deepcopy(first)
    tampered["topologyOrder"][0]["index"] = 3  # not what the algorithm gives: proves nobody recomputed
    again = status_of(with_status(raw_a1(), tampered, generation=1), cluster(), LATER)
    assert again["topologyOrder"] == tampered["topologyOrder"]
    changed = status_of(with_status(raw_a1(), tampered, generation=2), cluster(), LATER)
    assert changed["topologyOrder"] == first["topologyOrder"]
    assert changed["topologyCalculationTime"] == "2026-11-22T13:00:00Z"


def test_calculation_time_and_transition_time_stay_when_nothing_changed() -> None:
    first = status_of(with_status(raw_a1(), {}, generation=1), cluster())
    respec = with_status(raw_a1(), first, generation=2)
    respec["spec"]["numMembers"] = 5  # spec changed, order did not
    again = status_of(respec, cluster(), LATER)
    assert again["topologyCalculationTime"] == first["topologyCalculationTime"]
    assert again["conditions"][0]["lastTransitionTime"] == first["conditions"][0]["lastTransitionTime"]
    assert again["observedGeneration"] == 2


def test_other_appgroups_are_unaffected_by_an_invalid_one() -> None:
    broken = raw_a1()
    broken["metadata"]["name"] = "broken"
    broken["spec"]["workloads"] = [workload("a", "a")]
    snapshot = build_snapshot([raw_a1(), broken])
    statuses = {group.metadata.name: appgroup_status(group, snapshot, NOW) for group in snapshot.app_groups}
    assert statuses["a1"].conditions[0].status == "True"  # type: ignore[index]
    assert statuses["broken"].conditions[0].status == "False"  # type: ignore[index]


def test_a_status_too_large_for_etcd_is_summarised_and_says_so() -> None:
    """10,000 workloads and a pod each: the placements become counts, then the order and the placements are
    left out, and the condition names what is missing; the object stays under etcd's limit."""
    workloads = [
        {"workload": {"kind": "Deployment", "name": f"w-{i:05d}", "selector": f"w-{i:05d}", "apiVersion": "apps/v1"}}
        for i in range(10_000)
    ]
    raw = raw_a1()
    raw["spec"].update(workloads=workloads, numMembers=10_000)
    pods = [pod(f"w-{i:05d}-abcde", f"w-{i:05d}", node="n-1") for i in range(10_000)]
    status = status_of(raw, cluster(*pods))
    size = len(json.dumps(status, separators=(",", ":")))
    assert size + len(json.dumps(raw, separators=(",", ":"))) < 1_400_000, size
    assert status.get("topologyOrder") is None
    assert status.get("placements") is None
    complete = next(c for c in status["conditions"] if c["type"] == "StatusComplete")
    assert complete["status"] == "False" and complete["reason"] == "TooLarge"
    assert "the 10000 pods of status.placements" in complete["message"]
    assert complete["message"].endswith(
        "the 10000 pods of status.placements (counts kept per workload); "
        "status.topologyOrder of 10000 workloads; status.placements"
    )


def test_a_large_status_keeps_its_order_when_counts_suffice() -> None:
    workloads = [{"workload": {"kind": "Deployment", "name": f"w{i}", "selector": f"w{i}"}} for i in range(50)]
    raw = raw_a1()
    raw["spec"].update(workloads=workloads, numMembers=50)
    pods = [pod(f"w{i % 50}-{i:06d}-with-a-long-generated-suffix", f"w{i % 50}", node="n-1") for i in range(12_000)]
    status = status_of(raw, cluster(*pods))
    assert len(status["topologyOrder"]) == 50
    assert sum(entry["podCount"] for entry in status["placements"]) == 12_000
    complete = next(c for c in status["conditions"] if c["type"] == "StatusComplete")
    assert complete["message"].endswith("the 12000 pods of status.placements (counts kept per workload)")


@pytest.mark.parametrize(
    ("bandwidth", "reason"), [("-5G", "negative bandwidth"), ("2P", "out of range"), ("1e99999999", "out of range")]
)
def test_a_min_bandwidth_that_is_not_a_bandwidth_is_an_invalid_spec(bandwidth: str, reason: str) -> None:
    """Ready=False naming the field (the controller's path for a spec that does not parse); never propagated."""
    from operators.controllers.appgroup import compute_status

    raw = raw_a1()
    raw["spec"]["workloads"][0]["dependencies"][0]["minBandwidth"] = bandwidth
    raw["metadata"]["generation"] = 7
    order = [{"workload": {"kind": "Deployment", "name": "w", "selector": "w"}, "index": 1}]
    raw["status"] = {"observedGeneration": 6, "topologyOrder": order}
    status = compute_status(raw, {}, {}, NOW).to_wire()
    (ready,) = status["conditions"]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert ready["observedGeneration"] == 7
    # decided about, though not valid: kubectl wait and GitOps health checks stop showing it as progressing
    assert status["observedGeneration"] == 7
    assert status["topologyOrder"] == raw["status"]["topologyOrder"]  # what the last valid spec gave stays
    assert ready["message"].startswith(f"spec.workloads[0].dependencies[0].minBandwidth: {reason}")
    with pytest.raises(FieldError):
        build_snapshot([raw])  # the webhook's view and the extender never see it either


def test_the_plan_says_where_planned_members_went() -> None:
    """Members released by a plan carry netaware.io/planned-node: per workload and planned node, how many were
    planned there and are bound there; on the plan, off it (bound elsewhere), pending (not bound yet)."""

    def planned(name: str, selector: str, node: str | None, at: str) -> dict[str, Any]:
        raw = pod(name, selector, node=node)
        raw["metadata"]["annotations"] = {"netaware.io/planned-node": at}
        return raw

    members = [
        planned("p1-a", "p1", "n-1", "n-1"),  # on the plan
        planned("p1-b", "p1", None, "n-1"),  # not bound yet
        planned("p2-a", "p2", "n-3", "n-2"),  # bound elsewhere
        pod("p3-a", "p3", node="n-4"),  # not planned: not counted
    ]
    status = status_of(
        raw_a1(), build_snapshot([*yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text()), *members])
    )
    assert status["plan"] == {
        "workloads": [
            {"selector": "p1", "nodes": [{"node": "n-1", "planned": 2, "bound": 1}]},
            {"selector": "p2", "nodes": [{"node": "n-2", "planned": 1, "bound": 0}]},
        ],
        "planned": 3,
        "onPlan": 1,
        "offPlan": 1,
        "pending": 1,
    }
    assert "plan" not in status_of(raw_a1(), cluster())  # nobody planned: no plan
