"""The volume filters and the default spread selector in every decision: `netaware schedule`/`explain` (a
PersistentVolume's node affinity; a claim that does not exist: kube-scheduler's PreFilter message alone; a Service
selecting a pod for the default spread constraints), and the planner (a pod whose volume lives on one node is planned
there, its AppGroup's dependency following it). Expected values derived by hand from the objects."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from operators.api.config.scheduler import DefaultSpread
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling.explain import unavailable
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import schedule
from operators.engine.simulation import ordered
from tests.engine.test_kube_volumes import bound_pvc, pv
from tests.support.planning import CONFIG, node, placed, plan_of, pod, topology


def claimed(name: str, workload: str, claim: str) -> dict[str, Any]:
    """A pod of ``workload`` mounting claim ``claim``."""
    return pod(name, workload, spec={"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]})


def storage(on: str) -> list[dict[str, Any]]:
    """Claim ``data`` bound to a local volume only node ``on`` reaches."""
    volume = pv("local-1", storage_class="local", capacity="1Gi", affinity={"kubernetes.io/hostname": [on]},
                claim=("default", "data", ""))  # fmt: skip
    return [bound_pvc("data", "local-1", storage_class="local", phase="Bound"), volume]


def decide(objects: list[dict[str, Any]], name: str) -> tuple[str | None, dict[str, dict[str, str]], str]:
    group = ordered.appgroup("pair", {"db": []})
    index = ClusterIndex.build(replace(build_snapshot(objects), app_groups=(group,)))
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
        index = ClusterIndex.build(replace(build_snapshot(objects), app_groups=(group,)))
        target = next(p for p in index.snapshot.pods if p.name == "web-2")
        verdict = schedule(target, index, config).filters["n1"]["PodTopologySpread"]
        assert (verdict == "node(s) didn't match pod topology spread constraints") is refused, verdict
