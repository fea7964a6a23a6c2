"""``netaware demo``: the whole suite against the in-process API emulator and the example cluster.

Starts the emulator (the bundled CRDs and example cluster loaded: ``crds/``, ``hack/examples/``), the three kopf
controllers, the webhook and the extender (real aiohttp servers on loopback, fed by watches of the emulator);
creates new pods through the webhook, schedules them through the extender and binds them; runs one descheduling
cycle (planning only); then prints what converged and returns 0, or the first thing that did not.
"""

from __future__ import annotations

import base64
import contextlib
import io
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import jsonpatch
import yaml
from aiohttp import ClientSession

from operators import bundled, compose
from operators.api import keys
from operators.api.config.descheduler import DEFAULT_POLICY, parse_policy
from operators.api.config.scheduler import parse_config
from operators.controllers.descheduler import Descheduler
from operators.kube import read_json, send_json
from operators.runtime import RunOptions
from operators.serving import listening
from operators.sources.cache import ClusterCache
from operators.sources.files import read_documents
from operators.sources.kinds import APPGROUPS, NETWORKTOPOLOGIES, NODES, NODESLOS, PODS
from operators.text import table
from operators.waiting import NotConverged, until

CONTROLLERS = ("appgroup", "networktopology", "nodeslo")
# New pods of the a1 AppGroup and of Online Boutique, created through the webhook and scheduled by the extender.
# (AppGroup, workload selector): Online Boutique's selectors are upstream's p1 (frontend), p2 (cartservice)...
NEW_PODS = (("a1", "p1"), ("a1", "p1"), ("onlineboutique", "p2"), ("onlineboutique", "p1"))


def _documents(folder: str) -> list[dict[str, Any]]:
    """Every document of the bundled folder's YAML files (:mod:`operators.bundled`), as the offline commands read
    them."""
    documents: list[dict[str, Any]] = []
    for item in bundled.yaml_files(folder):
        documents.extend(document for _, document in read_documents(item.name, io.StringIO(item.read_text("utf-8"))))
    return documents


@contextlib.asynccontextmanager
async def _emulator() -> AsyncIterator[str]:
    import kmock

    from operators.emulator import ApiEmulator

    async with ApiEmulator() as emulator, kmock.Server(emulator) as server:
        emulator.base_url = str(server.url).rstrip("/")
        await emulator.seed(_documents("crds") + _documents("examples"))
        yield emulator.base_url


def _new_pod(group: str, workload: str, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-{workload}-demo-{index}",
            "namespace": "default",
            "labels": {keys.APPGROUP_LABEL: group, keys.APPGROUP_WORKLOAD_LABEL: workload},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{workload}-rs", "uid": "demo"}
            ],
        },
        "spec": {
            "schedulerName": "network-aware-scheduler",
            "containers": [
                {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }


async def run_demo(echo: Callable[[str], None], within: float = 60.0) -> int:
    """Run the demo, printing as it goes; 0 when every component converged, 1 (with the reason) when not."""
    try:
        async with _emulator() as url:
            await _converge(url, echo, within)
    except NotConverged as error:
        echo(f"\nNOT CONVERGED: {error}")
        return 1
    echo("\nevery component converged")
    return 0


async def _converge(url: str, echo: Callable[[str], None], within: float) -> None:
    """Every component as ``netaware run``, ``webhook`` and ``extender`` build it (the composition root), fed by
    watches of the emulator; the demo watches what they write with a cache of its own."""
    live = ClusterCache((NODES, PODS, APPGROUPS, NETWORKTOPOLOGIES, NODESLOS))
    config = parse_config(
        yaml.safe_load(bundled.folder("configs").joinpath("scheduler-config.yaml").read_text("utf-8"))
    )
    source = compose.ClusterSource(server=url)
    async with (
        compose.following(source, live.follow) as api,
        compose.operator(RunOptions(CONTROLLERS, server=url)) as operator,
        compose.webhook(source) as webhook_app,
        compose.extender(source, config) as extender_app,
        listening(webhook_app) as webhook,
        listening(extender_app) as extender,
        ClientSession() as http,
    ):
        await _until_ready(http, (webhook, extender), lambda: live.ready, within)
        echo(f"API emulator at {url}; controllers, webhook at {webhook}/, extender at {extender}/")
        await _controllers(live, echo, within)
        await _pods(api, http, webhook, extender, live, echo, within)
        await _appgroups_after(live, echo, within)
        await _deschedule(api, live, echo)
        if operator.done():
            raise NotConverged(f"the controllers stopped: {operator.exception() or 'ended'}")


async def _until_ready(
    http: ClientSession, servers: tuple[str, ...], synced: Callable[[], bool], within: float
) -> None:
    """Until the demo's own cache has synced and every server answers ``/readyz`` (its watches have synced)."""
    ready: set[str] = set()

    async def all_ready() -> bool:
        for server in servers:
            if server not in ready:
                async with http.get(f"{server}/readyz") as response:
                    if response.status == 200:
                        ready.add(server)
        return synced() and len(ready) == len(servers)

    await until("watches synced", all_ready, within)


async def _controllers(live: ClusterCache, echo: Callable[[str], None], within: float) -> None:
    def topologies_done() -> bool:
        return all(
            nt.status is not None and nt.status.weight_calculation_time for nt in live.snapshot().network_topologies
        )

    await until(
        "AppGroup status",
        lambda: all(ag.status and ag.status.topology_order for ag in live.snapshot().app_groups),
        within,
    )
    await until("NetworkTopology costs", topologies_done, within)

    def nodeslos_done() -> bool:
        snapshot = live.snapshot()
        with_status = [slo for slo in snapshot.node_slos if slo.status is not None and slo.status.network_qos]
        return len(with_status) == len(snapshot.nodes)

    await until("a NodeSLO per node, with its status", nodeslos_done, within)
    snapshot = live.snapshot()
    echo("\n== AppGroups: topology order (a workload comes before the workloads it depends on)")
    rows: list[tuple[str, ...]] = []
    for ag in snapshot.app_groups:
        entries = ag.status.topology_order if ag.status is not None else None
        order = sorted((entry.index, entry.workload.selector) for entry in entries or [])
        rows.append((ag.metadata.name, ag.spec.topology_sorting_algorithm, " -> ".join(s for _, s in order)))
    echo(_indented(table(("appgroup", "algorithm", "order"), rows)))
    echo("\n== NetworkTopology: network cost between zones and regions (UserDefined: given; NetperfCosts: measured)")
    rows = [
        (nt.metadata.name, weight.name, topology.topology_key.rsplit("/", 1)[-1], origin.origin, cost.destination,
         str(cost.network_cost))
        for nt in snapshot.network_topologies
        for weight in nt.spec.weights
        for topology in weight.topology_list
        for origin in topology.origin_list
        for cost in origin.cost_list or []
    ]  # fmt: skip
    echo(_indented(table(("networktopology", "weights", "level", "origin", "destination", "cost"), rows)))
    echo("\n== NodeSLO network QoS: each node's bandwidth and its classes' ingress request / limit (bits/s)")
    rows = [(slo.metadata.name, *_netqos(slo)) for slo in snapshot.node_slos]
    echo(_indented(table(("node", "total", "source", "lsr", "ls", "be"), rows)))


def _indented(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.rstrip("\n").splitlines())


def _netqos(slo: Any) -> tuple[str, str, str, str, str]:
    """(total, its source, then ingress request / limit of the lsr, ls and be classes)."""
    qos = slo.status.network_qos if slo.status is not None else None
    if qos is None:
        return ("-", "-", "-", "-", "-")
    wire = qos.model_dump(by_alias=True, exclude_none=True, mode="json")
    classes = wire.get("classes") or {}

    def of(name: str) -> str:
        values = classes.get(name) or {}
        return f"{values.get('ingressRequest', '-')} / {values.get('ingressLimit', '-')}"

    return (str(wire.get("totalNetworkBandwidth")), str(wire.get("totalSource")), of("lsr"), of("ls"), of("be"))


async def _pods(
    api: Any,
    http: ClientSession,
    webhook: str,
    extender: str,
    live: ClusterCache,
    echo: Callable[[str], None],
    within: float,
) -> None:
    echo("\n== pods through the webhook (bandwidth it added, bits/s) and the extender (nodes passed, best scores 0-10)")
    names = [node.name for node in live.snapshot().nodes]
    rows = []
    for index, (group, workload) in enumerate(NEW_PODS):
        pod = _new_pod(group, workload, index)
        review = {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": str(uuid.uuid4()),
                "kind": {"group": "", "version": "v1", "kind": "Pod"},
                "resource": {"group": "", "version": "v1", "resource": "pods"},
                "operation": "CREATE",
                "namespace": "default",
                "object": pod,
            },
        }
        async with http.post(f"{webhook}/mutate-pods", json=review) as response:
            answer = (await response.json())["response"]
        if not answer.get("allowed"):
            raise NotConverged(f"webhook denied {pod['metadata']['name']}: {answer.get('status')}")
        if "patch" in answer:
            pod = jsonpatch.apply_patch(pod, yaml.safe_load(base64.b64decode(answer["patch"])))
        annotations = {
            k: v for k, v in pod["metadata"].get("annotations", {}).items() if "bandwidth" in k or "request" in k
        }
        await send_json(api, "POST", "/api/v1/namespaces/default/pods", pod)
        async with http.post(f"{extender}/filter", json={"Pod": pod, "NodeNames": names}) as response:
            passing = (await response.json())["NodeNames"]
        async with http.post(f"{extender}/prioritize", json={"Pod": pod, "NodeNames": passing}) as response:
            scores = {entry["Host"]: entry["Score"] for entry in await response.json()}
        if not scores:
            raise NotConverged(f"no node passed the extender's filter for {pod['metadata']['name']}")
        best = max(sorted(scores), key=lambda name: scores[name])
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": pod["metadata"]["name"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": best},
        }
        await send_json(api, "POST", f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}/binding", binding)
        await send_json(
            api,
            "PATCH",
            f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}/status",
            {"status": {"phase": "Running"}},
            "application/merge-patch+json",
        )
        added = ", ".join(f"{key.split('/')[-1]} {value}" for key, value in sorted(annotations.items())) or "-"
        top = ", ".join(f"{node} {score}" for node, score in sorted(scores.items(), key=lambda item: -item[1])[:3])
        rows.append((pod["metadata"]["name"], added, f"{len(passing)} of {len(names)}", top, best))
        stored = await read_json(api, f"/api/v1/namespaces/default/pods/{pod['metadata']['name']}")
        if not stored or (stored.get("spec") or {}).get("nodeName") != best:
            raise NotConverged(f"{pod['metadata']['name']} is not bound to {best}")
    echo(_indented(table(("pod", "bandwidth added", "nodes passed", "best scores", "bound to"), rows)))
    await until(
        "the new pods in the watch cache",
        lambda: sum(1 for p in live.snapshot().pods if "-demo-" in p.name and p.node_name) == len(NEW_PODS),
        within,
    )


async def _appgroups_after(live: ClusterCache, echo: Callable[[str], None], within: float) -> None:
    def placed() -> bool:
        a1 = next(ag for ag in live.snapshot().app_groups if ag.metadata.name == "a1")
        placements = a1.status.placements if a1.status is not None else None
        # bound, not only present: a status written while they were pending showed them "(pending)" (a CI run)
        demo = [pod for workload in placements or [] for pod in workload.pods if "-demo-" in pod.name]
        return bool(demo) and all(pod.node for pod in demo)

    await until("a1 placements show the new pods bound", placed, within)
    echo("\n== AppGroup placements: where each workload's pods run")
    rows = [
        (ag.metadata.name, workload.selector, pod.name, pod.node or "(pending)", pod.zone or "-")
        for ag in live.snapshot().app_groups
        if ag.status is not None
        for workload in ag.status.placements or []
        for pod in workload.pods
    ]
    echo(_indented(table(("appgroup", "workload", "pod", "node", "zone"), rows)))
    echo("\n== NetworkTopology allocated bandwidth: what dependencies across zones or regions reserve (bits/s)")
    rows = [
        (nt.metadata.name, topology.topology_key.rsplit("/", 1)[-1], origin.origin, cost.destination,
         str(cost.bandwidth_allocated))
        for nt in live.snapshot().network_topologies
        for weight in nt.spec.weights
        for topology in weight.topology_list
        for origin in topology.origin_list
        for cost in origin.cost_list or []
        if cost.bandwidth_allocated
    ]  # fmt: skip
    echo(_indented(table(("networktopology", "level", "origin", "destination", "allocated"), rows)) if rows else
         "  (nothing allocated)")  # fmt: skip


async def _deschedule(api: Any, live: ClusterCache, echo: Callable[[str], None]) -> None:
    document = dict(DEFAULT_POLICY)
    document["dryRun"] = True
    plan = await Descheduler(api, parse_policy(document), live.snapshot).cycle()
    echo("\n== one descheduling cycle (dry run): each node's class by the LowNodeLoad thresholds, usage in %")
    nodes = plan.to_json()["nodes"]
    resources = sorted({resource for entry in nodes.values() for resource in entry["usage"]})
    rows = [
        (node, entry["class"], *(f"{entry['usage'].get(resource, 0):.1f} %" for resource in resources))
        for node, entry in nodes.items()
    ]
    echo(_indented(table(("node", "class", *resources), rows)))
    for eviction in plan.evictions:
        echo(f"  evict {eviction.pod.key} from {eviction.node} to {eviction.target}: {eviction.reason}")
    if not plan.evictions:
        echo(f"  no evictions: {plan.note}")
