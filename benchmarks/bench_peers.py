#!/usr/bin/env python3
"""netaware beside the upstream plugins on the same real control plane (slow: not a test).

    python -m benchmarks.bench_peers [--runs 3 --settle 8 --scenarios thesis-1,onlineboutique,random-dag,...]

One loopback control plane (hack/control-plane; the peer from ``hack/control-plane/build-peer.sh``) with 48
KWOK nodes in 2 regions x 4 zones (32 cpu, 256Gi, 110 pods, 10G), a NetworkTopology ``net-topology-test``
(UserDefined: 20 between the regions, 5 between zones of a region) and netaware's operator keeping the AppGroups'
``status.topologyOrder`` (the order upstream's TopologicalSort reads); beside them the thesis' 200 nodes of 1Gi,
tainted so that only the thesis' pods go there. The same pods, created at once, scheduled in turn by:

(a) ``kube-scheduler`` v1.37 alone (its default profile);
(b) ``netaware`` as the chart deploys it: a kube-scheduler v1.37 profile calling `netaware extender`
    (NetworkOverhead 5, NetworkBandwidth 2, NodeResourcesAllocatable 1 — hack/configs/scheduler-config.yaml's profile;
    extender weight 20, nodeCacheCapable, TLS), the webhook (bandwidth resources, dependencies-first gates) and
    the nodebandwidth controller (``bandwidth.guarantee: resources``), accounting ``combined`` as in the thesis;
(c) ``sp-network``: scheduler-plugins v0.34.7's own scheduler with upstream's sample configuration
    (manifests/networktopology/scheduler-config.yaml: NetworkOverhead 5 at every point, NodeResourcesFit off,
    TopologicalSort as queue sort);
(d) ``sp-default``: the same binary with only the default profile (what separates the 1.34 version from the
    plugins);
(e) ``netaware-plan``: (b) with the AppGroups annotated ``netaware.io/ordered-scheduling: plan`` and the
    operator run with ``--appgroup-plans`` (the extender's configuration for the plans): each AppGroup's pods
    gated at admission, planned as a whole, released to their planned nodes, and bound there by kube-scheduler
    (a) itself, the scheduler the chart's webhook leaves them (``--plan-pods-keep-scheduler``).

Scenarios: the thesis' scenario 1 (1,500 pods of 100M in + 100M out on the 200 nodes of 1Gi: 1,000 fit), Online
Boutique (11 workloads, 3 replicas each), a random dependency DAG (12 workloads, seeded, maxNetworkCost 10, 3
replicas each) and ``boutique-production``: Online Boutique as production runs it (its own AppGroup, the same
edges), ``frontend``'s and ``cartservice``'s replicas on different nodes (a required pod anti-affinity on the
hostname), ``checkoutservice``'s spread over the zones (a DoNotSchedule topology spread constraint, maxSkew 1) and
``redis-cart`` one replica whose claim is bound to a PersistentVolume of zone :data:`VOLUME_ZONE` (kube-scheduler's
VolumeZone and VolumeBinding keep it there; a claim per namespace). Asked by name (not by default): ``zones-300``,
bench_plan's ``medium-mixed`` family live — 300 pods on 2,400 more KWOK nodes, busy, in 24 zones / 3 regions, with the
smallest-domain baseline's placement of the same snapshot as a column of its own (:mod:`benchmarks.peers_family`).
Figures per scheduler, min / median / max over
``--runs``: pods/s (pods bound / seconds from the creation to the last binding), pending, the p99 time from creation
to binding (seen by a watch: :mod:`benchmarks.bindings`; the columns' order rotates from run to run, and each run
starts 2 s after the last one's pods are gone); for the thesis, overcommitted nodes (in + out asked above 1Gi) and
the worst overcommit; for the AppGroups (whose pods ask no bandwidth, so no node can be overcommitted), the mean and
p90 over the dependency edges of an edge's network cost (the mean over its placed pod pairs;
``netaware explain appgroup`` on a dump: the same cost model for all four) and the fraction of pod pairs within
``maxNetworkCost``.

``--breakdown`` also measures where a 33-pod apply's time goes (Online Boutique's pods, each step added to the
one before): created with no scheduler (nobody binds them), through netaware's webhook (without the AppGroup
label: nothing to change; with it, in an AppGroup annotated ``ordered-scheduling: false``: the bandwidth its
dependencies ask, written into the pod), gated and released by plan, then bound by (d) ``sp-default`` (also on
the pods netaware's webhook wrote the bandwidth into: the peer with netaware's admission), by
netaware's scheduler and extender without a gate (without the label, and with it in the ``false`` AppGroup: the
floors of any netaware design that keeps its webhook and extender), by (e) and by the plan-ungated mode. Figures: the
seconds ``kubectl create`` of the List took, the seconds to the last binding, pods/s, and the CPU seconds each
process used meanwhile (``/proc``: the API server, etcd, the schedulers, netaware's processes, KWOK).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import yaml

from benchmarks import peers_family, peers_stack, records
from benchmarks.bench_real_scheduler import wait_advertised
from benchmarks.bindings import BindingWatch
from benchmarks.figures import percentile, spread
from benchmarks.peers_stack import network_args
from benchmarks.support import rotated
from hack.control_plane import cluster as control_plane
from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import zonal_volume
from operators.api import keys

ROOT = pathlib.Path(__file__).resolve().parent.parent

NAMESPACE = "bench"
AWARE = "bench-aware"  # netaware's mode: the webhook admits (and gates) this namespace, PLANNED and UNGATED only
PLANNED = "bench-plan"  # netaware with plans: the AppGroups annotated ordered-scheduling: plan
UNGATED = "bench-ungated"  # ... ordered-scheduling: plan-ungated (planned by the extender, no gate)
UNORDERED = "bench-unordered"  # ... ordered-scheduling: false (--breakdown: bandwidth from the AppGroup, no plan)
MODES = {AWARE: "true", PLANNED: "plan", UNGATED: "plan-ungated", UNORDERED: "false"}
ZONES = {"us-west-1": ("Z1", "Z2", "Z3", "Z4"), "us-east-1": ("Z5", "Z6", "Z7", "Z8")}


GROUP_LABEL, WORKLOAD_LABEL = "appgroup.diktyo.x-k8s.io", "appgroup.diktyo.x-k8s.io.workload"
POOL = "bench.netaware.io/pool"
THESIS_NODES, THESIS_PODS = 200, 1500
THESIS_CAPACITY = 1024**3  # bits/s per node, in + out (the thesis' ``combined`` accounting)
THESIS_ASK = 100_000_000  # bits/s per direction, per pod
PRODUCTION = "boutique-production"  # Online Boutique with the constraints of a production deployment (above)
APART = ("frontend", "cartservice")  # its workloads whose replicas keep to different nodes
SPREAD = "checkoutservice"  # its workload spread over the zones
REDIS = "redis-cart"  # its stateful workload: one replica, on VOLUME_CLAIM
VOLUME_ZONE, VOLUME_CLAIM = "Z2", "redis-cart-data"


def nodes_yaml() -> str:
    nodes = []
    for region, zones in ZONES.items():
        for zone in zones:
            for index in range(6):
                name = f"{zone.lower()}-{index}"
                labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/region": region,
                          "topology.kubernetes.io/zone": zone, POOL: "zones"}  # fmt: skip
                nodes.append({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": name, "labels": labels,
                                 "annotations": {"node.koordinator.sh/network-bandwidth": "10G"}},
                    "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                               "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}},
                })  # fmt: skip
    for index in range(THESIS_NODES):  # the thesis' nodes, kept apart by a taint the thesis' pods alone tolerate
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"thesis-{index:03d}", "labels": {POOL: "thesis"},
                         "annotations": {"node.kubernetes.io/network-limit": "1Gi"}},
            "spec": {"taints": [{"key": POOL, "value": "thesis", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                       "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"}},
        })  # fmt: skip
    return yaml.safe_dump_all(nodes)


def network_topology(namespace: str, more: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """``net-topology-test`` in ``namespace``: the bench's regions and zones, and ``more`` topologyList entries
    (:mod:`benchmarks.peers_family`'s) merged by topology key."""
    regions = list(ZONES)
    region_costs = [
        {"origin": origin, "costList": [{"destination": d, "networkCost": 20} for d in regions if d != origin]}
        for origin in regions
    ]
    zone_costs = [
        {"origin": origin, "costList": [{"destination": d, "networkCost": 5} for d in zones if d != origin]}
        for zones in ZONES.values()
        for origin in zones
    ]
    for entry in more:
        (region_costs if entry["topologyKey"] == "topology.kubernetes.io/region" else zone_costs).extend(
            entry["originList"]
        )
    return {
        "apiVersion": "networktopology.diktyo.x-k8s.io/v1alpha1",
        "kind": "NetworkTopology",
        "metadata": {"name": "net-topology-test", "namespace": namespace},
        "spec": {"configmapName": "netperf-none", "weights": [{"name": "UserDefined", "topologyList": [
            {"topologyKey": "topology.kubernetes.io/region", "originList": region_costs},
            {"topologyKey": "topology.kubernetes.io/zone", "originList": zone_costs},
        ]}]},
    }  # fmt: skip


def workload(selector: str) -> dict[str, Any]:
    return {"kind": "Deployment", "name": selector, "selector": selector, "apiVersion": "apps/v1",
            "namespace": "default"}  # fmt: skip


def appgroups(namespace: str, seed: int = 7, mode: str | None = None) -> list[dict[str, Any]]:
    """Online Boutique, a seeded random DAG and :data:`PRODUCTION` in ``namespace``, annotated
    ``ordered-scheduling: mode`` (by default the namespace's in :data:`MODES`: netaware's copies opt in; none in the
    peers' namespace)."""
    mode = mode or MODES.get(namespace)
    boutique = yaml.safe_load((ROOT / "hack" / "examples" / "appgroup-onlineboutique.yaml").read_text())
    rng = random.Random(seed)
    names = [f"w{i}" for i in range(12)]
    dag = []
    for index, name in enumerate(names):
        later = names[index + 1 :]
        targets = rng.sample(later, min(len(later), rng.randint(0, 3)))
        dependencies = [{"workload": workload(t), "maxNetworkCost": 10, "minBandwidth": "10M"} for t in targets]
        dag.append({"workload": workload(name), "dependencies": dependencies})
    random_dag = {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {"name": "random-dag", "namespace": "default"},
        "spec": {"numMembers": len(names), "topologySortingAlgorithm": "KahnSort", "workloads": dag},
    }
    production = json.loads(json.dumps(boutique))
    production["metadata"]["name"] = PRODUCTION
    for entry in production["spec"]["workloads"]:  # redis-cart is a StatefulSet, as a dependency too
        for item in (entry["workload"], *(d["workload"] for d in entry.get("dependencies") or ())):
            if item["name"] == REDIS:
                item["kind"] = "StatefulSet"
    out = []
    for group in (boutique, random_dag, production):
        moved = json.loads(json.dumps(group).replace('"namespace": "default"', f'"namespace": "{namespace}"'))
        if mode:
            moved["metadata"]["annotations"] = {keys.ORDERED_SCHEDULING: mode}
        out.append(moved)
    return out


def boutique(namespace: str, mode: str | None = None) -> dict[str, Any]:
    """Online Boutique's AppGroup of :func:`appgroups`."""
    return appgroups(namespace, mode=mode)[0]


def pods(group: dict[str, Any], scheduler: str, run: int, replicas: int = 3) -> list[dict[str, Any]]:
    name, namespace = group["metadata"]["name"], group["metadata"]["namespace"]
    out: list[dict[str, Any]] = []
    for entry in group["spec"]["workloads"]:
        selector = entry["workload"]["selector"]
        labels = {GROUP_LABEL: name, WORKLOAD_LABEL: selector, "run": str(run)}
        production = production_spec(entry["workload"]["name"], labels) if name == PRODUCTION else {}
        count = 1 if name == PRODUCTION and entry["workload"]["name"] == REDIS else replicas
        for replica in range(count):
            out.append({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{name}-{selector}-{run}-{replica}", "namespace": namespace,
                             "labels": labels},
                "spec": {"schedulerName": scheduler, "nodeSelector": {POOL: "zones"},
                         "containers": [{"name": "app", "image": "registry.example/a:1",
                         "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}], **production},
            })  # fmt: skip
            if "volumes" in production:
                out[-1]["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return out


def production_spec(workload: str, labels: dict[str, str]) -> dict[str, Any]:
    """What :data:`PRODUCTION`'s ``workload`` adds to its pods' spec, against its own pods (``labels``: of this
    run)."""
    own = {"matchLabels": labels}
    if workload in APART:
        apart = {"labelSelector": own, "topologyKey": "kubernetes.io/hostname"}
        return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [apart]}}}
    if workload == SPREAD:
        spread = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": own}  # fmt: skip
        return {"topologySpreadConstraints": [spread]}
    if workload == REDIS:
        return {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": VOLUME_CLAIM}}]}
    return {}


def thesis_pods(scheduler: str, namespace: str, run: int) -> list[dict[str, Any]]:
    """The thesis' scenario 1: pods of 100M in + 100M out, nothing else asked, on the thesis' nodes only."""
    annotations = {"kubernetes.io/ingress-bandwidth": "100M", "kubernetes.io/egress-bandwidth": "100M"}
    return [{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"thesis-{run}-{index:04d}", "namespace": namespace, "labels": {"run": str(run)},
                     "annotations": annotations},
        "spec": {"schedulerName": scheduler, "nodeSelector": {POOL: "thesis"},
                 "tolerations": [{"key": POOL, "operator": "Equal", "value": "thesis", "effect": "NoSchedule"}],
                 "containers": [{"name": "app", "image": "registry.example/app:1"}]},
    } for index in range(THESIS_PODS)]  # fmt: skip


def create(plane: ControlPlane, items: list[dict[str, Any]]) -> float:
    """``kubectl create`` of ``items`` as one List: when it started; how long it took in :data:`CREATION` (the API
    server admits a List's items one by one, each through the admission webhooks)."""
    created = time.monotonic()
    plane.kubectl("create", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    CREATION[0] = time.monotonic() - created
    return created


def bind(plane: ControlPlane, items: list[dict[str, Any]], namespace: str, run: int, settle: float
         ) -> tuple[float, dict[str, float], list[dict[str, Any]]]:  # fmt: skip
    """Create ``items`` at once and watch until all are bound or none was for ``settle`` s: the creation time, when
    each pod was seen bound, and the pods as last seen."""
    watch = BindingWatch(plane, namespace, f"run={run}")
    try:
        created = create(plane, items)
        watch.wait(len(items), settle)
    finally:
        watch.close()
    if TIMELINE:
        for name in sorted(watch.bound_at, key=watch.bound_at.__getitem__):
            print(
                f"      {name}: released {watch.ungated_at.get(name, created) - created:.3f} s, "
                f"bound {watch.bound_at[name] - created:.3f} s",
                file=sys.stderr,
            )
    return created, dict(watch.bound_at), list(watch.pods.values())


CREATION = [0.0]  # seconds the last `kubectl create` took
TIMELINE = False  # --timeline: print when each pod was released and bound


def common_figures(items: list[dict[str, Any]], created: float, bound_at: dict[str, float]) -> dict[str, float]:
    seconds = (max(bound_at.values()) - created) if bound_at else 0.0
    return {
        "creation s (kubectl create of the List)": CREATION[0],
        "pods/s": len(bound_at) / seconds if seconds > 0 else 0.0,
        "pending": float(len(items) - len(bound_at)),
        "p99 creation to binding s": percentile([at - created for at in bound_at.values()], 0.99),
        "last binding s": seconds,
    }


def measure_thesis(plane: ControlPlane, scheduler: str, namespace: str, run: int, settle: float) -> dict[str, float]:
    items = thesis_pods(scheduler, namespace, run)
    created, bound_at, listed = bind(plane, items, namespace, run, settle)
    asked: dict[str, int] = {}
    for pod in listed:
        if pod["spec"].get("nodeName"):
            asked[pod["spec"]["nodeName"]] = asked.get(pod["spec"]["nodeName"], 0) + 2 * THESIS_ASK
    over = [total - THESIS_CAPACITY for total in asked.values() if total > THESIS_CAPACITY]
    plane.kubectl("delete", "pods", "-n", namespace, "-l", f"run={run}", "--wait=false", "--grace-period=0", "--force")
    return {
        "scheduled": float(len(bound_at)),
        **common_figures(items, created, bound_at),
        "overcommitted nodes": float(len(over)),
        "worst overcommit Mbit/s": max(over, default=0) / 1e6,
    }


def measure(plane: ControlPlane, group: dict[str, Any], items: list[dict[str, Any]], run: int, settle: float,
            folder: pathlib.Path) -> dict[str, float]:  # fmt: skip
    namespace = group["metadata"]["namespace"]
    created, bound_at, _ = bind(plane, items, namespace, run, settle)
    dump = folder / "dump.yaml"
    dump.write_text(
        plane.kubectl("get", "nodes,pods,appgroups,networktopologies,namespaces", "-A", "-o", "yaml").stdout
    )
    config = folder / "explain-config.yaml"
    profiles = [{"pluginConfig": [{"name": "NetworkOverhead", "args": network_args(namespace)}]}]
    kind = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration"}
    config.write_text(yaml.safe_dump({**kind, "profiles": profiles}))
    reference = f"{namespace}/{group['metadata']['name']}"
    done = subprocess.run(
        [sys.executable, "-m", "operators.cli", "explain", "appgroup", reference, "-f", str(dump),
         "--config", str(config), "-o", "json"],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    explained = json.loads(done.stdout)
    edges = [edge for edge in explained["edges"] if edge["pairs"]]
    plan = explained.get("plan") or {}
    costs = [edge["meanCost"] for edge in edges]  # an edge's cost: the mean over its placed pod pairs
    pairs = sum(edge["pairs"] for edge in edges)
    within = pairs - sum(edge["pairsOverMaxNetworkCost"] for edge in edges)
    plane.kubectl("delete", "pods", "-n", namespace, "-l", f"run={run}", "--wait=false", "--grace-period=0", "--force")
    return {
        **common_figures(items, created, bound_at),
        "mean cost per edge": statistics.fmean(costs) if costs else float("nan"),
        "p90 cost per edge": percentile(costs, 0.9),
        "pairs within maxNetworkCost": within / pairs if pairs else float("nan"),
        # of the pods released by a plan (the plan column; 0 for the others), the share bound where planned
        "bound where planned": plan["onPlan"] / plan["planned"] if plan.get("planned") else 0.0,
    }


# --breakdown: (name, namespace, scheduler, with the AppGroup labels)
STEPS = (
    ("created", NAMESPACE, "none", True),
    ("+ webhook", AWARE, "none", False),
    ("+ webhook, bandwidth of the AppGroup", UNORDERED, "none", True),
    ("+ webhook, gate, plan release", PLANNED, "none", True),
    ("sp-default", NAMESPACE, "sp-default", True),
    ("sp-default through netaware's webhook (bandwidth of the AppGroup)", UNORDERED, "sp-default", True),
    ("netaware floor (webhook, extender, no gate)", AWARE, "netaware", False),
    ("netaware, AppGroup not ordered (bandwidth, no plan)", UNORDERED, "netaware", True),
    ("netaware-plan", PLANNED, "default-scheduler", True),  # as the chart's webhook leaves them (below)
    ("netaware-plan-ungated", UNGATED, "netaware", True),
)


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """User + system CPU seconds each process (with its threads) has used so far."""
    ticks = os.sysconf("SC_CLK_TCK")
    out = {}
    for name, pid in pids.items():
        try:
            fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[name] = (int(fields[11]) + int(fields[12])) / ticks
    return out


def breakdown(plane: ControlPlane, pids: dict[str, int], run: int, settle: float) -> dict[str, dict[str, float]]:
    """One pass over :data:`STEPS` with Online Boutique's pods: each step's figures."""
    out = {}
    for step, (name, namespace, scheduler, grouped) in enumerate(STEPS):
        label = 1000 * run + step
        group = boutique(namespace)
        items = pods(group, scheduler, label)
        if not grouped:
            for item in items:
                item["metadata"]["labels"] = {"run": str(label)}
        before = cpu_seconds(pids)
        if scheduler == "none":
            create(plane, items)
            time.sleep(1.0)  # the releases that follow the last creation
            figures = {"creation s (kubectl create of the List)": CREATION[0]}
        else:
            created, bound_at, _ = bind(plane, items, namespace, label, settle)
            figures = common_figures(items, created, bound_at)
            figures["last binding s"] = max(bound_at.values()) - created if bound_at else float("nan")
        after = cpu_seconds(pids)
        figures.update({f"CPU s {process}": after[process] - before[process] for process in after if process in before})
        out[name] = figures
        plane.kubectl("delete", "pods", "-n", namespace, "-l", f"run={label}", "--wait=false", "--grace-period=0",
                      "--force")  # fmt: skip
        wait_empty(plane)
    return out


QUIET_SECONDS = 2.0  # after the last run's pods are gone: its trailing work (status writes, once a second at most)


def wait_empty(plane: ControlPlane) -> None:
    """Until no pod of the last run is left, then :data:`QUIET_SECONDS` more, so that the controllers' work on
    that run does not land in the next run's seconds."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        namespaces = (NAMESPACE, *MODES)
        listed = [json.loads(plane.kubectl("get", "pods", "-n", ns, "-o", "json").stdout) for ns in namespaces]
        if not any(listing["items"] for listing in listed):
            break
        time.sleep(0.5)
    time.sleep(QUIET_SECONDS)


def report_breakdown(plane: ControlPlane, pids: dict[str, int], args: argparse.Namespace) -> dict[str, Any]:
    """:func:`breakdown` ``--runs`` times, printed; its figures as a record's."""
    passes = [breakdown(plane, pids, run, args.settle) for run in range(1, args.runs + 1)]
    steps = [name for name, *_ in STEPS]
    keys = list(dict.fromkeys(key for figures in passes for name in steps for key in figures[name]))
    print(f"where an apply of {len(pods(boutique(PLANNED), 'none', 0))} pods goes, {args.runs} runs "
          "(min / median / max)")  # fmt: skip
    recorded = {}
    for key in keys:
        columns = {name: [figures[name][key] for figures in passes if key in figures[name]] for name in steps}
        columns = {name: values for name, values in columns.items() if values}
        recorded[f"breakdown: {key}"] = records.columns(columns)
        print(f"  {key}")
        for name, values in columns.items():
            print(f"    {name:45s} {spread(values, '.3g')}")
    return recorded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--settle", type=float, default=8.0, help="seconds without a new binding that end a run")
    parser.add_argument("--scenarios", default=f"thesis-1,onlineboutique,random-dag,{PRODUCTION}",
                        help="comma-separated")  # fmt: skip
    parser.add_argument("--record", default=None, help="also write every run's figures as JSON to this file")
    columns = "kube-scheduler,netaware,netaware-plan,netaware-plan-ungated,sp-network,sp-default"
    parser.add_argument("--modes", default=columns, help="the columns to run, comma-separated")
    parser.add_argument("--plan-affinity", choices=("required", "preferred"), default="required",
                        help="how the plan column's pods carry their planned node")  # fmt: skip
    parser.add_argument("--plan-window-ms", type=int, default=100, help="the plan column's batching window")
    parser.add_argument("--timeline", action="store_true", help="print when each pod was released and bound")
    parser.add_argument("--breakdown", action="store_true", help="also measure where an apply's time goes (above)")
    args = parser.parse_args()
    global TIMELINE
    TIMELINE = args.timeline
    subprocess.run(["bash", str(ROOT / "hack" / "control-plane" / "build.sh")], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["bash", str(ROOT / "hack" / "control-plane" / "build-peer.sh")], check=True)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="netaware-peers-"))
    plane = control_plane.ControlPlane(folder / "plane")
    family = peers_family.scenario() if peers_family.SCENARIO in args.scenarios.split(",") else None
    family_nodes = peers_family.nodes(family) if family else []
    (folder / "nodes.yaml").write_text(nodes_yaml() + "".join(f"---\n{yaml.safe_dump(n)}" for n in family_nodes))
    plane.start([folder / "nodes.yaml"])
    stack: peers_stack.Stack | None = None
    try:
        plane.kubectl("apply", "-f", str(ROOT / "crds"))
        plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        groups = {namespace: appgroups(namespace) for namespace in (NAMESPACE, *MODES)}
        for namespace, documents in groups.items():
            plane.kubectl("create", "namespace", namespace)
            volume = zonal_volume(namespace, VOLUME_CLAIM, f"bench-{namespace}-{REDIS}", VOLUME_ZONE)
            topology = network_topology(namespace, peers_family.topology_lists(family) if family else [])
            mine = [peers_family.appgroup(family, namespace, MODES.get(namespace))] if family else []
            for document in [topology, *documents, *mine, *volume]:
                plane.kubectl("apply", "-f", "-", stdin=json.dumps(document))
            plane.kubectl("wait", "--for=jsonpath={.status.phase}=Bound", "pvc", VOLUME_CLAIM, "-n", namespace,
                          "--timeout=60s")  # fmt: skip
        if family:
            plane.kubectl("create", "namespace", peers_family.LOAD)
            create(plane, peers_family.load_pods(family))
        stack = peers_stack.start(plane, folder, NAMESPACE, list(MODES), args.plan_affinity, args.plan_window_ms)
        pids = stack.pids
        wait_advertised(plane, len(ZONES) * 4 * 6 + THESIS_NODES + len(family_nodes))
        time.sleep(8)  # the extender and the schedulers list the cluster; the operator writes the orders
        modes = {"kube-scheduler": ("default-scheduler", NAMESPACE), "netaware": ("netaware", AWARE),
                 "netaware-plan": ("default-scheduler", PLANNED), "netaware-plan-ungated": ("netaware", UNGATED),
                 "sp-network": ("sp-network", NAMESPACE),
                 "sp-default": ("sp-default", NAMESPACE)}  # fmt: skip
        modes = {mode: where for mode, where in modes.items() if mode in args.modes.split(",")}
        names = [group["metadata"]["name"] for group in groups[NAMESPACE]]
        chosen = [name for name in ["thesis-1", *names, peers_family.SCENARIO] if name in args.scenarios.split(",")]
        results: dict[str, dict[str, list[dict[str, float]]]] = {name: {mode: [] for mode in modes} for name in chosen}
        if family:
            results[peers_family.SCENARIO][peers_family.BASELINE] = [peers_family.baseline(family)]
        run = 0
        for number in range(args.runs):
            for name in chosen:
                for mode, (scheduler, namespace) in rotated([*modes.items()], number):
                    run += 1
                    if name == "thesis-1":
                        figures = measure_thesis(plane, scheduler, namespace, run, args.settle)
                    elif name == peers_family.SCENARIO and family:
                        group = peers_family.appgroup(family, namespace, MODES.get(namespace))
                        items = peers_family.pods(family, namespace, scheduler, run)
                        figures = measure(plane, group, items, run, args.settle, folder)
                    else:
                        group = groups[namespace][names.index(name)]
                        figures = measure(plane, group, pods(group, scheduler, run), run, args.settle, folder)
                    results[name][mode].append(figures)
                    wait_empty(plane)
        version = json.loads(
            subprocess.run(["go", "mod", "download", "-json", "sigs.k8s.io/scheduler-plugins@v0.34.7"],
                           cwd=ROOT / "hack" / "control-plane" / "scheduler-plugins", capture_output=True,
                           text=True, check=False).stdout or "{}"
        ).get("Origin", {}).get("Hash", "")  # fmt: skip
        print(f"netaware vs. scheduler-plugins v0.34.7 ({version[:12] or 'commit unknown'}), 48 + {THESIS_NODES} "
              f"KWOK nodes, {args.runs} runs (min / median / max)")  # fmt: skip
        broken_down = report_breakdown(plane, pids, args) if args.breakdown else {}
        if args.record:
            recorded = {
                f"{name}: {key}": records.columns({mode: [row[key] for row in rows]
                                                   for mode, rows in per_mode.items() if key in rows[0]})
                for name, per_mode in results.items()
                for key in next(iter(per_mode.values()))[0]
            }  # fmt: skip
            recorded.update(broken_down)
            parameters = {**vars(args), "nodes": 48 + THESIS_NODES, "scheduler-plugins": version[:12]}
            records.write(args.record, "bench_peers", parameters, recorded)
        for name, per_mode in results.items():
            print(f"  {name}")
            for key in next(iter(per_mode.values()))[0]:
                print(f"    {key}")
                for mode, rows in per_mode.items():
                    if key in rows[0]:
                        print(f"      {mode:15s} {spread((row[key] for row in rows), '.3g')}")
    finally:
        if stack is not None:
            stack.stop()
        plane.stop()
        shutil.rmtree(folder / "plane" / "etcd", ignore_errors=True)  # hundreds of MB; the logs stay
        print(f"logs in {folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
