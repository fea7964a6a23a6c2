"""Topology-ordered scheduling end to end on the emulator: the real webhook gates the pods at creation, the real
AppGroup controller releases the gates, and a small binder stands in for kube-scheduler (it binds every pod that
has no gate left; the emulator, like the API server, refuses to bind a gated pod and to add a gate).

The AppGroup ``shop``: frontend depends on cart and catalog, cart on redis; ``batch`` stands alone. Pods are
created dependents first (frontend, cart, catalog, redis: ``status.topologyOrder``'s own order), the worst order
for NetworkOverhead; they must be bound dependencies first.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import json
import pathlib
from typing import Any

import aiohttp
import jsonpatch
import pytest
import yaml

from operators import compose
from operators.emulator import ApiEmulator
from operators.serving import listening
from operators.waiting import until
from tests.integration.conftest import Api
from tests.integration.kopf_harness import running_operator
from tests.support.emulated import binder

pytestmark = pytest.mark.integration

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "hack" / "examples"
AG = "/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/default/appgroups"
PODS = "/api/v1/namespaces/default/pods"
GATE = "netaware.io/topology-order"
FOREIGN = "example.com/quota"


def shop(name: str, graph: dict[str, list[str]], timeout: str) -> dict[str, Any]:
    return {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {
                "netaware.io/ordered-scheduling": "true",
                "netaware.io/ordered-scheduling-timeout": timeout,
            },
        },
        "spec": {
            "numMembers": len(graph),
            "topologySortingAlgorithm": "KahnSort",
            "workloads": [
                {
                    "workload": {"kind": "Deployment", "name": selector, "selector": selector},
                    "dependencies": [{"workload": {"kind": "Deployment", "name": d, "selector": d}} for d in children],
                }
                for selector, children in graph.items()
            ],
        },
    }


def pod(name: str, group: str, selector: str, gates: tuple[str, ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "labels": {"appgroup.diktyo.x-k8s.io": group, "appgroup.diktyo.x-k8s.io.workload": selector},
        },
        "spec": spec,
    }


async def admitted(session: aiohttp.ClientSession, webhook: str, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as the API server would store it after calling the mutating webhook."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u", "kind": {"kind": "Pod"}, "namespace": "default", "operation": "CREATE", "object": body},
    }
    async with session.post(webhook + "/mutate-pods", json=review) as response:
        answer = (await response.json())["response"]
    assert answer["allowed"], answer
    patch = json.loads(base64.b64decode(answer["patch"])) if "patch" in answer else []
    return jsonpatch.apply_patch(body, patch)  # type: ignore[no-any-return]


def gates_of(emulator: ApiEmulator, name: str) -> list[str]:
    obj = emulator.get_object("v1/pods", "default", name) or {}
    return [gate["name"] for gate in (obj.get("spec") or {}).get("schedulingGates") or ()]


async def ready(emulator: ApiEmulator, name: str) -> None:
    def order() -> bool:
        status = (emulator.get_object("appgroup.diktyo.x-k8s.io/v1alpha1/appgroups", "default", name) or {}).get(
            "status"
        ) or {}
        return bool(status.get("topologyOrder"))

    await until(f"AppGroup {name} ordered", order, 10)


async def test_pods_created_dependents_first_are_bound_dependencies_first(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed([d for d in yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text()) if d])
    graph = {"frontend": ["cart", "catalog"], "cart": ["redis"], "catalog": [], "redis": [], "batch": []}
    async with (
        running_operator(emulator.base_url),
        compose.webhook(compose.ClusterSource(server=emulator.base_url)) as app,
        listening(app) as webhook,
        aiohttp.ClientSession() as session,
    ):
        await api.call("POST", AG, shop("shop", graph, "30"))
        await ready(emulator, "shop")
        await until("webhook synced with the order", lambda: _gated_by(app), 10)
        names = {
            "frontend": ["frontend-0", "frontend-1"],
            "cart": ["cart-0", "cart-1"],
            "catalog": ["catalog-0"],
            "redis": ["redis-0", "redis-1"],
            "batch": ["batch-0"],
        }
        async with binder(api, emulator) as bound:
            for selector, pods in names.items():  # dependents first: the worst order
                for name in pods:
                    gates = (FOREIGN,) if name == "batch-0" else ()
                    body = await admitted(session, webhook, pod(name, "shop", selector, gates))
                    assert gates_of_body(body) == [*gates, GATE]
                    status, created = await api.call("POST", PODS, body)
                    assert status == 201, created
            every = [name for pods in names.values() for name in pods if name != "batch-0"]
            await until("every pod bound", lambda: all(name in bound for name in every), 20)
            await until("batch-0 released from our gate", lambda: gates_of(emulator, "batch-0") == [FOREIGN], 5)
        last = {selector: max(bound[name] for name in pods) for selector, pods in names.items() if selector != "batch"}
        first = {selector: min(bound[name] for name in pods) for selector, pods in names.items() if selector != "batch"}
        assert last["redis"] < first["cart"]  # cart depends on redis
        assert max(last["cart"], last["catalog"]) < first["frontend"]  # frontend depends on both
        assert "batch-0" not in bound  # its foreign gate stays, and holds it
        writes = [w for w in emulator.writes if w[2] == "pods" and w[1] == "MODIFIED" and w[5] is None]
        patched = [w[4] for w in writes]
        assert sorted(patched) == sorted([*every, "batch-0"])  # one gate removal per pod, nothing else written
        await until("no pod reported held", lambda: _held(emulator, "shop") == [], 5)


async def test_a_pod_that_never_schedules_holds_its_dependents_only_until_the_timeout(
    api: Api, emulator: ApiEmulator
) -> None:
    await emulator.seed([d for d in yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text()) if d])
    async with running_operator(emulator.base_url):
        await api.call("POST", AG, shop("stuck", {"web": ["db"], "db": []}, "3"))
        await ready(emulator, "stuck")
        async with binder(api, emulator, skip=frozenset({"db-0"})) as bound:  # db-0 never schedules
            for name, selector in (("web-0", "web"), ("db-0", "db")):
                status, _ = await api.call("POST", PODS, pod(name, "stuck", selector, (GATE,)))
                assert status == 201
            await until("db-0 released in order", lambda: gates_of(emulator, "db-0") == [], 5)
            assert gates_of(emulator, "web-0") == [GATE]  # db-0 is not placed: web waits
            held = await until("web held in the status", lambda: _held(emulator, "stuck"), 5)
            assert held == [{"selector": "web", "pods": 1, "waitingFor": ["db"]}]
            await until("web-0 bound after the timeout", lambda: "web-0" in bound, 10)
            created = (emulator.get_object("v1/pods", "default", "web-0") or {})["metadata"]["creationTimestamp"]
            waited = bound["web-0"] - datetime.datetime.fromisoformat(created).timestamp()
            assert 3 <= waited <= 6, waited  # the 3 s timeout from the pod's creation, not the default 60 s

        def timeouts() -> list[dict[str, Any]]:
            return [
                e for e in emulator.list_objects("v1/events", "default") if e.get("reason") == "TopologyOrderTimeout"
            ]

        events = await until("the timeout's Event", timeouts, 5)
        assert [e["involvedObject"]["name"] for e in events] == ["web-0"]
        assert "stuck" in events[0]["message"]


async def test_an_unreadable_timeout_is_a_warning_and_the_default_applies(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed([d for d in yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text()) if d])
    async with running_operator(emulator.base_url):
        await api.call("POST", AG, shop("odd", {"web": ["db"], "db": []}, "soon"))
        await ready(emulator, "odd")
        for name, selector in (("web-0", "web"), ("db-0", "db")):
            await api.call("POST", PODS, pod(name, "odd", selector, (GATE, FOREIGN)))

        def warnings() -> list[dict[str, Any]]:
            return [
                e
                for e in emulator.list_objects("v1/events", "default")
                if e.get("reason") == "InvalidOrderedSchedulingTimeout"
            ]

        (event,) = await until("the Warning Event", warnings, 5)
        assert event["involvedObject"]["name"] == "odd" and event["type"] == "Warning"
        assert '"soon"' in event["message"] and "60s is used" in event["message"]
        await asyncio.sleep(1)
        assert gates_of(emulator, "web-0") == [GATE, FOREIGN]  # held: the default 60 s, not no timeout at all
        assert len(warnings()) == 1  # once, not per evaluation


async def test_a_deleted_appgroup_releases_its_gated_pods_at_once(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed([d for d in yaml.safe_load_all((EXAMPLES / "cluster.yaml").read_text()) if d])
    async with running_operator(emulator.base_url):
        await api.call("POST", AG, shop("gone", {"web": ["db"], "db": []}, "600"))
        await ready(emulator, "gone")
        for name, selector in (("web-0", "web"), ("db-0", "db")):
            await api.call("POST", PODS, pod(name, "gone", selector, (GATE, FOREIGN)))
        await until("db-0 released in order", lambda: gates_of(emulator, "db-0") == [FOREIGN], 5)
        await asyncio.sleep(0.5)
        assert gates_of(emulator, "web-0") == [GATE, FOREIGN]  # db-0 is not bound (its foreign gate holds it)
        await api.call("DELETE", f"{AG}/gone")
        await until("web-0 released", lambda: gates_of(emulator, "web-0") == [FOREIGN], 5)


def gates_of_body(body: dict[str, Any]) -> list[str]:
    return [gate["name"] for gate in body["spec"].get("schedulingGates") or ()]


def _held(emulator: ApiEmulator, name: str) -> Any:
    obj = emulator.get_object("appgroup.diktyo.x-k8s.io/v1alpha1/appgroups", "default", name) or {}
    return (obj.get("status") or {}).get("gatedPods")


def _gated_by(app: Any) -> bool:
    from webhooks.server import VIEW_KEY

    group = next((g for g in app[VIEW_KEY].app_groups_named("shop") if g.metadata.namespace == "default"), None)
    return group is not None and group.status is not None and bool(group.status.topology_order)
