"""The rebalancer on the real control plane: Online Boutique x 3 first placed by kube-scheduler alone (no netaware
in the way), then `netaware run --components appgroup,descheduler` (the chart's operator ServiceAccount, the
AppGroup switched to releases by plan, the webhook gating the replacements) moves its pods until the mean cost
per dependency edge is within 1.10x of what the planner gives for that cluster — a PodDisruptionBudget of
``minAvailable: 2`` on every workload never violated (polled throughout), no pod evicted twice, every replica
Running at the end."""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any

import pytest
import yaml

from operators.api.appgroup import AppGroup
from operators.api.config.scheduler import NetworkOverheadArgs, SchedulerConfig
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.rebalancing.rebalance import placed_and_planned
from operators.engine.simulation.ordered import BOUTIQUE
from tests.e2e.conftest import EXAMPLES, eventually, forbidden, gating_components, kubectl_json, running, wait_for_port

pytestmark = pytest.mark.e2e

NAMESPACE = "rebalance-e2e"
HOOK = "netaware-rebalance-e2e"
REPLICAS = 3
GROUP_LABEL = "appgroup.diktyo.x-k8s.io"
CONFIG = SchedulerConfig(overhead=NetworkOverheadArgs(("default",), "UserDefined", "net-topology-test"))


def appgroup(plan: bool) -> dict[str, Any]:
    def workload(name: str) -> dict[str, str]:
        return {"kind": "Deployment", "name": name, "selector": name, "apiVersion": "apps/v1"}

    annotations = {"netaware.io/ordered-scheduling": "plan", "netaware.io/ordered-scheduling-timeout": "60"}
    return {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {"name": "boutique", "namespace": NAMESPACE, "annotations": annotations if plan else {}},
        "spec": {
            "numMembers": len(BOUTIQUE),
            "topologySortingAlgorithm": "KahnSort",
            "workloads": [
                {"workload": workload(s), "dependencies": [{"workload": workload(d)} for d in children]}
                for s, children in BOUTIQUE.items()
            ],
        },
    }


def workload_objects(selector: str) -> list[dict[str, Any]]:
    labels = {GROUP_LABEL: "boutique", f"{GROUP_LABEL}.workload": selector}
    container = {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": selector, "namespace": NAMESPACE},
        "spec": {
            "replicas": REPLICAS,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": selector, "namespace": NAMESPACE},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": labels}},
    }
    return [deployment, budget]


def policy() -> dict[str, Any]:
    return {
        "apiVersion": "descheduler/v1alpha2",
        "kind": "DeschedulerConfiguration",
        "deschedulingInterval": "2s",
        "profiles": [{
            "name": "e2e",
            "plugins": {"balance": {"enabled": [{"name": "LowNodeLoad"}, {"name": "NetworkRebalance"}]}},
            "pluginConfig": [
                {"name": "LowNodeLoad", "args": {"lowThresholds": {"cpu": 0}, "highThresholds": {"cpu": 100},
                                                 "evictableNamespaces": {"include": [NAMESPACE]}}},
                {"name": "NetworkRebalance", "args": {
                    "weights": {"networkCost": 1, "bandwidthBalance": 0}, "cooldown": "1s", "layoutTTL": "2m",
                    "maxMovesPerCycle": len(BOUTIQUE), "planBudget": "300ms",
                    "evictableNamespaces": {"include": [NAMESPACE]}}},
            ],
        }],
    }  # fmt: skip


def pods(cluster: Any) -> list[dict[str, Any]]:
    return list(kubectl_json(cluster, "get", "pods", "-n", NAMESPACE)["items"])


def running_pods(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        p
        for p in found
        if p["spec"].get("nodeName")
        and (p.get("status") or {}).get("phase") == "Running"
        and not p["metadata"].get("deletionTimestamp")
    ]


def mean_costs(cluster: Any) -> tuple[float, float]:
    """(the mean cost per dependency edge as placed, the planner's for the same cluster)."""
    objects = kubectl_json(cluster, "get", "nodes")["items"] + running_pods(pods(cluster))
    objects += kubectl_json(cluster, "get", "networktopologies", "-n", "default")["items"]
    group = AppGroup.model_validate(kubectl_json(cluster, "get", "appgroup", "boutique", "-n", NAMESPACE))
    for item in objects:
        item.setdefault("apiVersion", "v1")
    snapshot = build_snapshot(objects)
    placed, planned = placed_and_planned(snapshot, group, CONFIG, budget_seconds=1.0)
    return placed.mean_edge_cost(), planned.mean_edge_cost()


@pytest.fixture
def boutique_namespace(cluster: Any) -> Any:
    cluster.kubectl("create", "namespace", NAMESPACE)
    try:
        yield NAMESPACE
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", HOOK, "--ignore-not-found")
        cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=true", "--timeout=120s", check=False)


def test_the_rebalancer_brings_a_spread_application_near_the_planners_cost_within_its_budgets(
    cluster: Any,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    boutique_namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    cluster.kubectl("apply", "-f", str(EXAMPLES / "networktopology.yaml"))
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(appgroup(plan=False)))
    manifests = [item for selector in BOUTIQUE for item in workload_objects(selector)]
    cluster.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(m) for m in manifests))
    every = len(BOUTIQUE) * REPLICAS
    eventually(lambda: len(running_pods(pods(cluster))) == every, 120, "Online Boutique x 3 Running")
    before, planned_before = mean_costs(cluster)

    config = tmp_path / "scheduler.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"pluginConfig": [{"name": "NetworkOverhead", "args": {
            "namespaces": ["default"], "weightsName": "UserDefined", "networkTopologyName": "net-topology-test"}}]}],
    }))  # fmt: skip
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy()))
    port, configuration, webhook, operator = gating_components(
        chart_rbac, host_tls, HOOK, NAMESPACE, "--appgroup-plans", "--plan-config", str(config),
        "--descheduler-policy", str(tmp_path / "policy.yaml"),
    )  # fmt: skip
    operator[operator.index("--components") + 1] = "appgroup,descheduler"
    lowest = {selector: REPLICAS for selector in BOUTIQUE}  # the fewest Running pods seen per workload
    started = time.monotonic()
    with running(operator, tmp_path / "operator.log") as run, running(webhook, tmp_path / "webhook.log") as hooked:
        wait_for_port(port, process=hooked)
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(appgroup(plan=True)))
        eventually(lambda: "running appgroup, descheduler" in run.text(), 60, "the operator running")

        def settled() -> bool:
            now = running_pods(pods(cluster))
            for selector in BOUTIQUE:
                count = sum(p["metadata"]["labels"].get(f"{GROUP_LABEL}.workload") == selector for p in now)
                lowest[selector] = min(lowest[selector], count)
            quiet = run.text().count("rebalancer: nothing to move")
            return len(now) == every and quiet >= 2 and "Rebalanced" in events_text()

        def events_text() -> str:
            found = kubectl_json(cluster, "get", "events", "-n", NAMESPACE, "--field-selector", "reason=Rebalanced")
            return json.dumps(found["items"])

        eventually(settled, 240, "the rebalancer done (nothing more to move twice) and every replica Running")
        converged = time.monotonic() - started
        log = run.text()
    after, planned = mean_costs(cluster)
    moves = kubectl_json(cluster, "get", "events", "-n", NAMESPACE, "--field-selector", "reason=Rebalanced")["items"]
    evicted = [event["involvedObject"]["name"] for event in moves]
    cycles = log.count("moves proposed (objective")
    ratio = after / planned if planned else (1.0 if after == 0 else float("inf"))
    print(
        f"\nrebalance e2e: mean edge cost {before:.2f} -> {after:.2f} (planner {planned:.2f}, ratio {ratio:.3f}); "
        f"{len(evicted)} evictions in {cycles} cycles; converged in {converged:.1f}s; fewest Running per "
        f"workload {min(lowest.values())}"
    )
    assert before > planned_before  # kube-scheduler's spread is worse than the plan: there was work to do
    assert after <= 1.10 * planned, (after, planned)
    assert len(evicted) == len(set(evicted)), evicted  # no pod evicted twice
    assert min(lowest.values()) >= 2, lowest  # the PDBs (minAvailable 2) held throughout
    assert len(running_pods(pods(cluster))) == every
    assert cycles > 0
    assert forbidden(cluster, "operator") == []
