"""The NetworkTopology controller (real kopf) against the emulator."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from operators.api.config.controllers import ControllerOptions, NetworkTopologyOptions
from operators.emulator import ApiEmulator
from tests.integration.conftest import Api
from tests.integration.kopf_harness import running_operator
from tests.support.emulated import documents, eventually, reasons_posted
from tests.support.emulated import labelled_pod as pod
from tests.support.netperf import KEY, seeds_matrix

pytestmark = pytest.mark.integration

NT = "/apis/networktopology.diktyo.x-k8s.io/v1alpha1/namespaces/default/networktopologies"
RESOURCE = "networktopology.diktyo.x-k8s.io/v1alpha1/networktopologies"
CM = "/api/v1/namespaces/default/configmaps"
PODS = "/api/v1/namespaces/default/pods"
ZONE, REGION = "topology.kubernetes.io/zone", "topology.kubernetes.io/region"
DEBOUNCE = 1.0
OPTIONS = ControllerOptions(networktopology=NetworkTopologyOptions(debounce_seconds=DEBOUNCE, resync_seconds=60))


def topology(emulator: ApiEmulator) -> dict[str, Any]:
    return emulator.get_object(RESOURCE, "default", "net-topology-test") or {}


def netperf(emulator: ApiEmulator) -> dict[tuple[str, str, str], tuple[int, str]]:
    weights = topology(emulator).get("spec", {}).get("weights", [])
    weight = next((w for w in weights if w["name"] == "NetperfCosts"), {"topologyList": []})
    return {
        (t["topologyKey"], o["origin"], c["destination"]): (c["networkCost"], c["bandwidthAllocated"])
        for t in weight["topologyList"]
        for o in t["originList"]
        for c in o.get("costList", [])
    }


def recomputations(emulator: ApiEmulator) -> list[float]:
    """Times of the controller's status writes (kopf's own finalizer and annotation writes are not counted)."""
    times = [t for t, _, plural, _, _, sub in emulator.writes if plural == "networktopologies" and sub == "status"]
    clusters: list[float] = []
    for moment in times:
        if not clusters or moment - clusters[-1] > 0.3:
            clusters.append(moment)
    return clusters


async def test_networktopology_lifecycle(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(documents("cluster.yaml") + documents("appgroup-a1.yaml"))
    async with running_operator(emulator.base_url, ("networktopology",), OPTIONS):
        # 1. the NetworkTopology and its ConfigMap appear
        await api.call("POST", CM, {"metadata": {"name": "netperf-metrics"}, "data": seeds_matrix()})
        await api.call("POST", NT, documents("networktopology.yaml")[0])
        await eventually(lambda: (ZONE, "Z1", "Z2") in netperf(emulator) and "status" in topology(emulator))
        assert netperf(emulator)[(ZONE, "Z1", "Z2")] == (6, "0")
        assert netperf(emulator)[(REGION, "us-east-1", "us-west-1")] == (30, "0")
        status = topology(emulator)["status"]
        assert status["nodeCount"] == 8 and status["conditions"][0]["reason"] == "CostsComputed"
        user_defined = documents("networktopology.yaml")[0]["spec"]["weights"][0]
        assert topology(emulator)["spec"]["weights"][0] == user_defined

        # 2. a measurement changes (several quick edits: debounced)
        for value in ("40", "41", "42", "43", "44"):
            data = {KEY.format(a, "n-1"): value for a in ("n-3", "n-4")}
            await api.call("PATCH", CM + "/netperf-metrics", {"data": data}, "application/merge-patch+json")
        await eventually(lambda: netperf(emulator).get((ZONE, "Z2", "Z1"), (0,))[0] == 25)  # median of 5,5,44,44

        # 3. a node moves to another zone of its region
        await api.call(
            "PATCH", "/api/v1/nodes/n-4", {"metadata": {"labels": {ZONE: "Z5"}}}, "application/merge-patch+json"
        )
        await eventually(lambda: (ZONE, "Z1", "Z5") in netperf(emulator))
        assert netperf(emulator)[(ZONE, "Z5", "Z2")] == (1, "0")  # n-4 -> n-3 was a same-zone measurement

        # 4. AppGroup pods are scheduled: p2 in Z1 depends on p3 (250Mi) in Z2
        await api.call("POST", PODS, pod("p2-a", "p2", "n-1"))
        await api.call("POST", PODS, pod("p3-a", "p3", "n-3"))
        await eventually(lambda: netperf(emulator).get((ZONE, "Z1", "Z2"), (0, ""))[1] == "250Mi")

        # 5. ... and deleted: the allocation is exact, not accumulated
        await api.call("DELETE", PODS + "/p3-a")
        await eventually(lambda: netperf(emulator).get((ZONE, "Z1", "Z2"), (0, ""))[1] == "0")

        # 6. the ConfigMap disappears: Ready=False, the weights stay
        weights = topology(emulator)["spec"]["weights"]
        await api.call("DELETE", CM + "/netperf-metrics")
        await eventually(lambda: topology(emulator)["status"]["conditions"][0]["reason"] == "ConfigMapNotFound")
        assert topology(emulator)["spec"]["weights"] == weights
        await reasons_posted(api, "ConfigMapNotFound")

        # Never more than one recomputation per debounce interval, and quiet when nothing changes.
        times = recomputations(emulator)
        assert all(later - earlier >= DEBOUNCE - 0.05 for earlier, later in itertools.pairwise(times))
        before = len(emulator.writes)
        await asyncio.sleep(DEBOUNCE * 2.5)
        assert len(emulator.writes) == before

        # No finalizer: with the operator gone (helm uninstall), nothing would remove it, and the CRD's deletion
        # would hang on every NetworkTopology (a kopf daemon puts one on each object).
        assert "finalizers" not in topology(emulator)["metadata"]

        # 7. deleted and created again: the new object gets a computation of its own
        await api.call("DELETE", NT + "/net-topology-test")
        await api.call("POST", CM, {"metadata": {"name": "netperf-metrics"}, "data": seeds_matrix()})
        await api.call("POST", NT, documents("networktopology.yaml")[0])
        await eventually(lambda: "status" in topology(emulator))


async def test_skipped_entries_are_one_capped_event(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(documents("cluster.yaml"))
    async with running_operator(emulator.base_url, ("networktopology",), OPTIONS):
        bad = {f"netperf.p90.latency.milliseconds.origin.n-1.destination.ghost-{i}": "5" for i in range(30)}
        await api.call("POST", CM, {"metadata": {"name": "netperf-metrics"}, "data": {**seeds_matrix(), **bad}})
        await api.call("POST", NT, documents("networktopology.yaml")[0])
        await eventually(lambda: topology(emulator).get("status", {}).get("netperf", {}).get("skipped") == 30)
        status = topology(emulator)["status"]
        assert len(status["netperf"]["skippedEntries"]) == 20
        assert status["netperf"]["measurements"] == 56
        await reasons_posted(api, "NetperfEntriesSkipped")
        await asyncio.sleep(DEBOUNCE * 1.5)  # later recomputations do not repeat it
        _, events = await api.call("GET", "/api/v1/namespaces/default/events")
        skipped = [event for event in events["items"] if event["reason"] == "NetperfEntriesSkipped"]
        assert len(skipped) == 1
        assert skipped[0]["message"].startswith("30 netperf entries skipped: ")
        assert "(and 25 more, see status.netperf)" in skipped[0]["message"]


def test_changes_of_other_kinds_in_the_shared_cache_are_not_pods() -> None:
    """The process's cache also follows NodeSLOs and namespaces: their changes reach the controller's listener,
    which must neither fail on them (a NodeSLO has no labels attribute) nor mark anything."""
    from operators.api.nodeslo import NodeSLO
    from operators.controllers.networktopology import _State
    from operators.engine.cluster.objects import Pod
    from operators.sources.cache import ClusterCache
    from operators.sources.store import Change

    state = _State(ClusterCache(()))
    event = asyncio.Event()
    state.dirty[("default", "nt")] = event
    slo = NodeSLO.model_validate(
        {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": "n-1"}, "spec": {}}
    )
    state.on_changes([Change("nodeslos", None, slo), Change("nodeslos", slo, None)])
    assert not event.is_set()
    labelled = pod("p", "p1", "n-1")
    state.on_changes([Change("pods", None, Pod.parse(labelled))])
    assert event.is_set()


async def test_a_spec_that_does_not_parse_is_a_failed_status_with_its_generation_observed(
    api: Api, emulator: ApiEmulator
) -> None:
    """kubectl wait and GitOps health checks compare status.observedGeneration with metadata.generation: a broken
    spec shows as failed (Ready=False InvalidSpec naming the field), not as progressing forever; one Event."""
    await emulator.seed(documents("cluster.yaml"))
    broken = documents("networktopology.yaml")[0]
    del broken["spec"]["configmapName"]
    async with running_operator(emulator.base_url, ("networktopology",), OPTIONS):
        await api.call("POST", NT, broken)
        status = await eventually(lambda: topology(emulator).get("status", {}).get("observedGeneration") and
                                  topology(emulator)["status"])  # fmt: skip
        assert status["observedGeneration"] == topology(emulator)["metadata"]["generation"]
        (ready,) = status["conditions"]
        assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "False", "InvalidSpec")
        assert ready["message"].startswith("spec.configmapName"), ready["message"]
        await reasons_posted(api, "InvalidSpec")
        await asyncio.sleep(DEBOUNCE * 2.5)  # recomputations neither rewrite the status nor repeat the Event
        _, events = await api.call("GET", "/api/v1/namespaces/default/events")
        assert [e["reason"] for e in events["items"]].count("InvalidSpec") == 1
