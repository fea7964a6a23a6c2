"""The topology-order gate's release rule (engine/status/gates.py), expectations derived by hand.

The AppGroup ``shop``: frontend depends on cart and catalog; cart depends on redis. Dependencies first:
redis and catalog depend on nothing and go first; cart waits for redis; frontend waits for cart, catalog and,
through cart, redis.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from operators.api.appgroup import AppGroup
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.planning.release import shared_budget
from operators.engine.status.appgroup import appgroup_status
from operators.engine.status.gates import (
    GATE,
    IN_ORDER,
    INVALID_APPGROUP,
    NO_APPGROUP,
    NOT_A_WORKLOAD,
    TIMEOUT,
    Waiting,
    gate_plan,
    release_patch,
    timeout_of,
)

T0 = datetime.datetime(2026, 11, 23, 6, 0, tzinfo=datetime.UTC).timestamp()


def group(dependencies: dict[str, list[str]] | None = None, annotations: dict[str, str] | None = None) -> AppGroup:
    graph = dependencies or {"frontend": ["cart", "catalog"], "cart": ["redis"], "catalog": [], "redis": []}
    workloads = [
        {
            "workload": {"kind": "Deployment", "name": selector, "selector": selector},
            "dependencies": [
                {"workload": {"kind": "Deployment", "name": child, "selector": child}} for child in children
            ],
        }
        for selector, children in graph.items()
    ]
    return AppGroup.model_validate(
        {
            "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
            "kind": "AppGroup",
            "metadata": {"name": "shop", "namespace": "default", "annotations": annotations or {}},
            "spec": {"numMembers": len(workloads), "topologySortingAlgorithm": "KahnSort", "workloads": workloads},
        }
    )


def pod(
    name: str,
    selector: str | None,
    gates: tuple[str, ...] = (GATE,),
    node: str = "",
    phase: str = "Pending",
    age: float = 5.0,
) -> Pod:
    labels = {"appgroup.diktyo.x-k8s.io": "shop"}
    if selector is not None:
        labels["appgroup.diktyo.x-k8s.io.workload"] = selector
    spec: dict[str, Any] = {"schedulingGates": [{"name": gate} for gate in gates]} if gates else {}
    if node:
        spec["nodeName"] = node
    created = datetime.datetime.fromtimestamp(T0 - age, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Pod.parse(
        {
            "metadata": {"name": name, "namespace": "default", "labels": labels, "creationTimestamp": created},
            "spec": spec,
            "status": {"phase": phase},
        }
    )


def released(plan: Any) -> dict[str, str]:
    return {item.pod.name: item.reason for item in plan.release}


SHOP = [pod("frontend-1", "frontend"), pod("cart-1", "cart"), pod("catalog-1", "catalog"), pod("redis-1", "redis")]


def test_dependencies_go_first_and_dependents_wait_for_them() -> None:
    plan = gate_plan(group(), SHOP, T0, 60)
    assert released(plan) == {"catalog-1": IN_ORDER, "redis-1": IN_ORDER}
    assert plan.waiting == (
        Waiting("frontend", 1, ("cart", "catalog", "redis")),
        Waiting("cart", 1, ("redis",)),
    )
    assert plan.next_deadline == T0 - 5 + 60  # every pod is 5 s old; the first to time out does so at 55 s


def test_a_bound_dependency_releases_the_next_wave() -> None:
    pods = [
        pod("frontend-1", "frontend"),
        pod("cart-1", "cart"),
        pod("catalog-1", "catalog", gates=(), node="n1"),
        pod("redis-1", "redis", gates=(), node="n2"),
    ]
    plan = gate_plan(group(), pods, T0, 60)
    assert released(plan) == {"cart-1": IN_ORDER}
    assert plan.waiting == (Waiting("frontend", 1, ("cart",)),)


def test_every_replica_of_a_dependency_must_be_placed() -> None:
    pods = [
        pod("cart-1", "cart"),
        pod("cart-2", "cart"),
        pod("redis-1", "redis", gates=(), node="n2"),
        pod("redis-2", "redis", gates=()),  # ungated but not bound yet (still in kube-scheduler's queue)
    ]
    plan = gate_plan(group(), pods, T0, 60)
    assert released(plan) == {}
    assert plan.waiting == (Waiting("cart", 2, ("redis",)),)
    finished = [*pods[:3], pod("redis-2", "redis", gates=(), phase="Failed")]  # terminated: holds no one
    assert released(gate_plan(group(), finished, T0, 60)) == {"cart-1": IN_ORDER, "cart-2": IN_ORDER}


def test_a_workload_without_pods_holds_no_one_but_what_it_depends_on_does() -> None:
    # No cart pods at all: frontend waits for catalog and redis (through cart), not for cart.
    pods = [pod("frontend-1", "frontend"), pod("catalog-1", "catalog", gates=(), node="n1"), pod("redis-1", "redis")]
    plan = gate_plan(group(), pods, T0, 60)
    assert released(plan) == {"redis-1": IN_ORDER}
    assert plan.waiting == (Waiting("frontend", 1, ("redis",)),)


def test_timeout_releases_whatever_the_order() -> None:
    pods = [pod("frontend-1", "frontend", age=61), pod("frontend-2", "frontend", age=59), pod("cart-1", "cart")]
    plan = gate_plan(group(), pods, T0, 60)
    assert released(plan) == {"cart-1": IN_ORDER, "frontend-1": TIMEOUT}
    assert next(item.waited for item in plan.release if item.pod.name == "frontend-1") == 61
    assert plan.waiting == (Waiting("frontend", 1, ("cart",)),)
    assert plan.next_deadline == T0 + 1  # frontend-2, 59 s old, times out in 1 s
    assert released(gate_plan(group(), pods, None, 60)) == {"cart-1": IN_ORDER}  # no clock: no timeouts


def test_timeout_annotation() -> None:
    pods = [pod("frontend-1", "frontend", age=61), pod("cart-1", "cart", gates=())]
    longer = group(annotations={"netaware.io/ordered-scheduling-timeout": "2m"})
    plan = gate_plan(longer, pods, T0, 60)
    assert released(plan) == {}
    assert plan.next_deadline == T0 - 61 + 120
    assert timeout_of(longer, 60) == (120.0, None)
    assert timeout_of(group(annotations={"netaware.io/ordered-scheduling-timeout": "90"}), 60) == (90.0, None)
    bad, problem = timeout_of(group(annotations={"netaware.io/ordered-scheduling-timeout": "soon"}), 60)
    assert bad == 60.0
    assert problem is not None and '"soon"' in problem and "ordered-scheduling-timeout" in problem
    assert timeout_of(group(annotations={"netaware.io/ordered-scheduling-timeout": "0"}), 60)[0] == 60.0
    assert timeout_of(group(annotations={"netaware.io/ordered-scheduling-timeout": "48h"}), 60)[0] == 60.0


def test_a_changed_order_is_followed_at_the_next_evaluation() -> None:
    # cart no longer depends on redis: the cart pod held before is released now.
    before = gate_plan(group(), SHOP, T0, 60)
    assert "cart-1" not in released(before)
    after = gate_plan(group({"frontend": ["cart"], "cart": [], "catalog": [], "redis": []}), SHOP, T0, 60)
    assert released(after) == {"cart-1": IN_ORDER, "catalog-1": IN_ORDER, "redis-1": IN_ORDER}
    assert after.waiting == (Waiting("frontend", 1, ("cart",)),)


def test_an_invalid_or_missing_appgroup_releases_everything_at_once() -> None:
    cycle = group({"frontend": ["cart"], "cart": ["frontend"], "catalog": [], "redis": []})
    assert released(gate_plan(cycle, SHOP, T0, 60)) == dict.fromkeys(
        ("frontend-1", "cart-1", "catalog-1", "redis-1"), INVALID_APPGROUP
    )
    assert released(gate_plan(None, SHOP, T0, 60)) == dict.fromkeys(
        ("frontend-1", "cart-1", "catalog-1", "redis-1"), NO_APPGROUP
    )


def test_a_missing_appgroup_holds_a_young_pod_for_the_grace_its_watch_may_be_late() -> None:
    """The AppGroup's watch may show it after its pods: a pod 1 s old waits until it is 3 s old (T0 + 2), one 4 s
    old goes at once."""
    pods = [pod("frontend-1", "frontend", age=1.0), pod("redis-1", "redis", age=4.0)]
    plan = gate_plan(None, pods, T0, 60)
    assert released(plan) == {"redis-1": NO_APPGROUP}
    assert plan.next_deadline == T0 + 2.0
    assert released(gate_plan(None, pods, T0 + 2.0, 60)) == {"frontend-1": NO_APPGROUP, "redis-1": NO_APPGROUP}
    assert released(gate_plan(None, pods, None, 60)) == {"frontend-1": NO_APPGROUP, "redis-1": NO_APPGROUP}
    cycle = group({"frontend": ["cart"], "cart": ["frontend"], "catalog": [], "redis": []})
    assert released(gate_plan(cycle, pods, T0, 60)) == {"frontend-1": INVALID_APPGROUP, "redis-1": INVALID_APPGROUP}


def test_pods_outside_the_spec_and_ungated_pods() -> None:
    pods = [pod("stray", "nginx"), pod("unlabelled", None), pod("free", "frontend", gates=())]
    plan = gate_plan(group(), pods, T0, 60)
    assert released(plan) == {"stray": NOT_A_WORKLOAD, "unlabelled": NOT_A_WORKLOAD}
    assert plan.waiting == ()
    assert gate_plan(group(), [pod("free", "frontend", gates=("other.io/quota",))], T0, 60) == gate_plan(
        group(), [], T0, 60
    )


def test_the_patch_removes_only_our_gate_and_tests_the_list_first() -> None:
    gated = pod("cart-1", "cart", gates=("other.io/quota", GATE, "third.io/x"))
    assert release_patch(gated) == [
        {
            "op": "test",
            "path": "/spec/schedulingGates",
            "value": [{"name": "other.io/quota"}, {"name": GATE}, {"name": "third.io/x"}],
        },
        {
            "op": "replace",
            "path": "/spec/schedulingGates",
            "value": [{"name": "other.io/quota"}, {"name": "third.io/x"}],
        },
    ]


def test_the_status_counts_held_pods_per_workload() -> None:
    now = datetime.datetime.fromtimestamp(T0, datetime.UTC)
    pods = (pod("frontend-1", "frontend", age=600), pod("frontend-2", "frontend"), *SHOP[1:])
    status = appgroup_status(group(), Snapshot(pods=pods), now).to_wire()
    # Timeouts are not the status's business: frontend-1, 600 s old, is still counted as held.
    assert status["gatedPods"] == [
        {"selector": "frontend", "pods": 2, "waitingFor": ["cart", "catalog", "redis"]},
        {"selector": "cart", "pods": 1, "waitingFor": ["redis"]},
    ]
    assert appgroup_status(group(), Snapshot(), now).to_wire()["gatedPods"] == []  # empty, not absent: merge patch


def test_a_workload_without_pods_yet_holds_new_pods_for_the_grace_only() -> None:
    # frontend-1 is 1 s old and no cart pod exists yet: the Deployments of one apply arrive in any order.
    pods = [pod("frontend-1", "frontend", age=1), pod("catalog-1", "catalog", gates=(), node="n1")]
    plan = gate_plan(group(), pods, T0, 60, grace=3)
    assert released(plan) == {}
    assert plan.waiting == (Waiting("frontend", 1, ("cart", "redis")),)
    assert plan.next_deadline == T0 - 1 + 3  # looked at again when the grace ends
    later = gate_plan(group(), pods, T0 + 2.5, 60, grace=3)  # 3.5 s old: cart and redis never came
    assert released(later) == {"frontend-1": IN_ORDER}


def test_a_new_pod_waits_for_the_grace_even_when_its_dependencies_look_placed() -> None:
    # A ReplicaSet creates replicas in batches: redis-1 is bound, redis-2 may not exist yet. cart-1, 1 s old,
    # waits until it is 3 s old; catalog, depending on nothing, goes at once.
    pods = [
        pod("cart-1", "cart", age=1),
        pod("catalog-1", "catalog", age=1),
        pod("redis-1", "redis", gates=(), node="n"),
    ]
    plan = gate_plan(group(), pods, T0, 60, grace=3)
    assert released(plan) == {"catalog-1": IN_ORDER}
    assert plan.waiting == (Waiting("cart", 1, ("redis",)),)
    assert plan.next_deadline == T0 + 2
    assert released(gate_plan(group(), pods, T0 + 2, 60, grace=3)) == {"catalog-1": IN_ORDER, "cart-1": IN_ORDER}


def test_a_backlog_shares_the_planners_time_down_to_a_floor() -> None:
    # configured 100 ms, half a second to share: 1 or 5 waiting keep 100 ms, 10 get 50 ms, 100 would get 5 ms and
    # get the 10 ms floor; a configured budget below the floor is kept
    assert [shared_budget(0.1, waiting, 0.5) for waiting in (0, 1, 5, 10, 100)] == [0.1, 0.1, 0.1, 0.05, 0.01]
    assert shared_budget(0.004, 100, 0.5) == 0.004


def test_a_burst_shares_a_third_of_a_second_each_second_among_its_plans() -> None:
    # 0.3 s of planning a second, over the plans of the last 2 s and those waiting: 28 made and 2 waiting share
    # 0.6 s, 20 ms each, under the pass's 250 ms share; 4 made and 1 waiting would get 120 ms, over the configured
    # 100 ms, which is kept; 58 made and 2 waiting would get 10 ms, under the 20 ms floor of 5,000 nodes; none
    # made: the pass's share alone
    assert shared_budget(0.1, 2, 0.5, recent=28) == pytest.approx(0.02)
    assert shared_budget(0.1, 1, 0.5, recent=4) == 0.1
    assert shared_budget(0.1, 2, 0.5, nodes=5000, recent=58) == pytest.approx(0.02)
    assert shared_budget(0.1, 10, 0.5, recent=0) == 0.05


def test_a_backlog_s_floor_leaves_a_plan_time_past_building_its_problem() -> None:
    # building a problem is charged 3 us a node: 15 ms on 5,000 nodes, so 100 waiting get 15 + 5 = 20 ms (the 10 ms
    # floor alone was spent before the greedy start began); 10 waiting get their 50 ms share, above it; on 1,000
    # nodes 3 + 5 = 8 ms is under the 10 ms floor, which holds; 150 ms on 50,000 nodes is over the configured
    # 100 ms, which is kept
    assert shared_budget(0.1, 100, 0.5, nodes=5000) == pytest.approx(0.02)
    assert shared_budget(0.1, 10, 0.5, nodes=5000) == 0.05
    assert shared_budget(0.1, 100, 0.5, nodes=1000) == 0.01
    assert shared_budget(0.1, 100, 0.5, nodes=50_000) == 0.1
