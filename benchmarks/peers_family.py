"""bench_peers' ``zones-300`` scenario: bench_plan's ``medium-mixed`` family (seed :data:`SEED`) on the real
control plane — 300 pods (25 workloads x 12, a random DAG, maxNetworkCost 30, 250m-1 cpu each) on 2,400 KWOK nodes
of 8 cpus in 24 zones / 3 regions, each node already running a ``load`` pod of the family's share of its zone
(55-85 %, one zone per region at 25 %). Its nodes carry :data:`POOL_VALUE` and its pods select it, so it shares
the control plane with the other scenarios without meeting them.

Beside the schedulers' columns, the smallest-domain baseline (:mod:`operators.engine.planning.baseline`: what
Kueue TAS, Volcano and Koordinator do, no edge cost) computed on the same snapshot: its figures as a column of its
own, with no binding.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from benchmarks import bench_plan
from benchmarks.figures import percentile
from operators.api import keys
from operators.engine.simulation import ordered

SCENARIO = "zones-300"
SEED = 0
POOL_KEY, POOL_VALUE = "bench.netaware.io/pool", "families"
LOAD = "load"  # the namespace of the pods that make the nodes busy
BASELINE = "baseline (smallest domain)"


def scenario() -> ordered.AppScenario:
    return bench_plan.family("medium", "mixed", SEED)


def nodes(family: ordered.AppScenario) -> list[dict[str, Any]]:
    """The family's nodes in the pool, with their capacity."""
    out = []
    for item in family.cluster:
        if item["kind"] == "Node":
            node = json.loads(json.dumps(item))
            node["metadata"]["labels"][POOL_KEY] = POOL_VALUE
            node["status"]["capacity"] = dict(node["status"]["allocatable"])
            out.append(node)
    return out


def load_pods(family: ordered.AppScenario) -> list[dict[str, Any]]:
    """The pods that make the nodes busy (bound by name: no scheduler sees them)."""
    out = []
    for item in family.cluster:
        if item["kind"] == "Pod":
            pod = json.loads(json.dumps(item))
            pod["metadata"]["namespace"] = LOAD
            pod["spec"]["containers"][0]["image"] = "registry.example/load:1"
            pod.pop("status", None)
            out.append(pod)
    return out


def topology_lists(family: ordered.AppScenario) -> list[dict[str, Any]]:
    """The family's NetworkTopology ``topologyList`` (region costs, then zone costs), to merge into the bench's."""
    (topology,) = [item for item in family.cluster if item["kind"] == "NetworkTopology"]
    return list(topology["spec"]["weights"][0]["topologyList"])


def appgroup(family: ordered.AppScenario, namespace: str, mode: str | None) -> dict[str, Any]:
    """The family's AppGroup in ``namespace`` (annotated ``ordered-scheduling: mode`` when a mode is given),
    without a status."""
    wire: dict[str, Any] = family.group.model_dump(mode="json", by_alias=True, exclude_none=True)
    wire.pop("status", None)
    wire["metadata"] = {"name": SCENARIO, "namespace": namespace}
    if mode:
        wire["metadata"]["annotations"] = {keys.ORDERED_SCHEDULING: mode}
    return wire


def pods(family: ordered.AppScenario, namespace: str, scheduler: str, run: int) -> list[dict[str, Any]]:
    """The family's pods (each its own cpu request) for ``scheduler``, labelled for run ``run``."""
    group_label, workload_label = keys.APPGROUP_LABEL, keys.APPGROUP_WORKLOAD_LABEL
    out = []
    for pod in family.pods:
        workload = pod.raw["metadata"]["labels"][workload_label]
        asks = pod.raw["spec"]["containers"][0]["resources"]["requests"]
        out.append({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{SCENARIO}-{pod.raw['metadata']['name']}-{run}", "namespace": namespace,
                         "labels": {group_label: SCENARIO, workload_label: workload, "run": str(run)}},
            "spec": {"schedulerName": scheduler, "nodeSelector": {POOL_KEY: POOL_VALUE},
                     "containers": [{"name": "app", "image": "registry.example/a:1",
                                     "resources": {"requests": {**asks, "memory": "128Mi"}}}]},
        })  # fmt: skip
    return out


def baseline(family: ordered.AppScenario) -> dict[str, float]:
    """The smallest-domain placement's figures, as the schedulers' columns name them."""
    edges = [edge for edge in bench_plan.baseline_edges(family) if edge.pairs]
    costs = [edge.mean for edge in edges]
    pairs = sum(edge.pairs for edge in edges)
    return {
        "mean cost per edge": statistics.fmean(costs) if costs else float("nan"),
        "p90 cost per edge": percentile(costs, 0.9),
        "pairs within maxNetworkCost": (pairs - sum(edge.over_limit for edge in edges)) / pairs if pairs else 1.0,
    }
