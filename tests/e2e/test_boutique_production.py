"""A production-like Online Boutique lands fully in each of netaware's three ordered-scheduling modes on the real
kube-scheduler: the 11 workloads and edges of :data:`operators.engine.simulation.ordered.BOUTIQUE`, 2 replicas per
Deployment, where ``frontend`` and ``cartservice`` keep their replicas on different nodes (a required pod
anti-affinity on the hostname), ``checkout`` spreads its replicas over the zones (a DoNotSchedule topology spread
constraint, maxSkew 1), and ``redis-cart`` is a StatefulSet whose pod mounts a claim bound to a PersistentVolume of
one zone (kube-scheduler's VolumeZone and VolumeBinding keep it there).

* ``plan``: gated by `netaware webhook`, planned as a whole by `netaware run --appgroup-plans`, each pod released
  with its planned node (``netaware.io/planned-node``) and bound there by the default kube-scheduler;
* ``plan-ungated``: no gate; a kube-scheduler profile calling `netaware extender`, which plans the pending pods
  when asked about one and answers with the planned node (its ``on-plan`` count: every pod);
* ``true``: gated, released dependencies first by `netaware run`, placed by the default kube-scheduler.

Each mode runs in its own namespace, its own PersistentVolume; each prints the seconds from the apply to the last
binding and the mean over the dependency edges of an edge's network cost (`netaware explain appgroup` on a dump).
"""

from __future__ import annotations

import json
import pathlib
import re
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import member_appgroup, member_deployment, zonal_volume
from operators.api import keys
from operators.engine.simulation.ordered import BOUTIQUE
from tests.support.e2e import (
    EXAMPLES,
    ROOT,
    bound_pods,
    create_namespace,
    delete_namespace,
    eventually,
    extender_scheduler,
    forbidden,
    gated_at_admission,
    gating_components,
    https_get,
    kubectl_json,
    running,
    wait_for_port,
)

pytestmark = pytest.mark.e2e

GROUP = "boutique"
REPLICAS = 2  # per Deployment; redis-cart is one StatefulSet replica (one volume)
CPU = "100m"
MAX_COST = 5  # every edge's maxNetworkCost: a zone pair of us-west-1 is within it, Z3-Z4 (10) and regions (20) not
APART = ("frontend", "cartservice")  # a required pod anti-affinity on the hostname against their own pods
SPREAD = "checkout"  # a DoNotSchedule topology spread constraint over the zones, maxSkew 1, over its own pods
REDIS = "redis-cart"  # a StatefulSet whose pod mounts a claim bound to a PersistentVolume of ZONE
ZONE = "Z3"  # of the example cluster (hack/examples/cluster.yaml): n-5 and n-6
CLAIM = f"data-{REDIS}-0"  # the StatefulSet's claim template "data", ordinal 0 (created here first, bound)
EVERY = REPLICAS * (len(BOUTIQUE) - 1) + 1
BIND_SECONDS = 45
SCHEDULER = "netaware-boutique"  # plan-ungated: the kube-scheduler profile calling the extender
MODES = {  # mode: (namespace, webhook configuration and leader election id)
    "plan": ("boutique-plan-e2e", "netaware-boutique-plan-e2e"),
    "plan-ungated": ("boutique-ungated-e2e", ""),
    "true": ("boutique-gates-e2e", "netaware-boutique-gates-e2e"),
}


def appgroup(namespace: str, mode: str) -> dict[str, Any]:
    annotations = {keys.ORDERED_SCHEDULING: mode}
    if mode != keys.UNGATED_PLAN:
        annotations[keys.ORDERED_SCHEDULING_TIMEOUT] = "60"
    group = member_appgroup(namespace, GROUP, BOUTIQUE, annotations, MAX_COST)
    for entry in group["spec"]["workloads"]:  # redis-cart is a StatefulSet, as a dependency too
        for workload in (entry["workload"], *(d["workload"] for d in entry["dependencies"])):
            if workload["selector"] == REDIS:
                workload["kind"] = "StatefulSet"
    return dict(group)


def workloads(namespace: str, scheduler: str | None = None) -> list[dict[str, Any]]:
    """The Deployments, redis-cart's headless Service and StatefulSet, with the constraints of the module
    docstring."""
    out: list[dict[str, Any]] = []
    for selector in BOUTIQUE:
        made = member_deployment(namespace, GROUP, selector, REPLICAS, CPU, scheduler)
        own = {"matchLabels": dict(made["spec"]["selector"]["matchLabels"])}
        spec = made["spec"]["template"]["spec"]
        if selector in APART:
            apart = {"labelSelector": own, "topologyKey": keys.HOSTNAME_LABEL}
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [apart]}}
        if selector == SPREAD:
            spec["topologySpreadConstraints"] = [
                {"maxSkew": 1, "topologyKey": keys.ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": own}
            ]  # fmt: skip
        if selector == REDIS:
            spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
            claim = {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                                                           "resources": {"requests": {"storage": "1Gi"}}}}  # fmt: skip
            service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": REDIS, "namespace": namespace},
                       "spec": {"clusterIP": "None", "selector": own["matchLabels"],
                                "ports": [{"name": "redis", "port": 6379}]}}  # fmt: skip
            made = {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": made["metadata"],
                "spec": {"serviceName": REDIS, "replicas": 1, "selector": made["spec"]["selector"],
                         "template": made["spec"]["template"], "volumeClaimTemplates": [claim]},
            }  # fmt: skip
            out.append(service)
        out.append(made)
    return out


def volume_name(namespace: str) -> str:
    return f"{namespace}-{REDIS}"


@pytest.fixture
def boutique(cluster: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """The mode's namespace, with the example's NetworkTopology and redis-cart's claim bound to its volume in
    ZONE; deleted after (with the volume and the webhook configuration)."""
    namespace, hook = MODES[request.param]
    nodes = kubectl_json(cluster, "get", "nodes")["items"]  # other modules' nodes may have no zone
    zones = {node["metadata"].get("labels", {}).get(keys.ZONE_LABEL) for node in nodes}
    assert ZONE in zones, zones
    cluster.kubectl("apply", "-f", str(EXAMPLES / "networktopology.yaml"))  # the example's zone and region costs
    create_namespace(cluster, namespace)
    try:
        stored = zonal_volume(namespace, CLAIM, volume_name(namespace), ZONE)
        cluster.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(item) for item in stored))
        phase = "jsonpath={.status.phase}"
        eventually(
            lambda: cluster.kubectl("get", "pvc", CLAIM, "-n", namespace, "-o", phase).stdout == "Bound",
            30,
            "redis-cart's claim bound to its volume",
        )
        yield namespace
    finally:
        if hook:
            cluster.kubectl("delete", "mutatingwebhookconfiguration", hook, "--ignore-not-found")
        delete_namespace(cluster, namespace)
        cluster.kubectl("delete", "pv", volume_name(namespace), "--wait=false", "--ignore-not-found", check=False)


def network_config(path: pathlib.Path, namespace: str) -> pathlib.Path:
    """A scheduler configuration whose NetworkOverhead reads the example's NetworkTopology (and the namespace's
    AppGroup)."""
    args = {"namespaces": ["default", namespace], "weightsName": "UserDefined",
            "networkTopologyName": "net-topology-test"}  # fmt: skip
    path.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"pluginConfig": [{"name": "NetworkOverhead", "args": args}]}],
    }))  # fmt: skip
    return path


def apply_workloads(cluster: ControlPlane, namespace: str, scheduler: str | None = None) -> float:
    """Apply the workloads (dependents first, as in BOUTIQUE's order): when."""
    started = time.monotonic()
    manifests = "\n---\n".join(json.dumps(item) for item in workloads(namespace, scheduler))
    cluster.kubectl("apply", "-f", "-", stdin=manifests)
    return started


def landed(cluster: ControlPlane, namespace: str, started: float, mode: str) -> tuple[list[dict[str, Any]], float]:
    """Every pod bound within BIND_SECONDS, and where the constraints want it: the pods and the seconds taken."""

    def all_bound() -> list[dict[str, Any]] | None:
        found = bound_pods(cluster, namespace, EVERY)
        return found if found is not None and len(found) == EVERY else None

    try:
        placed: list[dict[str, Any]] = eventually(all_bound, BIND_SECONDS, f"{mode}: every pod bound")
    except AssertionError:
        listed = kubectl_json(cluster, "get", "pods", "-n", namespace)["items"]
        waiting = {p["metadata"]["name"]: (p["status"].get("conditions") or [{}])[-1].get("message", "")
                   for p in listed if not p["spec"].get("nodeName")}  # fmt: skip
        where: dict[str, list[str]] = {}
        for pod in listed:
            workload = pod["metadata"]["labels"][keys.APPGROUP_WORKLOAD_LABEL]
            where.setdefault(workload, []).append(pod["spec"].get("nodeName") or "(pending)")
        raise AssertionError(f"{mode}: pods left pending: {waiting}; where each workload's pods are: {where}") from None
    seconds = time.monotonic() - started
    pending = [p["metadata"]["name"] for p in kubectl_json(cluster, "get", "pods", "-n", namespace)["items"]
               if not p["spec"].get("nodeName")]  # fmt: skip
    assert pending == [], pending
    nodes = kubectl_json(cluster, "get", "nodes")["items"]  # the example cluster's (n-...), and other modules'
    zone_of = {n["metadata"]["name"]: n["metadata"].get("labels", {}).get(keys.ZONE_LABEL) for n in nodes}

    def nodes_of(selector: str) -> list[str]:
        return [
            p["spec"]["nodeName"] for p in placed if p["metadata"]["labels"][keys.APPGROUP_WORKLOAD_LABEL] == selector
        ]

    for selector in APART:
        assert len(set(nodes_of(selector))) == REPLICAS, (mode, selector, nodes_of(selector))
    per_zone = Counter({zone: 0 for name, zone in zone_of.items() if name.startswith("n-") and zone})
    per_zone.update(zone_of[node] for node in nodes_of(SPREAD))
    assert max(per_zone.values()) - min(per_zone.values()) <= 1, (mode, dict(per_zone))
    (redis,) = nodes_of(REDIS)
    assert zone_of[redis] == ZONE, (mode, redis, zone_of[redis])
    return placed, seconds


def explained(cluster: ControlPlane, namespace: str, folder: pathlib.Path) -> dict[str, Any]:
    """`netaware explain appgroup` of the AppGroup on a dump of the cluster."""
    dump = folder / "dump.yaml"
    dump.write_text(cluster.kubectl("get", "nodes,pods,appgroups,networktopologies,namespaces", "-A", "-o",
                                    "yaml").stdout)  # fmt: skip
    config = network_config(folder / "explain-config.yaml", namespace)
    done = subprocess.run(
        [sys.executable, "-m", "operators.cli", "explain", "appgroup", f"{namespace}/{GROUP}", "-f", str(dump),
         "--config", str(config), "-o", "json"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    return dict(json.loads(done.stdout))


def report(cluster: ControlPlane, namespace: str, mode: str, seconds: float, folder: pathlib.Path) -> dict[str, Any]:
    """Print the mode's seconds to the last binding and its mean edge cost (each edge: the mean over its placed pod
    pairs; bench_peers' figure); the explanation."""
    document = explained(cluster, namespace, folder)
    edges = [edge for edge in document["edges"] if edge["pairs"]]
    mean = statistics.fmean(edge["meanCost"] for edge in edges)
    pairs = sum(edge["pairs"] for edge in edges)
    within = pairs - sum(edge["pairsOverMaxNetworkCost"] for edge in edges)
    planned = [edge["plannedMeanCost"] for edge in edges if edge.get("plannedMeanCost") is not None]
    line = f"boutique-production {mode}: {EVERY} pods bound in {seconds:.1f} s, mean edge cost {mean:.2f} over "
    line += f"{len(edges)} edges, {within}/{pairs} pod pairs within maxNetworkCost"
    if planned:
        line += f", planned mean edge cost {statistics.fmean(planned):.2f}"
    print(f"\n{line}")
    return document


@pytest.mark.parametrize("boutique", ["plan"], indirect=True)
def test_plan_mode_lands_every_pod_where_planned(
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    boutique: str,
    tmp_path: pathlib.Path,
) -> None:
    namespace, hook = boutique, MODES["plan"][1]
    config = network_config(tmp_path / "scheduler.yaml", namespace)
    port, configuration, webhook, operator = gating_components(
        chart_rbac, host_tls, hook, namespace, "--appgroup-plans", "--plan-config", str(config)
    )
    with running(operator, tmp_path / "operator.log") as run, running(webhook, tmp_path / "webhook.log") as hooked:
        eventually(lambda: "running appgroup" in run.text(), 60, "the operator running")
        wait_for_port(port, process=hooked)
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(appgroup(namespace, "plan")))
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))
        eventually(lambda: frontend_gated(cluster, namespace), 60, "the webhook gating the AppGroup's pods")
        started = apply_workloads(cluster, namespace)
        placed, seconds = landed(cluster, namespace, started, "plan")
    for pod in placed:
        annotations = pod["metadata"].get("annotations") or {}
        assert annotations.get(keys.PLANNED_NODE) == pod["spec"]["nodeName"], pod["metadata"]["name"]
    document = report(cluster, namespace, "plan", seconds, tmp_path)
    assert document["plan"]["onPlan"] == EVERY, document["plan"]
    assert forbidden(cluster, "operator") == []


@pytest.mark.parametrize("boutique", ["true"], indirect=True)
def test_gates_mode_lands_every_pod_dependencies_first(
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    boutique: str,
    tmp_path: pathlib.Path,
) -> None:
    namespace, hook = boutique, MODES["true"][1]
    port, configuration, webhook, operator = gating_components(chart_rbac, host_tls, hook, namespace)
    with running(operator, tmp_path / "operator.log") as run, running(webhook, tmp_path / "webhook.log") as hooked:
        eventually(lambda: "running appgroup" in run.text(), 60, "the operator running")
        wait_for_port(port, process=hooked)
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(appgroup(namespace, "true")))
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))
        eventually(lambda: frontend_gated(cluster, namespace), 60, "the webhook gating the AppGroup's pods")
        started = apply_workloads(cluster, namespace)
        _, seconds = landed(cluster, namespace, started, "true")
    report(cluster, namespace, "true", seconds, tmp_path)
    assert forbidden(cluster, "operator") == []


@pytest.mark.parametrize("boutique", ["plan-ungated"], indirect=True)
def test_plan_ungated_mode_lands_every_pod_where_the_extender_planned(
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    boutique: str,
    tmp_path: pathlib.Path,
) -> None:
    namespace = boutique
    port, args = extender_scheduler(cluster, chart_rbac, host_tls, tmp_path, namespace, SCHEDULER)
    try:
        with running(args, tmp_path / "extender.log") as process:
            wait_for_port(port, process=process)
            eventually(lambda: https_get(port, "/readyz", host_tls["ca"])[0] == 200, 60, "extender synced")
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(appgroup(namespace, keys.UNGATED_PLAN)))
            started = apply_workloads(cluster, namespace, SCHEDULER)
            placed, seconds = landed(cluster, namespace, started, "plan-ungated")
            report(cluster, namespace, "plan-ungated", seconds, tmp_path)
            assert not any(pod["spec"].get("schedulingGates") for pod in placed)
            # every pod answered with its planned node: none off-plan (its planned node refused) nor unplaceable
            results = plan_results(port, host_tls["ca"])
            missed = [line for line in process.text().splitlines() if "no longer passes" in line or " 0 pod(s)" in line]
            assert results == {"on-plan": EVERY}, (results, missed)
        assert forbidden(cluster, "extender") == []
    finally:
        cluster.stop_component(SCHEDULER)


def frontend_gated(cluster: ControlPlane, namespace: str) -> bool:
    """The webhook has seen the AppGroup Ready, with its order: a frontend pod created now would be gated."""
    template = member_deployment(namespace, GROUP, "frontend", 1, CPU)["spec"]["template"]
    return gated_at_admission(cluster, namespace, template)


def plan_results(port: int, ca_file: pathlib.Path) -> dict[str, int]:
    """The extender's count of the plan-ungated pods asked about, per result (on-plan, off-plan, unplaceable)."""
    text = https_get(port, "/metrics", ca_file)[1]
    found = re.findall(r'netaware_extender_planned_pods_total\{result="([^"]+)"\} ([\d.]+)', text)
    return {result: int(float(count)) for result, count in found if float(count)}
