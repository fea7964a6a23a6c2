#!/usr/bin/env python3
"""A burst of AppGroups on the real control plane, every scheduler side by side (slow: not a test).

    python -m benchmarks.bench_burst_real [--nodes 5000 --burst 250 --within 20 --runs 3]
                                          [--variant large] [--record docs/figures/bench_burst_real_5000.json]

One loopback control plane (hack/control-plane) with ``--nodes`` KWOK nodes of 4 cpus in 5 regions x 10 zones
(zone ``z<i % 50>`` in region ``r<zone % 5>``, the UserDefined costs of :mod:`benchmarks.live_cluster`: 1-9
within a region, 20 and more across) and the stack of :mod:`benchmarks.peers_stack`. ``--burst`` AppGroups
(``groups``: 4-12 pods each, 2-5 workloads in a random dependency DAG with ``maxNetworkCost`` 10, so that a
pair in another region is over it; ``large``: 3 of 300 pods, 25 workloads of 12) exist in each column's
namespace; their pods (0.5-1.5 cpu, no bandwidth asked) are created open loop, each at its AppGroup's time,
AppGroup after AppGroup over ``--within`` seconds, and scheduled by:

- ``kube-scheduler`` alone (its default profile);
- ``sp-network``: scheduler-plugins' NetworkOverhead with TopologicalSort (upstream's sample configuration);
- ``netaware``: the extender's profile, the webhook's dependencies-first gates;
- ``netaware-plan``: each AppGroup planned as a whole by the operator, its pods released to their nodes;
- ``netaware-plan-ungated``: the same plans, answered by the extender, no gate;
- ``netaware-plan-policy``: ``netaware-plan`` with the gate added in the API server by a MutatingAdmissionPolicy
  (CEL, Kubernetes 1.36 and later; :func:`gate_policy`) instead of the webhook's call: what that call costs;

and, as a column with no binding, the smallest-domain baseline (what Kueue's TAS, Volcano and Koordinator do)
placing the same AppGroups in the same order on the same empty cluster, each seeing the ones before it.

Figures per column, min / median / max over ``--runs`` (the columns' order rotates from run to run): pods/s (bound /
seconds from the first creation to the last binding), pods left pending, p50 and p99 creation -> binding (per pod:
its creation answered -> a watch sees it bound) and its two parts after the AppGroup's last pod was created (to the
watch's seeing the pod without gates: its plan and release; then to its binding), the Lease writes the run met
(KWOK's heartbeats: :func:`main`'s ``--node-lease-seconds``), the mean over dependency edges of an edge's network
cost (the mean over its placed pod pairs, NetworkOverhead's cost rules, as ``netaware explain appgroup`` computes
it) and the share of pod pairs within ``maxNetworkCost``, and the CPU seconds of netaware's operator, extender and
webhook, of the scheduler that bound the pods and of what every column loads (the API server, etcd, KWOK) during the
run; at the end, the operator's and the extender's peak RSS. After each run it also prints (not in the record) what
the column's scheduler did, from its metrics: its attempts by result, and the mean seconds of its scheduling
algorithm (filters, the extender's calls, scores) and of each extension point; and what the API server did: its
requests by verb and resource with their mean seconds, its webhook calls' mean seconds, the watch events it sent
(the API server is what a burst on two cores waits for: every column's requests queue in it).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import http.client
import json
import pathlib
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from benchmarks import live_cluster, peers_stack, records
from benchmarks.bench_live import memory
from benchmarks.bench_peers import cpu_seconds
from benchmarks.bench_real_scheduler import wait_advertised
from benchmarks.bindings import BindingWatch, admin_connections
from benchmarks.figures import percentile, spread
from benchmarks.support import rotated
from hack.control_plane import cluster as control_plane
from hack.control_plane.cluster import ControlPlane, loopback_metrics
from operators.api import keys
from operators.cli.common import load_scheduler_config
from operators.engine.cluster.snapshot import Snapshot, build_snapshot
from operators.engine.planning.baseline import smallest_domain
from operators.engine.planning.problem import build_problem
from operators.engine.planning.search import Search
from operators.engine.scheduling.explain import dependency_pair_costs
from operators.engine.scheduling.index import ClusterIndex

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEERS = "burst"  # kube-scheduler alone and sp-network: no webhook here
AWARE, PLANNED, UNGATED, POLICY = "burst-aware", "burst-plan", "burst-ungated", "burst-policy"
MODES = {AWARE: "true", PLANNED: "plan", UNGATED: "plan-ungated", POLICY: "plan"}  # netaware's namespaces
ADMITTED = (AWARE, PLANNED, UNGATED)  # ... that its webhook admits; POLICY's pods get the gate from a policy
# The plans' pods name the scheduler the chart's webhook leaves them (--plan-pods-keep-scheduler): the cluster's own
COLUMNS = {"kube-scheduler": ("default-scheduler", PEERS), "sp-network": ("sp-network", PEERS),
           "netaware": ("netaware", AWARE), "netaware-plan": ("default-scheduler", PLANNED),
           "netaware-plan-ungated": ("netaware", UNGATED),
           "netaware-plan-policy": ("default-scheduler", POLICY)}  # fmt: skip
BASELINE = "baseline (smallest domain)"
POOL = "bench.netaware.io/pool"
MAX_COST = 10  # within a region (1-9), not across (20 and more)
NODES_PER_FILE = 1000
DELETED_A_CALL = 250
SHARED = ("kube-apiserver", "etcd", "kwok")  # what every column loads: its CPU is the burst's price too
# Threads creating the burst's pods, each pod on its own at its AppGroup's time (the creations in flight are the
# rate times the latency of one). The threads bound them: 8 held the burst to 8 / latency (54 s for the 20 s burst,
# 98 s when the webhook's call lengthened each creation). 32 threads, each creating one AppGroup's pods one after
# the other, still took 33-53 s through the webhook (22 s without): the harness, not the scheduler, set the pace.
CREATORS = 160


def nodes_yaml(count: int, first: int = 0) -> str:
    """Nodes ``first`` to ``count`` - 1."""
    nodes = []
    for index in range(first, count):
        zone = index % live_cluster.ZONES
        name = f"burst-{index:05d}"
        labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": f"z{zone}",
                  "topology.kubernetes.io/region": f"r{zone % live_cluster.REGIONS}", POOL: "burst"}  # fmt: skip
        allocatable = {"cpu": "4", "memory": "16Gi", "pods": "110"}
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {"node.koordinator.sh/network-bandwidth": "10G"}},
            "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
        })  # fmt: skip
    return yaml.safe_dump_all(nodes)


def topology(namespace: str) -> dict[str, Any]:
    found = live_cluster.network_topology(name=peers_stack.TOPOLOGY, configmap="netperf-none")
    found["metadata"]["namespace"] = namespace
    return found


def burst(variant: str, count: int, seed: int) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The burst's AppGroups (no namespace, no mode) and, per AppGroup, its pods' templates (no namespace, no
    scheduler, no run): ``groups``, ``count`` AppGroups of 4-12 pods; ``large``, 3 of 300."""
    rng = random.Random(seed)
    out = []
    for index in range(count if variant == "groups" else 3):
        name = f"{variant}-{index}"
        workloads = rng.randint(2, 5) if variant == "groups" else 25
        parents = {w: rng.sample(range(w), min(w, rng.randint(1, 2))) for w in range(1, workloads)}

        def ref(w: int, name: str = name) -> dict[str, str]:
            return {"kind": "Deployment", "name": f"{name}-w{w}", "selector": f"w{w}", "apiVersion": "apps/v1"}

        spec = [{"workload": ref(w), "dependencies": [{"workload": ref(child), "maxNetworkCost": MAX_COST}
                                                      for child in range(workloads) if w in parents.get(child, ())]}
                for w in range(workloads)]  # fmt: skip
        group = {"apiVersion": f"{keys.APPGROUP_GROUP}/{keys.V1ALPHA1}", "kind": "AppGroup",
                 "metadata": {"name": name},
                 "spec": {"numMembers": workloads, "topologySortingAlgorithm": "KahnSort",
                          "workloads": spec}}  # fmt: skip
        size = rng.randint(max(4, workloads), 12) if variant == "groups" else 300
        owners = list(range(workloads)) + [rng.randrange(workloads) for _ in range(size - workloads)]
        pods = [{
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-{number}",
                         "labels": {keys.APPGROUP_LABEL: name, keys.APPGROUP_WORKLOAD_LABEL: f"w{w}"}},
            "spec": {"nodeSelector": {POOL: "burst"},
                     "containers": [{"name": "app", "image": "registry.example/a:1", "resources": {"requests": {
                         "cpu": rng.choice(("500m", "1", "1500m")), "memory": "512Mi"}}}]},
        } for number, w in enumerate(owners)]  # fmt: skip
        out.append((group, pods))
    return out


def gate_policy(namespace: str) -> dict[str, Any]:
    """A MutatingAdmissionPolicy and its binding giving every AppGroup pod created in ``namespace`` the
    topology-order gate in the API server itself (CEL, no webhook call): what the column ``netaware-plan-policy``
    measures against the webhook's gate."""
    name = "bench-topology-order-gate"
    labels = f"has(object.metadata.labels) && '{keys.APPGROUP_LABEL}' in object.metadata.labels"
    gates = f'[Object.spec.schedulingGates{{name: "{keys.TOPOLOGY_ORDER_GATE}"}}]'  # merged into the pod's own
    gate = f"Object{{spec: Object.spec{{schedulingGates: {gates}}}}}"
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                ]
            },
            "matchConditions": [{"name": "appgroup-member", "expression": f"{labels} && !has(object.spec.nodeName)"}],
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": gate}}],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "matchResources": {
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [namespace]}
                    ]
                }
            },
        },
    }
    return {"apiVersion": "v1", "kind": "List", "items": [policy, binding]}


def in_namespace(document: dict[str, Any], namespace: str, **more: Any) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(document))
    copied["metadata"]["namespace"] = namespace
    copied["metadata"].update(more)
    return copied


class Creator:
    """Creates pods through the API server's HTTPS endpoint as the admin (kubectl would cost a process per pod on
    this machine's two cores), recording when each creation was answered; each thread keeps its connection."""

    def __init__(self, plane: ControlPlane) -> None:
        self._connect = admin_connections(plane, timeout=120)
        self._local = threading.local()
        self._opened: list[http.client.HTTPSConnection] = []

    def _connection(self) -> http.client.HTTPSConnection:
        connection: http.client.HTTPSConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = self._connect()
            self._opened.append(connection)
        return connection

    def create(self, namespace: str, pod: dict[str, Any], at: float) -> tuple[str, float]:
        """``pod`` created at ``at`` (monotonic): its name, and when the creation was answered."""
        time.sleep(max(0.0, at - time.monotonic()))
        name = pod["metadata"]["name"]
        for attempt in (1, 2):  # a kept connection the server closed meanwhile: once more on a new one
            connection = self._connection()
            try:
                connection.request("POST", f"/api/v1/namespaces/{namespace}/pods", json.dumps(pod),
                                   {"Content-Type": "application/json"})  # fmt: skip
                response = connection.getresponse()
                body = response.read()
                break
            except (OSError, http.client.HTTPException):
                connection.close()
                self._local.connection = None
                if attempt == 2:
                    raise
        if response.status == 409 and attempt == 2:  # the first attempt created it before its answer was lost
            return name, time.monotonic()
        if response.status != 201:
            raise RuntimeError(f"creating {name}: {response.status} {body[:300]!r}")
        return name, time.monotonic()

    def close(self) -> None:
        for connection in self._opened:
            connection.close()
        self._opened.clear()

    def delete_run(self, namespace: str, run: int) -> None:
        """Every pod of run ``run`` in ``namespace``, deleted :data:`DELETED_A_CALL` a call (the API server deletes
        them; kubectl sends a call per pod, and thousands outlast its timeout on a loaded API server, as one call
        for all of them outlasted the API server's own request timeout), until a call deletes none."""
        failures = 0
        while True:
            connection = self._connect()
            try:
                options = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
                connection.request("DELETE", f"/api/v1/namespaces/{namespace}/pods?labelSelector=run%3D{run}"
                                   f"&limit={DELETED_A_CALL}", json.dumps(options),
                                   {"Content-Type": "application/json"})  # fmt: skip
                response = connection.getresponse()
                body = response.read()
            except (OSError, http.client.HTTPException):
                failures += 1
                if failures > 5:
                    raise
                time.sleep(1.0)
                continue
            finally:
                connection.close()
            if response.status != 200:
                raise RuntimeError(f"deleting run {run} in {namespace}: {response.status} {body[:300]!r}")
            if not json.loads(body).get("items"):
                return


def run_column(plane: ControlPlane, creator: Creator, scheduler: str, namespace: str, run: int,
               groups: list[tuple[dict[str, Any], list[dict[str, Any]]]], args: argparse.Namespace,
               pids: dict[str, int], extender_port: int = 0,
               ) -> tuple[dict[str, float], list[dict[str, Any]]]:  # fmt: skip
    """One column's run: the figures, and its pods as last seen."""
    batches = []
    for _, templates in groups:
        batch = []
        for template in templates:
            pod = in_namespace(template, namespace, name=f"{template['metadata']['name']}-r{run}")
            pod["metadata"]["labels"]["run"] = str(run)
            pod["spec"]["schedulerName"] = scheduler
            batch.append(pod)
        batches.append(batch)
    count = sum(len(batch) for batch in batches)
    watch = BindingWatch(plane, namespace, f"run={run}")
    process = "kube-scheduler" if scheduler == "default-scheduler" else scheduler
    readers: dict[str, tuple[Callable[[], str], dict[str, tuple[str, ...]]]] = {
        process: (functools.partial(plane.scheduler_metrics, process), SCHEDULER_SERIES)
    }
    if scheduler == "netaware" and extender_port:
        readers["extender"] = (functools.partial(loopback_metrics, extender_port), EXTENDER_SERIES)
    readers["kube-apiserver"] = (lambda: plane.kubectl("get", "--raw", "/metrics").stdout, APISERVER_SERIES)
    counted = {name: metric_counts(*reader) for name, reader in readers.items()}
    before = cpu_seconds(pids)
    profiling = profile_apiserver(plane, args.profile, f"{process}-r{run}", args.within + 10)
    try:
        began = time.monotonic() + 0.5
        try:
            with concurrent.futures.ThreadPoolExecutor(CREATORS) as pool:
                futures = [pool.submit(creator.create, namespace, pod, began + i * args.within / len(batches))
                           for i, batch in enumerate(batches) for pod in batch]  # fmt: skip
                created = dict(future.result() for future in futures)
        finally:
            creator.close()
        watch.wait(count, args.settle)
    finally:
        watch.close()
    after = cpu_seconds(pids)
    if profiling is not None:  # its seconds are fixed: it may outlast the run, whose CPU is read at its end
        profiling.join()
    ended = {name: metric_counts(*reader) for name, reader in readers.items()}
    for name in readers:
        print_counts(name, counted[name], ended[name])
    # KWOK renews its nodes' Leases together (created together): thousands of writes a run that meets them
    # carries and another does not (--node-lease-seconds); counted, so that a figure can be read with it
    lease_key = "apiserver_request_total{PUT,leases,}"
    leases = ended["kube-apiserver"].get(lease_key, 0.0) - counted["kube-apiserver"].get(lease_key, 0.0)
    print("  CPU s of every process: " + ", ".join(f"{name} {after[name] - before[name]:.2f}"
          for name in sorted(after.keys() & before.keys())), file=sys.stderr)  # fmt: skip
    bound = watch.bound_at
    listed = json.loads(plane.kubectl("get", "pods", "-n", namespace, "-l", f"run={run}", "-o", "json").stdout)
    placed = {p["metadata"]["name"] for p in listed["items"] if p["spec"].get("nodeName")}
    first = min(created.values())
    seconds = max(bound.values()) - first if bound else 0.0
    waits = [bound[name] - created[name] for name in bound if name in created]
    # where a pod's wait went: until its AppGroup's last pod was created (a whole-group plan waits for it), then
    # until a watch saw it without gates (the plan and its release; at once for ungated columns), then its binding
    group_complete = {}
    for batch in batches:
        names = [pod["metadata"]["name"] for pod in batch]
        group_complete.update(dict.fromkeys(names, max(created[name] for name in names)))
    ungated = watch.ungated_at
    released = [max(ungated[name] - group_complete[name], 0.0) for name in bound if name in ungated]
    binding = [max(bound[name] - ungated[name], 0.0) for name in bound if name in ungated]
    if args.timeline:  # each pod's times, on the wall clock the components' logs are written by
        wall = time.time() - time.monotonic()
        times = {name: {"created": at + wall, "group complete": group_complete[name] + wall,
                        "released": ungated[name] + wall if name in ungated else None,
                        "bound": bound[name] + wall if name in bound else None}
                 for name, at in created.items()}  # fmt: skip
        path = pathlib.Path(args.timeline) / f"{process}-r{run}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(times))
    figures = {
        "pods/s": len(bound) / seconds if seconds > 0 else 0.0,
        "pending": float(count - len(placed)),  # as listed at the end
        "bound unseen by the watch": float(len(placed - bound.keys())),  # 0, or the watch's figures miss some
        "watch restarts": float(watch.restarts),  # pods bound while it was listed again count from the listing
        "p50 creation to binding s": statistics.median(waits) if waits else float("nan"),
        "p99 creation to binding s": percentile(waits, 0.99),
        "p50 group complete to release s": statistics.median(released) if released else float("nan"),
        "p99 group complete to release s": percentile(released, 0.99),
        "p50 release to binding s": statistics.median(binding) if binding else float("nan"),
        "p99 release to binding s": percentile(binding, 0.99),
        "creation s (the burst, open loop)": max(created.values()) - first,
        "Lease writes during the run": leases,
        **{f"CPU s {name}": after[name] - before[name]
           for name in ("operator", "extender", "webhook", process, *SHARED) if name in after and name in before},
    }  # fmt: skip
    return figures, list(listed["items"])


def profile_apiserver(plane: ControlPlane, folder: str | None, name: str, seconds: float) -> threading.Thread | None:
    """A thread writing the API server's CPU profile over the next ``seconds`` (its /debug/pprof, the admin
    reads it) to ``folder``/``name``.pprof, for ``go tool pprof -top``; none without ``folder``."""
    if folder is None:
        return None
    path = pathlib.Path(folder) / f"{name}.pprof"
    path.parent.mkdir(parents=True, exist_ok=True)
    connect = admin_connections(plane, timeout=seconds + 60)

    def fetch() -> None:
        connection = connect()
        try:
            connection.request("GET", f"/debug/pprof/profile?seconds={int(seconds)}")
            response = connection.getresponse()
            path.write_bytes(response.read())
        finally:
            connection.close()

    thread = threading.Thread(target=fetch, daemon=True)
    thread.start()
    return thread


# what the scheduler of a column did during its run (printed, not recorded): its attempts by result, and where the
# time of its scheduling cycles went, per attempt; and the extender's side: its answers' seconds by verb (in its
# handler: the time a request waited for the event loop is not in them), its plans, its nominations by result
SCHEDULER_SERIES = {
    "scheduler_schedule_attempts": ("result",),  # a counter's family name, without _total
    "scheduler_scheduling_algorithm_duration_seconds": (),
    "scheduler_scheduling_attempt_duration_seconds": ("result",),
    "scheduler_framework_extension_point_duration_seconds": ("extension_point", "status"),
    "scheduler_queue_incoming_pods": ("event", "queue"),
    # from the pod's entering the queue (its gates removed) to its binding: the scheduler's side of a pod's wait
    "scheduler_pod_scheduling_sli_duration_seconds": (),
}
EXTENDER_SERIES = {
    "netaware_extender_latency_seconds": ("verb",),
    "netaware_extender_plan_seconds": (),
    "netaware_extender_planned_pods": ("result",),
    "netaware_extender_nominations": ("result",),
    "netaware_extender_planned_asks": ("nomination", "candidates"),
}


# the API server's side: its requests by verb and resource, the webhook calls' seconds, the watch events it sent
APISERVER_SERIES = {
    "apiserver_request": ("verb", "resource", "subresource"),
    "apiserver_request_duration_seconds": ("verb", "resource", "subresource"),
    "apiserver_admission_webhook_admission_duration_seconds": ("name",),
    "apiserver_watch_events": ("resource",),
    "apiserver_watch_events_sizes": ("resource",),
}


def metric_counts(read: Callable[[], str], series: dict[str, tuple[str, ...]]) -> dict[str, float]:
    """The counters and the histogram sums and counts of ``series`` (family -> the labels that tell its samples
    apart) in what ``read`` answers; nothing when it cannot be read."""
    try:
        text = read()
    except (OSError, KeyError, subprocess.CalledProcessError) as error:
        print(f"  metrics not read: {error}", file=sys.stderr)
        return {}
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        labels = series.get(family.name)
        if labels is None:
            continue
        for sample in family.samples:
            # a histogram's buckets too (how its times spread), but of the extension points the filters' alone
            bucket = (sample.name.endswith("_bucket") and family.name.startswith("scheduler_")
                      and sample.labels.get("extension_point", "Filter") == "Filter")  # fmt: skip
            if bucket or sample.name.endswith(("_sum", "_count", "_total")):
                named = [sample.labels.get(label, "") for label in labels] + ([sample.labels["le"]] if bucket else [])
                key = sample.name + "{" + ",".join(named) + "}"
                counts[key] = counts.get(key, 0.0) + sample.value
    return counts


def print_counts(process: str, before: dict[str, float], after: dict[str, float]) -> None:
    """What changed between ``before`` and ``after`` (:func:`metric_counts`), a histogram as its count and mean."""
    changed = {key: value - before.get(key, 0.0) for key, value in after.items() if value != before.get(key, 0.0)}
    counts = {key: changed.get(key.replace("_sum{", "_count{")) for key in changed if "_sum{" in key}
    means = {key.replace("_sum{", "_mean{"): changed[key] / count for key, count in counts.items() if count}
    lines = [f"{key} {value:.4g}" for key, value in sorted({**changed, **means}.items()) if "_sum{" not in key]
    print(f"  {process} during the run: " + "; ".join(lines), file=sys.stderr, flush=True)


def network_figures(snapshot: Snapshot, costs: dict[tuple[str, str], int], placed: dict[str, list[tuple[str, str]]]
                    ) -> dict[str, float]:  # fmt: skip
    """Mean over every AppGroup's dependency edges of an edge's cost (the mean over its placed pairs) and the share
    of pairs within ``maxNetworkCost``; ``placed``: AppGroup name -> (workload selector, node) per placed pod."""
    edge_means: list[float] = []
    pairs = within = 0
    for group in snapshot.app_groups:
        found: dict[tuple[str, str], list[int]] = {}
        for pair in dependency_pair_costs(group, placed.get(group.metadata.name, []), snapshot.node_by_name, costs):
            found.setdefault((pair.workload, pair.dependency), []).append(pair.cost)
            pairs += 1
            within += pair.within
        edge_means.extend(sum(edge) / len(edge) for edge in found.values())
    return {
        "mean cost per edge": statistics.fmean(edge_means) if edge_means else float("nan"),
        "pairs within maxNetworkCost": within / pairs if pairs else float("nan"),
    }


def placements(pods: list[dict[str, Any]]) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for pod in pods:
        if node := pod["spec"].get("nodeName"):
            labels = pod["metadata"]["labels"]
            out.setdefault(labels[keys.APPGROUP_LABEL], []).append((labels[keys.APPGROUP_WORKLOAD_LABEL], node))
    return out


def baseline(reference: list[dict[str, Any]], groups: list[tuple[dict[str, Any], list[dict[str, Any]]]],
             config: Any, seed: int) -> dict[str, list[tuple[str, str]]]:  # fmt: skip
    """The smallest-domain placement of every AppGroup in turn (in the burst's order), each on the cluster the ones
    before it left: AppGroup name -> (workload selector, node) per pod."""
    pods = [in_namespace(pod, PLANNED) for _, templates in groups for pod in templates]
    index = ClusterIndex.build(build_snapshot([*reference, *pods]))
    by_name = {group.metadata.name: group for group in index.snapshot.app_groups}
    out: dict[str, list[tuple[str, str]]] = {}
    for group, _ in groups:
        problem = build_problem(index, by_name[group["metadata"]["name"]], config)
        state, _, _ = smallest_domain(Search(problem, seed))
        assert not problem.unplaceable, problem.unplaceable
        touched: set[str] = set()
        for number, pod in enumerate(problem.pods):
            node = problem.nodes[int(state.node[number])]
            touched |= index.usage.apply(pod, pod.on_node(node))
            out.setdefault(group["metadata"]["name"], []).append(
                (problem.workloads[problem.pod_workload[number]], node)
            )
        index = index.with_usage(touched)
    return out


def write_record(args: argparse.Namespace, results: dict[str, list[dict[str, float]]], pids: dict[str, int],
                 groups: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> None:  # fmt: skip
    """The figures so far (each column's runs done), with the operator's and the extender's peak RSS so far."""
    keys_ = dict.fromkeys(key for rows in results.values() for row in rows for key in row)
    recorded: dict[str, Any] = {
        f"burst: {key}": records.columns({name: [row[key] for row in rows]
                                          for name, rows in results.items() if rows and key in rows[0]})
        for key in keys_
    }  # fmt: skip
    for name in ("operator", "extender"):
        recorded[f"burst: {name} peak RSS"] = records.figure([memory(pids[name])[0]], "MiB")
    done = {name: len(rows) for name, rows in results.items() if name != BASELINE}
    diagnostics = ("profile", "timeline")  # where a diagnostic went: not a parameter of the figures
    given = {key: value for key, value in vars(args).items() if key not in diagnostics}
    parameters = {**given, "appgroups": len(groups), "pods": sum(len(t) for _, t in groups), "runs done": done}
    records.write(args.record, "bench_burst_real", parameters, recorded)


def wait_empty(plane: ControlPlane, namespaces: list[str]) -> None:
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if not any(plane.kubectl("get", "pods", "-n", ns, "-o", "name").stdout.strip() for ns in namespaces):
            break
        time.sleep(1.0)
    time.sleep(2.0)  # the controllers' trailing work on the run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--variant", choices=("groups", "large"), default="groups")
    parser.add_argument("--burst", type=int, default=250, help="AppGroups in the burst (variant groups)")
    parser.add_argument("--within", type=float, default=20.0, help="seconds over which the burst is created")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds without a new binding that end a run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--node-lease-seconds",
        type=int,
        default=7200,
        help="the KWOK nodes' Lease duration (renewed every quarter of it; 40 s as a kubelet would "
        "is 500 Lease writes a second from 5,000 nodes, on the two cores of the burst). The nodes, created "
        "together, renew together: at 600 s every 150 s, 800-2,100 writes within whichever run met them; at "
        "7,200 s none within the first 30 minutes, which three runs of three columns take",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--place-at-admission",
        nargs="?",
        const="in-webhook",
        default="",
        choices=("in-webhook", "own-webhook"),
        help="netaware-plan-ungated's pods placed by the extender as they are created: asked by netaware's webhook "
        "(in-webhook, the default: one webhook call a pod), or registered as a webhook of its own (own-webhook: "
        "three calls a pod, netaware's webhook called again after it)",
    )
    parser.add_argument("--columns", default=",".join(COLUMNS), help="comma-separated")
    parser.add_argument("--record", default=None, help="write the figures as JSON here")
    parser.add_argument(
        "--profile",
        default=None,
        help="write the API server's CPU profile of each run's first --within seconds and 10 more here "
        "(<scheduler>-r<run>.pprof, read with go tool pprof -top)",
    )
    parser.add_argument(
        "--timeline",
        default=None,
        help="write each pod's creation, its AppGroup's last creation, its release and its binding (wall-clock "
        "seconds) here, a JSON file a run (<scheduler>-r<run>.json), to read beside the components' logs",
    )
    args = parser.parse_args()
    subprocess.run(["bash", str(ROOT / "hack" / "control-plane" / "build.sh")], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["bash", str(ROOT / "hack" / "control-plane" / "build-peer.sh")], check=True)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="netaware-burst-"))
    (folder / "nodes.yaml").write_text(nodes_yaml(args.nodes))
    chunks = []  # kubectl creates a List's items one by one: 1,000 nodes a file keeps each call under its timeout
    for start in range(0, args.nodes, NODES_PER_FILE):
        chunks.append(folder / f"nodes-{start}.yaml")
        chunks[-1].write_text(nodes_yaml(min(args.nodes, start + NODES_PER_FILE), start))
    plane = control_plane.ControlPlane(
        folder / "plane", node_lease_seconds=args.node_lease_seconds, profiling=args.profile is not None
    )
    groups = burst(args.variant, args.burst, args.seed)
    stack: peers_stack.Stack | None = None
    plane.start(chunks)
    try:
        plane.kubectl("apply", "-f", str(ROOT / "crds"))
        plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        for namespace in (PEERS, *MODES):
            plane.kubectl("create", "namespace", namespace)
            mode = {keys.ORDERED_SCHEDULING: MODES[namespace]} if namespace in MODES else None
            documents = [topology(namespace)] + [
                in_namespace(group, namespace, **({"annotations": mode} if mode else {})) for group, _ in groups
            ]
            plane.kubectl(
                "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": documents})
            )
        compared = args.columns.split(",")
        stack = peers_stack.start(
            plane,
            folder,
            PEERS,
            list(MODES),
            admitted=ADMITTED,
            peer_schedulers=[name for name in ("sp-network",) if name in compared],
            placed_at_admission=[UNGATED] if args.place_at_admission else [],
            placement=args.place_at_admission or "in-webhook",
        )
        plane.kubectl("apply", "-f", "-", stdin=json.dumps(gate_policy(POLICY)))
        wait_advertised(plane, args.nodes, within=900, every=10)
        time.sleep(10)  # the extender and the schedulers list the cluster; the operator writes the orders
        creator = Creator(plane)
        columns = {name: where for name, where in COLUMNS.items() if name in compared}
        results: dict[str, list[dict[str, float]]] = {name: [] for name in columns}
        reference = [*yaml.safe_load_all((folder / "nodes.yaml").read_text()), topology(PLANNED),
                     *(in_namespace(group, PLANNED) for group, _ in groups)]  # fmt: skip
        snapshot = build_snapshot(reference)
        config = load_scheduler_config(str(folder / "netaware-config.yaml"))
        costs = ClusterIndex.build(snapshot).cost_map(config.overhead) or {}
        results[BASELINE] = [network_figures(snapshot, costs, baseline(reference, groups, config, args.seed))]
        run = 0
        for number in range(args.runs):
            for name, (scheduler, namespace) in rotated([*columns.items()], number):
                run += 1
                figures, pods = run_column(
                    plane, creator, scheduler, namespace, run, groups, args, stack.pids, stack.extender_port
                )
                figures.update(network_figures(snapshot, costs, placements(pods)))
                results[name].append(figures)
                print(f"  run {number + 1} {name}: " + ", ".join(f"{k} {v:.3g}" for k, v in figures.items()),
                      file=sys.stderr, flush=True)  # fmt: skip
                if args.record:  # after every column: a run cut short keeps what it measured
                    write_record(args, results, stack.pids, groups)
                creator.delete_run(namespace, run)
                wait_empty(plane, [PEERS, *MODES])
        total = sum(len(templates) for _, templates in groups)
        print(f"burst on the real control plane: {len(groups)} AppGroups, {total} pods within {args.within:g} s on "
              f"{args.nodes} KWOK nodes, {args.runs} runs (min / median / max)")  # fmt: skip
        for key in dict.fromkeys(key for rows in results.values() for row in rows for key in row):
            print(f"  {key}")
            for name, rows in results.items():
                if rows and key in rows[0]:
                    print(f"    {name:24s} {spread((row[key] for row in rows), '.3g')}")
    finally:
        if stack is not None:
            stack.stop()
        plane.stop()
        shutil.rmtree(folder / "plane" / "etcd", ignore_errors=True)
        print(f"logs in {folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
