"""Releases by whole-group plans on the emulator: the real AppGroup controller (``--appgroup-plans``) plans an
AppGroup annotated ``netaware.io/ordered-scheduling: plan`` and releases each gated pod with one patch carrying
its planned node (a required node affinity, the ``netaware.io/planned-node`` annotation) and the gate removed;
a pod created later is planned against the placed ones; a released pod whose planned node fills before it is
bound is evicted for its owner to replace. The emulator refuses, as the API server does, a
required node affinity added to a pod that is not gated."""

from __future__ import annotations

import asyncio
import pathlib
from typing import Any

import pytest
import yaml

from operators.api import keys
from operators.api.config.controllers import AppGroupOptions, ControllerOptions
from operators.api.config.scheduler import NetworkOverheadArgs, SchedulerConfig
from operators.emulator import ApiEmulator
from operators.sources.cache import ClusterCache
from operators.waiting import until
from tests.integration.conftest import Api
from tests.integration.kopf_harness import running_operator

pytestmark = pytest.mark.integration

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "hack" / "examples"
AG = "/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/default/appgroups"
PODS = "/api/v1/namespaces/default/pods"
GATE = keys.TOPOLOGY_ORDER_GATE
OPTIONS = ControllerOptions(
    appgroup=AppGroupOptions(
        plans=True,
        plan_config=SchedulerConfig(overhead=NetworkOverheadArgs(("default",), "UserDefined", "net-topology-test")),
    )
)


def appgroup() -> dict[str, Any]:
    def workload(name: str) -> dict[str, str]:
        return {"kind": "Deployment", "name": name, "selector": name}

    return {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {"name": "shop", "namespace": "default", "annotations": {keys.ORDERED_SCHEDULING: "plan"}},
        "spec": {
            "numMembers": 2,
            "topologySortingAlgorithm": "KahnSort",
            "workloads": [
                {"workload": workload("web"), "dependencies": [{"workload": workload("db"), "maxNetworkCost": 5}]},
                {"workload": workload("db")},
            ],
        },
    }


def pod(name: str, selector: str, cpu: str, node: str = "", group: str = "shop") -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulingGates"] = [{"name": GATE}]
    labels = {keys.APPGROUP_LABEL: group, keys.APPGROUP_WORKLOAD_LABEL: selector} if selector else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": spec, "status": {"phase": "Running" if node else "Pending"}}  # fmt: skip


def placed(emulator: ApiEmulator, name: str) -> tuple[list[Any], str | None, Any]:
    """(its gates, its planned-node annotation, its required node affinity)."""
    obj = emulator.get_object("v1/pods", "default", name) or {}
    spec = obj.get("spec") or {}
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    annotation = ((obj.get("metadata") or {}).get("annotations") or {}).get(keys.PLANNED_NODE)
    return spec.get("schedulingGates") or [], annotation, required


def pinned(node: str) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}


async def test_gated_pods_are_released_to_their_planned_nodes(api: Api, emulator: ApiEmulator) -> None:
    documents = [d for name in ("cluster.yaml", "networktopology.yaml") for d in
                 yaml.safe_load_all((EXAMPLES / name).read_text()) if d]  # fmt: skip
    # db-0 runs on n-5 (zone Z3), where a filler leaves 1.5 of its 8 cpus: one web pod of 1 cpu beside db-0
    # (cost 0), the other in db-0's zone on n-6 (cost 1, within maxNetworkCost 5; another zone costs more)
    await emulator.seed([*documents, pod("db-0", "db", "500m", "n-5"), pod("filler", "", "6", "n-5")])
    async with running_operator(emulator.base_url, options=OPTIONS):
        await api.call("POST", AG, appgroup())
        for name in ("web-0", "web-1"):
            status, _ = await api.call("POST", PODS, pod(name, "web", "1"))
            assert status == 201
        await until("both web pods released", lambda: all(not placed(emulator, n)[0] for n in ("web-0", "web-1")), 10)
        nodes = sorted(placed(emulator, name)[1] or "" for name in ("web-0", "web-1"))
        assert nodes == ["n-5", "n-6"]
        for name in ("web-0", "web-1"):
            _, node, required = placed(emulator, name)
            assert required == pinned(node or "")

        def plan_status() -> Any:
            group = emulator.get_object("appgroup.diktyo.x-k8s.io/v1alpha1/appgroups", "default", "shop") or {}
            return (group.get("status") or {}).get("plan")

        await until("the plan in the status", lambda: (plan_status() or {}).get("planned") == 2, 10)
        assert plan_status()["workloads"] == [
            {"selector": "web", "nodes": [{"node": "n-5", "planned": 1, "bound": 0}, {"node": "n-6", "planned": 1,
                                                                                       "bound": 0}]}
        ]  # fmt: skip
        first = next(name for name in ("web-0", "web-1") if placed(emulator, name)[1] == "n-5")
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": first}, "target": {"name": "n-5"}}
        assert (await api.call("POST", f"{PODS}/{first}/binding", binding))[0] in (200, 201)
        await until("one pod on the plan", lambda: (plan_status() or {}).get("onPlan") == 1, 10)
        assert (plan_status()["offPlan"], plan_status()["pending"]) == (0, 1)
        events = [e for e in emulator.list_objects("v1/events", "default") if e.get("reason") == "Planned"]
        assert events and events[0]["involvedObject"]["name"] == "shop"
        assert "2 pod(s) planned" in events[0]["message"] and "network cost 1 " in events[0]["message"]
        # a scale-up: web-2 is planned against the placed (and the released, not yet bound) pods: n-5 is full
        # with web's claim, so n-6 beside its sibling (same zone as db-0, cost 1)
        await api.call("POST", PODS, pod("web-2", "web", "1"))
        await until("web-2 released", lambda: not placed(emulator, "web-2")[0], 10)
        assert placed(emulator, "web-2")[1:] == ("n-6", pinned("n-6"))
        planned_events = [e for e in emulator.list_objects("v1/events", "default") if e.get("reason") == "Planned"]
        assert len(planned_events) == 1  # web-2's plan, within 5 s of the first, waits to be counted in the next
        # n-6 fills before kube-scheduler binds them (7.5 of its 8 cpus bound to another pod): web-1 and web-2
        # can never bind there (their affinity cannot change), so they are evicted for their owners to replace
        await api.call("POST", PODS, pod("intruder", "", "7500m", "n-6"))

        def gone() -> bool:
            return all(emulator.get_object("v1/pods", "default", n) is None for n in ("web-1", "web-2"))

        def abandoned_events() -> list[str]:
            return [e["message"] for e in emulator.list_objects("v1/events", "default")
                    if e.get("reason") == "PlanAbandoned"]  # fmt: skip

        await until("the stranded pods evicted", gone, 10)
        assert emulator.get_object("v1/pods", "default", first) is not None  # bound on n-5
        # each Event is posted after its eviction succeeded: the last one may still be on its way
        await until("both abandonments announced", lambda: len(abandoned_events()) >= 2, 10)
        abandoned = abandoned_events()
        assert len(abandoned) == 2 and all("its planned node n-6 no longer fits it: Insufficient cpu" in m
                                           for m in abandoned), abandoned  # fmt: skip


async def test_a_released_pods_required_affinity_cannot_be_changed(api: Api, emulator: ApiEmulator) -> None:
    await api.call("POST", PODS, pod("free", "", "1"))
    ungate = [{"op": "replace", "path": "/spec/schedulingGates", "value": []}]
    status, _ = await api.call("PATCH", f"{PODS}/free", ungate, "application/json-patch+json")
    assert status == 200
    affinity = [{"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": pinned("n-1")}}}]  # fmt: skip
    status, body = await api.call("PATCH", f"{PODS}/free", affinity, "application/json-patch+json")
    assert status == 422 and "required node affinity" in body["message"]
    preferred = [{"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": pinned("n-1")[
            "nodeSelectorTerms"][0]}]}}}]  # fmt: skip
    status, body = await api.call("PATCH", f"{PODS}/free", preferred, "application/json-patch+json")
    assert status == 422 and "preferred node affinity" in body["message"]
    # while gated, a preferred term may be added
    await api.call("POST", PODS, pod("gated", "", "1"))
    status, _ = await api.call("PATCH", f"{PODS}/gated", preferred, "application/json-patch+json")
    assert status == 200


def single(name: str) -> dict[str, Any]:
    """A plan-mode AppGroup of one workload ``name``."""
    group = appgroup()
    group["metadata"]["name"] = name
    group["spec"] = {"numMembers": 1, "topologySortingAlgorithm": "KahnSort",
                     "workloads": [{"workload": {"kind": "Deployment", "name": name, "selector": name}}]}  # fmt: skip
    return group


async def test_a_release_whose_watch_event_is_late_keeps_its_room_from_the_next_plan(
    api: Api, emulator: ApiEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One node with room for one pod; AppGroup a's pod is planned there and released, and the release's watch event
    is held back 3 s; AppGroup b's pod, planned meanwhile, must not be given the same room: it is released without
    a place (kube-scheduler says where, if anywhere) instead of to a node that can never take it."""
    node = next(d for d in yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text()) if d and d["kind"] == "Node")
    node["metadata"]["name"] = "only"
    node["status"]["allocatable"] = {**node["status"].get("allocatable", {}), "cpu": "1", "pods": "110"}
    await emulator.seed([node])
    original = ClusterCache._event
    held: list[str] = []

    def late(self: ClusterCache, store: Any, event: Any, version: str) -> str:
        raw = event.get("object") or {}
        released = event.get("type") == "MODIFIED" and not (raw.get("spec") or {}).get("schedulingGates")
        if released and (raw.get("metadata") or {}).get("name") == "a-0":
            held.append(store.kind.name)
            asyncio.get_running_loop().call_later(3.0, self.apply, store.kind, "MODIFIED", raw)
            return str(raw["metadata"]["resourceVersion"])
        return original(self, store, event, version)

    monkeypatch.setattr(ClusterCache, "_event", late)
    async with running_operator(emulator.base_url, options=OPTIONS):
        for name in ("a", "b"):
            assert (await api.call("POST", AG, single(name)))[0] == 201
        assert (await api.call("POST", PODS, pod("a-0", "a", "1", group="a")))[0] == 201
        await until("a-0 released", lambda: not placed(emulator, "a-0")[0], 10)
        assert placed(emulator, "a-0")[1] == "only"
        assert (await api.call("POST", PODS, pod("b-0", "b", "1", group="b")))[0] == 201
        await until("b-0 released", lambda: not placed(emulator, "b-0")[0], 10)
        assert held, "the release's watch event was not held back"
        assert placed(emulator, "b-0")[1:] == (None, None)  # no place: the only room is a-0's

        def said_not_planned() -> bool:  # the Event is written beside the release, not before it: it may come after
            events = emulator.list_objects("v1/events", "default")
            return any("b-0" in e["message"] for e in events if e.get("reason") == "NotPlanned")

        await until("the NotPlanned Event of b-0", said_not_planned, 10)
