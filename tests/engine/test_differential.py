"""Differential: on random clusters, the extender's answers (both nodeCacheCapable forms, over HTTP),
`netaware schedule` and one step of the simulator agree exactly — filter verdicts, reasons and scores, all
three plugins, both accountings. Each is an entry point of the same scheduling framework and bandwidth model;
a rule written twice would show here."""

from __future__ import annotations

import asyncio
import copy
import random
from typing import Any

import numpy as np
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.api.config.scheduler import PLUGINS, NetworkBandwidthArgs, NetworkOverheadArgs, SchedulerConfig
from operators.api.quantity import Quantity
from operators.engine.cluster.bandwidth import Accounting, headroom_score
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import PASSED, schedule
from operators.engine.simulation.cluster import Cluster
from operators.engine.simulation.simulate import bandwidth_fits, total_capacity
from operators.extender.answers import ExtenderState
from operators.extender.server import build_app, extender_scores
from tests.support.clusters import random_cluster

BANDWIDTHS = ["0", "10M", "50M", "100M", "250M", "400M"]
CAPACITIES = ["200M", "500M", "1G", "1Gi"]


def with_bandwidth(objects: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """The random cluster with node capacities (annotation, or none: the default applies) and placed pods'
    requests and limits."""
    result = copy.deepcopy(objects)
    for obj in result:
        annotations = obj["metadata"].setdefault("annotations", {})
        if obj["kind"] == "Node" and rng.random() < 0.8:
            key = rng.choice(["node.koordinator.sh/network-bandwidth", "node.kubernetes.io/network-limit"])
            annotations[key] = rng.choice(CAPACITIES)
        if obj["kind"] == "Pod":
            for direction in ("ingress", "egress"):
                if rng.random() < 0.7:
                    annotations[f"kubernetes.io/{direction}-bandwidth"] = rng.choice(BANDWIDTHS)
    return result


def pending_pod(rng: random.Random, group: int) -> dict[str, Any]:
    annotations = {f"kubernetes.io/{d}-request": rng.choice(BANDWIDTHS) for d in ("ingress", "egress")}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "pending",
            "namespace": "default",
            "uid": f"uid-{rng.random()}",
            "labels": {"appgroup.diktyo.x-k8s.io": f"g{group}", "appgroup.diktyo.x-k8s.io.workload": "w0"},
            "annotations": annotations,
        },
    }


async def extender_answers(
    snapshot: Any, config: SchedulerConfig, pod: dict[str, Any], nodes: list[dict[str, Any]]
) -> dict[str, Any]:
    names = [node["metadata"]["name"] for node in nodes]
    async with TestClient(TestServer(build_app(ExtenderState(lambda: snapshot, config)))) as client:
        by_name = await (await client.post("/filter", json={"Pod": pod, "NodeNames": names})).json()
        by_object = await (
            await client.post("/filter", json={"Pod": pod, "Nodes": {"kind": "NodeList", "items": nodes}})
        ).json()
        passing = by_name["NodeNames"]
        scores = await (await client.post("/prioritize", json={"Pod": pod, "NodeNames": passing})).json()
        passing_objects = [node for node in nodes if node["metadata"]["name"] in passing]
        scores_objects = await (
            await client.post("/prioritize", json={"Pod": pod, "Nodes": {"kind": "NodeList", "items": passing_objects}})
        ).json()
    return {"by_name": by_name, "by_object": by_object, "scores": scores, "scores_objects": scores_objects}


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32), st.sampled_from(list(Accounting)))
def test_extender_schedule_and_simulator_agree(seed: int, accounting: Accounting) -> None:
    rng = random.Random(seed)
    objects = with_bandwidth(random_cluster(rng, nodes=12, zones=4), rng)
    snapshot = build_snapshot(objects)
    default = Quantity.parse("300M")
    config = SchedulerConfig(
        weights=dict.fromkeys(PLUGINS, 1) | {"NetworkBandwidth": 2},
        overhead=NetworkOverheadArgs(network_topology_name="net-topology-test"),
        bandwidth=NetworkBandwidthArgs(accounting_mode=accounting.value, default_node_bandwidth=default),
    )
    raw_pod = pending_pod(rng, rng.randrange(3))
    pod = Pod.parse(copy.deepcopy(raw_pod))
    index = ClusterIndex.build(snapshot)
    report = schedule(pod, index, config)
    nodes = [obj for obj in objects if obj["kind"] == "Node"]

    # 1. the extender, both forms: the same rejections and reasons, the same passing nodes, the same scores
    answers = asyncio.run(extender_answers(snapshot, config, raw_pod, nodes))
    expected_failed = {
        node: "; ".join(reason for reason in verdicts.values() if reason != PASSED)
        for node, verdicts in report.filters.items()
        if any(reason != PASSED for reason in verdicts.values())
    }
    assert answers["by_name"]["FailedNodes"] == expected_failed
    assert answers["by_object"]["FailedNodes"] == expected_failed
    passing = [node for node in report.filters if node not in expected_failed]
    assert answers["by_name"]["NodeNames"] == passing
    assert [item["metadata"]["name"] for item in answers["by_object"]["Nodes"]["items"]] == passing
    expected_scores = extender_scores(report.total, config)
    assert {entry["Host"]: entry["Score"] for entry in answers["scores"]} == expected_scores
    assert {entry["Host"]: entry["Score"] for entry in answers["scores_objects"]} == expected_scores

    # 2. one step of the simulator: NetworkBandwidth's verdict and raw score per node, from the same model
    cluster = Cluster.from_snapshot(snapshot, default.value())
    ingress, egress = (
        Quantity.parse(raw_pod["metadata"]["annotations"][f"kubernetes.io/{d}-request"]).value()
        for d in ("ingress", "egress")
    )
    fits = bandwidth_fits(cluster, ingress, egress, accounting.value).tolist()
    raw = headroom_score(
        total_capacity(cluster, accounting.value), cluster.used_in + cluster.used_out + ingress + egress
    )
    for row, name in enumerate(cluster.names):
        verdict = report.filters[name]["NetworkBandwidth"]
        assert (verdict == PASSED) == bool(fits[row]), (name, verdict)
        if name in report.raw:
            assert report.raw[name]["NetworkBandwidth"] == int(np.asarray(raw)[row])
