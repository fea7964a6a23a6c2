"""What the live components keep is bounded by the objects it describes: after 10,000 objects come and go, the
extender's unschedulable answers, the gate keeper's evicted pods, held pods and plan cost series, the descheduler's
per-node, per-namespace and per-AppGroup series, the rebalancer's history, the AppGroup controller's members and the
webhook's per-namespace series are all gone with them."""

from __future__ import annotations

import dataclasses

import pytest
from prometheus_client import generate_latest

from operators.api.appgroup import AppGroup
from operators.api.config.controllers import AppGroupOptions
from operators.api.config.scheduler import SchedulerConfig
from operators.controllers.appgroup import _State
from operators.controllers.descheduler_metrics import DeschedulerMetrics
from operators.controllers.gates import GateKeeper
from operators.controllers.metrics import REGISTRY
from operators.controllers.pass_writes import StrandChecks
from operators.controllers.plan_events import PLAN_COST
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.rebalancing.safety import History, MoveRecord
from operators.engine.scheduling.framework import PodInputs
from operators.engine.scheduling.index import ClusterIndex
from operators.extender.answers import ExtenderState
from operators.sources.cache import ClusterCache
from operators.sources.kinds import APPGROUP_PODS, APPGROUP_SPECS, NAMESPACES, PODS
from operators.sources.store import Change
from webhooks.server import WebhookMetrics
from webhooks.view import ClusterView

COUNT = 10_000


def pod(name: str, gated: bool = True) -> Pod:
    spec = {"containers": [{"name": "c"}], **({"schedulingGates": [{"name": "netaware.io/topology-order"}]} if gated
                                              else {})}  # fmt: skip
    labels = {"appgroup.diktyo.x-k8s.io": "shop", "appgroup.diktyo.x-k8s.io.workload": "web"}
    return Pod.parse({"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels},
                      "spec": spec})  # fmt: skip


def appgroup(name: str) -> AppGroup:
    return AppGroup.model_validate({
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1", "kind": "AppGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"numMembers": 1, "topologySortingAlgorithm": "KahnSort",
                 "workloads": [{"workload": {"kind": "Deployment", "name": "web", "selector": "web"}}]},
    })  # fmt: skip


def series(text: str, metric: str) -> int:
    return sum(1 for line in text.splitlines() if line.startswith(metric + "{"))


def test_the_extenders_unschedulable_answers_go_with_the_index_they_were_given_on() -> None:
    node = Node.parse({"metadata": {"name": "n-1"}, "status": {"allocatable": {"cpu": "1"}}})
    current: list[ClusterIndex] = []
    state = ExtenderState(Snapshot, SchedulerConfig(), indexes=lambda: current[-1])
    inputs = PodInputs.of(pod("p"))
    for step in range(COUNT):  # every pod change makes a new index; a pod kube-scheduler retries fits nowhere
        current[:] = [ClusterIndex.build(Snapshot(nodes=(node,)))]
        index = state.index()
        candidates = state.candidates(index, ["n-1"], None)
        reason = (f"retry {step}: no node fits",)
        _, why = state.answer("filter", candidates, inputs, lambda reason=reason: (b"{}", reason))
        assert why == reason
    assert len(state._nowhere) == 1 and len(state._answers) == 1


def test_the_gate_keeper_forgets_pods_and_appgroups_that_are_gone() -> None:
    keeper = GateKeeper(ClusterCache(()), 60.0, {})
    for step in range(COUNT):
        gated = pod(f"web-{step}")
        keeper.on_changes([Change(APPGROUP_PODS.name, None, gated)])
        keeper.evictions.evicted.add(gated.uid)  # evicted as stranded (what _abandon records)
        keeper.on_changes([Change(APPGROUP_PODS.name, gated, None)])
        group = appgroup(f"shop-{step}")
        PLAN_COST.labels("default", group.metadata.name, "plan").set(step)
        PLAN_COST.labels("default", group.metadata.name, "greedy").set(step)
        keeper.problems[("default", group.metadata.name)] = None
        keeper.on_changes([Change(APPGROUP_SPECS.name, None, group), Change(APPGROUP_SPECS.name, group, None)])
    assert (
        keeper.evictions.evicted == set()
        and keeper.arrived == {}
        and keeper.problems == {}
        and keeper.announcer.announced == {}
    )
    assert dict(keeper.gated) == {} and dict(keeper.placing) == {} and keeper.releases.in_flight == {}
    text = generate_latest(REGISTRY).decode()  # the process's registry: other tests' AppGroups may be in it
    assert [line for line in text.splitlines() if 'appgroup="shop-' in line] == []


def test_the_strand_checks_forget_pods_checked_longer_ago_than_their_period(monkeypatch: pytest.MonkeyPatch) -> None:
    """3,000 released pods (bound or gone since: never asked about again) checked once each, 100 a second, KEPT
    1,000: what is remembered never passes KEPT + 1 (then the pods checked in the last 2 s stay, 200)."""
    monkeypatch.setattr(StrandChecks, "KEPT", 1000)
    checks = StrandChecks(2.0)
    largest = 0
    for step in range(3000):
        labels = {"appgroup.diktyo.x-k8s.io": "shop", "appgroup.diktyo.x-k8s.io.workload": "web"}
        released = Pod.parse({"metadata": {"name": f"web-{step}", "namespace": "default", "uid": f"uid-{step}",
                                           "labels": labels, "annotations": {"netaware.io/planned-node": "n-1"}},
                              "spec": {"containers": [{"name": "c"}]}})  # fmt: skip
        assert checks.due([released], step * 0.01) == [released]
        largest = max(largest, len(checks.checked))
    assert largest == 1001


def test_the_descheduler_series_go_with_their_nodes_namespaces_and_appgroups() -> None:
    metrics = DeschedulerMetrics.create()
    kept = Node.parse({"metadata": {"name": "kept"}})
    for step in range(COUNT):
        metrics.utilization.labels(f"node-{step}", "netBandwidth").set(50)
        metrics.ratio.labels(f"node-{step}", "netBandwidth").set(0.5)
        metrics.evicted.labels("success", f"node-{step}", f"team-{step}").inc()
        metrics.cost.labels(f"default/shop-{step}", "before").set(3)
    metrics.utilization.labels("kept", "netBandwidth").set(10)
    metrics.prune(Snapshot(nodes=(kept,)))
    text = generate_latest(metrics.registry).decode()
    assert series(text, "netaware_node_utilization_percent") == 1
    assert series(text, "netaware_node_utilization_ratio") == 0
    assert 'netaware_node_utilization_percent{node="kept",resource="netBandwidth"} 10.0' in text
    assert series(text, "descheduler_pods_evicted_total") == 0
    assert series(text, "netaware_rebalance_appgroup_cost") == 0
    assert len(metrics.utilization.held) == 1 and not metrics.evicted.held and not metrics.cost.held


def test_the_webhooks_namespace_series_go_with_their_namespaces() -> None:
    view = ClusterView()
    metrics = WebhookMetrics.create()
    view.on_namespace_deleted(metrics.forget_namespace)
    live = view._live
    assert live is not None
    for step in range(COUNT):
        raw = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{step}"}}
        live.apply(NAMESPACES, "ADDED", dict(raw))
        metrics.namespace_default_errors.labels(f"team-{step}").inc()
        live.apply(NAMESPACES, "DELETED", dict(raw))
    assert series(generate_latest(metrics.registry).decode(), "netaware_webhook_namespace_default_errors") == 0


def test_a_deleted_pod_of_a_statefulset_may_be_evicted_again_when_its_replacement_strands() -> None:
    keeper = GateKeeper(ClusterCache(()), 60.0, {})
    first = pod("db-0")
    keeper.on_changes([Change(APPGROUP_PODS.name, None, first)])
    keeper.evictions.evicted.add(first.uid)
    keeper.on_changes([Change(APPGROUP_PODS.name, first, None)])
    replacement = dataclasses.replace(pod("db-0"), uid="uid-db-0-again")  # same name, new pod
    keeper.on_changes([Change(APPGROUP_PODS.name, None, replacement)])
    assert replacement.uid not in keeper.evictions.evicted


def test_the_rebalancers_history_forgets_pods_workloads_and_nodes_that_are_gone() -> None:
    history = History()
    for step in range(COUNT):  # a move whose workload and target node are then deleted
        history.record(MoveRecord(f"default/web-{step}", f"default/Deployment/web-{step}", "default", "a",
                                  f"node-{step}", float(step), 0))  # fmt: skip
        history.missed.add((f"default/Deployment/web-{step}", f"node-{step}"))
    history.settle(Snapshot(), COUNT + 10_000.0, lifetime=60)
    assert history.in_flight == [] and history.evicted == {} and history.moved == {}
    assert history.targets == {} and history.missed == set()


def test_the_appgroup_controller_keeps_members_only_while_a_label_has_pods() -> None:
    state = _State(ClusterCache(()), AppGroupOptions())
    for step in range(COUNT):  # a label (an AppGroup name) per pod, each pod created and deleted
        labels = {"appgroup.diktyo.x-k8s.io": f"group-{step}", "appgroup.diktyo.x-k8s.io.workload": "web"}
        member = Pod.parse({"metadata": {"name": f"p-{step}", "namespace": f"team-{step}", "labels": labels}})
        state.on_changes([Change(PODS.name, None, member), Change(PODS.name, member, None)])
        state.set_body(("default", f"group-{step}"), {"metadata": {"name": f"group-{step}"}, "spec": {}})
        state.forget(("default", f"group-{step}"))
    assert dict(state.members) == {} and dict(state.by_name) == {} and state.bodies == {}
