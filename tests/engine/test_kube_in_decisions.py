"""The volume filters and the default spread selector in every decision: `netaware schedule`/`explain` (a
PersistentVolume's node affinity; a claim that does not exist: kube-scheduler's PreFilter message alone; a Service
selecting a pod for the default spread constraints), and the planner (a pod whose volume lives on one node is planned
there, its AppGroup's dependency following it). Expected values derived by hand from the objects."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from operators.api.config.scheduler import DefaultSpread
from operators.engine.scheduling.explain import unavailable
from operators.engine.scheduling.schedule import schedule
from operators.engine.simulation import ordered
from tests.support.planning import CONFIG, group_index, node, placed, plan_of, pod, topology


def claimed(name: str, workload: str, claim: str) -> dict[str, Any]:
    """A pod of ``workload`` mounting claim ``claim``."""
    return pod(name, workload, spec={"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]})


def storage(on: str) -> list[dict[str, Any]]:
    """Claim ``data`` bound to a local volume only node ``on`` reaches."""
    reach = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                                          "values": [on]}]}]}  # fmt: skip
    volume = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "local-1"},
              "spec": {"storageClassName": "local", "capacity": {"storage": "1Gi"}, "nodeAffinity": {"required": reach},
                       "claimRef": {"namespace": "default", "name": "data"}}}  # fmt: skip
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "data", "namespace": "default",
                          "annotations": {"pv.kubernetes.io/bind-completed": "true"}},
             "spec": {"volumeName": "local-1", "storageClassName": "local"}, "status": {"phase": "Bound"}}  # fmt: skip
    return [claim, volume]


def decide(objects: list[dict[str, Any]], name: str) -> tuple[str | None, dict[str, dict[str, str]], str]:
    group = ordered.appgroup("pair", {"db": []})
    index = group_index(objects, group)
    target = next(p for p in index.snapshot.pods if p.name == name)
    result = schedule(target, index, CONFIG)
    return result.selected, result.filters, unavailable(result)


def test_a_pod_goes_where_its_volume_is_and_explain_names_volume_binding() -> None:
    # n1 and n2 are alike (4 cpu, nothing placed); the volume's node affinity names n2 alone
    objects = [node("n1", "za"), node("n2", "za"), topology(5), *storage("n2"), claimed("db-0", "db", "data")]
    selected, filters, message = decide(objects, "db-0")
    assert selected == "n2" and message == ""
    assert filters["n1"]["VolumeBinding"] == "node(s) didn't match PersistentVolume's node affinity"
    assert filters["n2"]["VolumeBinding"] == "passed"


def test_a_missing_claim_is_kube_schedulers_prefilter_message_alone() -> None:
    # VolumeRestrictions' PreFilter looks the claim up first: NotFound rejects the pod before any node is looked at,
    # and the FailedScheduling message names it once (not "2 persistentvolumeclaim ...")
    objects = [node("n1", "za"), node("n2", "zb"), topology(5), claimed("db-0", "db", "gone")]
    selected, _, message = decide(objects, "db-0")
    assert selected is None
    assert message == '0/2 nodes are available: persistentvolumeclaim "gone" not found.'


def test_the_planner_puts_a_pod_on_its_volumes_node_and_its_dependency_beside_it() -> None:
    # web -> db. Unconstrained, both would share the first node of the seeded order; db's volume is on n3 (zb), so
    # db goes to n3 and web joins it there (cost 0), not to n1 or n2 (cost 5 across the zones)
    objects = [node("n1", "za"), node("n2", "za"), node("n3", "zb"), topology(5), *storage("n3"),
               claimed("db-0", "db", "data"), pod("web-0", "web")]  # fmt: skip
    plan = plan_of(objects, {"web": ["db"], "db": []})
    assert placed(plan) == {"db-0": "n3", "web-0": "n3"} and plan.cost.cost == 0
    assert "VolumeBinding" in CONFIG.filters  # the planner's configuration runs the in-tree filters


def test_a_default_spread_counts_the_pods_a_service_selects() -> None:
    # defaultConstraints (List): maxSkew 1 per hostname, DoNotSchedule. The Service selects app=web: two web pods on
    # n1, none on n2; a third web pod on n1 would make the skew 3 - 0 > 1, so n1 is refused and n2 chosen. Without a
    # Service (nothing selects the pod) no default constraint applies and n1 passes the spread filter.
    def web(name: str, on: str = "") -> dict[str, Any]:
        body = pod(name, "web", on=on)
        body["metadata"]["labels"]["app"] = "web"
        return body

    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
               "spec": {"selector": {"app": "web"}}}  # fmt: skip
    config = replace(CONFIG, default_spread=(DefaultSpread(1, "kubernetes.io/hostname", "DoNotSchedule"),))
    cluster = [node("n1", "za"), node("n2", "za"), topology(5), web("web-0", "n1"), web("web-1", "n1"), web("web-2")]
    for objects, refused in (([*cluster, service], True), (cluster, False)):
        group = ordered.appgroup("pair", {"web": []})
        index = group_index(objects, group)
        target = next(p for p in index.snapshot.pods if p.name == "web-2")
        verdict = schedule(target, index, config).filters["n1"]["PodTopologySpread"]
        assert (verdict == "node(s) didn't match pod topology spread constraints") is refused, verdict


@pytest.mark.parametrize(
    ("plugin", "spec", "raw"),
    [
        # preferred anti-affinity of weight 100 to app=web per hostname: web-0 on n1 gives n1 -100, n2 0;
        # normalised min-max: n1 0, n2 100
        ("InterPodAffinity", {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": "web"}},
                                                "topologyKey": "kubernetes.io/hostname"}}]}}}, {"n1": -100, "n2": 0}),
        # ScheduleAnyway per hostname, maxSkew 1: n1 holds 1 matching pod, weighted log(2 nodes + 2) = 1.386 plus
        # maxSkew - 1 = 0, rounded: 1; n2 0. Normalised 100 x (max + min - raw) / max: n1 0, n2 100
        ("PodTopologySpread", {"topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": {"app": "web"}}}]}, {"n1": 1, "n2": 0}),
    ],
)  # fmt: skip
def test_kube_schedulers_soft_rules_are_scored_with_its_weights(plugin: str, spec: dict[str, Any],
                                                                 raw: dict[str, int]) -> None:  # fmt: skip
    # n1 and n2 alike, netaware's scores tie (no dependency, same zone): without the in-tree score the tie would go
    # to n1, the first name; with it n2 scores 100 x weight 2 = 200 more
    def web(name: str, on: str = "", extra: dict[str, Any] | None = None) -> dict[str, Any]:
        body = pod(name, "web", on=on, spec=extra)
        body["metadata"]["labels"]["app"] = "web"
        return body

    objects = [node("n1", "za"), node("n2", "za"), topology(5), web("web-0", "n1"), web("web-1", extra=spec)]
    group = ordered.appgroup("pair", {"web": []})
    index = group_index(objects, group)
    target = next(p for p in index.snapshot.pods if p.name == "web-1")
    result = schedule(target, index, CONFIG)
    assert {name: scores[plugin] for name, scores in result.raw.items()} == raw
    assert {name: scores[plugin] for name, scores in result.final.items()} == {"n1": 0, "n2": 200}
    assert result.selected == "n2"
    off = schedule(target, index, replace(CONFIG, in_tree_scores={}))
    assert off.selected == "n1" and plugin not in off.raw["n1"]


def test_a_prefilter_rejection_comes_before_every_nodes_filters() -> None:
    # n1 is cordoned and n2 tainted: the filters would refuse both, but kube-scheduler's PreFilter (the claim is
    # not found) rejects the pod before any Filter runs, and its message names that alone
    cordoned = node("n1", "za")
    cordoned["spec"]["unschedulable"] = True
    objects = [cordoned, node("n2", "zb", taint=True), topology(5), claimed("db-0", "db", "gone")]
    selected, filters, message = decide(objects, "db-0")
    assert selected is None and message == '0/2 nodes are available: persistentvolumeclaim "gone" not found.'
    assert filters["n1"]["VolumeRestrictions"] == 'persistentvolumeclaim "gone" not found'


def test_a_bound_pod_explained_again_is_not_another_user_of_its_own_read_write_once_pod_claim() -> None:
    # db-0 runs on n1 with a ReadWriteOncePod claim: explaining it passes VolumeRestrictions (kube-scheduler's
    # RemovePod took it off first); a second pod with the same claim is refused on every node
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "solo", "namespace": "default"},
             "spec": {"accessModes": ["ReadWriteOncePod"], "storageClassName": "local"}}  # fmt: skip
    running = claimed("db-0", "db", "solo")
    running["spec"]["nodeName"] = "n1"
    running["status"] = {"phase": "Running"}
    local = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
             "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"}  # fmt: skip
    objects = [node("n1", "za"), node("n2", "za"), topology(5), local, claim, running, claimed("db-1", "db", "solo")]
    _, filters, _ = decide(objects, "db-0")
    assert filters["n1"]["VolumeRestrictions"] == "passed"
    _, filters, _ = decide(objects, "db-1")
    conflict = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use "
                "by another pod")  # fmt: skip
    assert {node: verdicts["VolumeRestrictions"] for node, verdicts in filters.items()} == {
        "n1": conflict,
        "n2": conflict,
    }
