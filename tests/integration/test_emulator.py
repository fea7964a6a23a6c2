"""The API emulator behaves like kube-apiserver where kopf and our controllers depend on it."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s

from operators.emulator import ApiEmulator
from tests.integration.conftest import Api
from tests.support.emulated import documents

pytestmark = pytest.mark.integration

CM = "/api/v1/namespaces/default/configmaps"
AG = "/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/default/appgroups"
PODS = "/api/v1/namespaces/default/pods"


def appgroup(name: str = "g") -> dict[str, Any]:
    return {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {"name": name},
        "spec": {
            "numMembers": 1,
            "topologySortingAlgorithm": "KahnSort",
            "workloads": [{"workload": {"kind": "Deployment", "name": "a", "selector": "a"}}],
        },
        "status": {"runningWorkloads": 7},
    }


async def test_create_answers_201_with_server_fields_and_409_on_duplicates(api: Api) -> None:
    status, created = await api.call("POST", CM, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    assert status == 201
    meta = created["metadata"]
    assert meta["uid"] and meta["creationTimestamp"] and meta["generation"] == 1
    assert int(meta["resourceVersion"]) > 0 and meta["namespace"] == "default"
    assert created["kind"] == "ConfigMap" and created["apiVersion"] == "v1"
    status, body = await api.call("POST", CM, {"metadata": {"name": "a"}})
    assert status == 409 and body["reason"] == "AlreadyExists"
    status, body = await api.call("GET", CM + "/missing")
    assert status == 404 and body["reason"] == "NotFound"


async def test_resource_versions_are_monotonic_and_noop_writes_change_nothing(api: Api) -> None:
    _, first = await api.call("POST", CM, {"metadata": {"name": "a"}, "data": {"k": "1"}})
    _, other = await api.call("POST", AG, appgroup())
    assert int(other["metadata"]["resourceVersion"]) > int(first["metadata"]["resourceVersion"])
    _, patched = await api.call("PATCH", CM + "/a", {"data": {"k": "2"}}, "application/merge-patch+json")
    assert int(patched["metadata"]["resourceVersion"]) > int(other["metadata"]["resourceVersion"])
    _, same = await api.call("PATCH", CM + "/a", {"data": {"k": "2"}}, "application/merge-patch+json")
    assert same["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]


async def test_generation_counts_spec_changes_only(api: Api) -> None:
    await api.call("POST", AG, appgroup())
    _, body = await api.call("PATCH", AG + "/g", {"metadata": {"labels": {"x": "y"}}}, "application/merge-patch+json")
    assert body["metadata"]["generation"] == 1
    _, body = await api.call(
        "PATCH", AG + "/g/status", {"status": {"runningWorkloads": 3}}, "application/merge-patch+json"
    )
    assert body["metadata"]["generation"] == 1
    _, body = await api.call("PATCH", AG + "/g", {"spec": {"numMembers": 2}}, "application/merge-patch+json")
    assert body["metadata"]["generation"] == 2


async def test_status_subresource_is_kept_apart(api: Api) -> None:
    status, created = await api.call("POST", AG, appgroup())
    assert status == 201 and "status" not in created  # status is not settable on create
    _, body = await api.call(
        "PATCH",
        AG + "/g",
        {"spec": {"numMembers": 5}, "status": {"runningWorkloads": 9}},
        "application/merge-patch+json",
    )
    assert body["spec"]["numMembers"] == 5 and "status" not in body
    _, body = await api.call(
        "PATCH",
        AG + "/g/status",
        {"spec": {"numMembers": 1}, "status": {"runningWorkloads": 4}},
        "application/merge-patch+json",
    )
    assert body["spec"]["numMembers"] == 5 and body["status"] == {"runningWorkloads": 4}


async def test_merge_patch_json_patch_and_put(api: Api) -> None:
    await api.call("POST", CM, {"metadata": {"name": "a"}, "data": {"k": "v", "gone": "x"}})
    _, body = await api.call("PATCH", CM + "/a", {"data": {"gone": None, "n": "1"}}, "application/merge-patch+json")
    assert body["data"] == {"k": "v", "n": "1"}
    rv = body["metadata"]["resourceVersion"]
    status, body = await api.call(
        "PATCH",
        CM + "/a",
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},
            {"op": "add", "path": "/data/j", "value": "2"},
        ],
        "application/json-patch+json",
    )
    assert status == 200 and body["data"]["j"] == "2"
    status, body = await api.call(
        "PATCH",
        CM + "/a",
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": rv},  # now stale
            {"op": "add", "path": "/data/z", "value": "3"},
        ],
        "application/json-patch+json",
    )
    assert status == 422 and body["reason"] == "Invalid"
    _, current = await api.call("GET", CM + "/a")
    assert "z" not in current["data"]
    current["data"] = {"only": "this"}
    status, body = await api.call("PUT", CM + "/a", current)
    assert status == 200 and body["data"] == {"only": "this"}


async def test_a_stale_resource_version_is_a_conflict(api: Api) -> None:
    _, created = await api.call("POST", CM, {"metadata": {"name": "a"}, "data": {"k": "1"}})
    stale = created["metadata"]["resourceVersion"]
    await api.call("PATCH", CM + "/a", {"data": {"k": "2"}}, "application/merge-patch+json")
    status, body = await api.call(
        "PATCH", CM + "/a", {"metadata": {"resourceVersion": stale}, "data": {"k": "3"}}, "application/merge-patch+json"
    )
    assert status == 409 and body["reason"] == "Conflict"
    created["data"] = {"k": "4"}
    status, _ = await api.call("PUT", CM + "/a", created)
    assert status == 409
    _, current = await api.call("GET", CM + "/a")
    assert current["data"] == {"k": "2"}


async def test_label_and_field_selectors_filter_lists(api: Api) -> None:
    for name, tier in (("a", "web"), ("b", "db"), ("c", "web")):
        await api.call("POST", CM, {"metadata": {"name": name, "labels": {"tier": tier}}})
    await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "other"}})
    await api.call(
        "POST", "/api/v1/namespaces/other/configmaps", {"metadata": {"name": "d", "labels": {"tier": "web"}}}
    )
    _, body = await api.call("GET", CM, labelSelector="tier=web")
    assert [item["metadata"]["name"] for item in body["items"]] == ["a", "c"]
    _, body = await api.call("GET", "/api/v1/configmaps", labelSelector="tier!=db")
    assert [item["metadata"]["name"] for item in body["items"]] == ["a", "c", "d"]
    _, body = await api.call("GET", "/api/v1/configmaps", fieldSelector="metadata.name=b")
    assert [item["metadata"]["name"] for item in body["items"]] == ["b"]
    assert body["kind"] == "ConfigMapList" and int(body["metadata"]["resourceVersion"]) > 0


async def read_watch(emulator: ApiEmulator, path: str, **params: str) -> list[dict[str, Any]]:
    events = []
    async with (
        aiohttp.ClientSession() as session,
        session.get(emulator.base_url + path, params={"watch": "true", "timeoutSeconds": "1", **params}) as response,
    ):
        async for line in response.content:
            if line.strip():
                events.append(json.loads(line))
    return events


async def test_watch_resumes_from_a_resource_version(api: Api, emulator: ApiEmulator) -> None:
    _, first = await api.call("POST", CM, {"metadata": {"name": "a"}})
    await api.call("POST", CM, {"metadata": {"name": "b"}})
    await api.call("PATCH", CM + "/a", {"data": {"x": "1"}}, "application/merge-patch+json")
    await api.call("DELETE", CM + "/b")
    events = await read_watch(emulator, CM, resourceVersion=first["metadata"]["resourceVersion"])
    assert [(event["type"], event["object"]["metadata"]["name"]) for event in events] == [
        ("ADDED", "b"),
        ("MODIFIED", "a"),
        ("DELETED", "b"),
    ]
    fresh = await read_watch(emulator, CM)  # no version: the current state first, as ADDED
    assert [(event["type"], event["object"]["metadata"]["name"]) for event in fresh] == [("ADDED", "a")]


async def test_watch_from_a_compacted_version_is_410_gone(api: Api, emulator: ApiEmulator) -> None:
    _, first = await api.call("POST", CM, {"metadata": {"name": "a"}})
    await api.call("POST", CM, {"metadata": {"name": "b"}})
    emulator.compact()
    (event,) = await read_watch(emulator, CM, resourceVersion=first["metadata"]["resourceVersion"])
    assert event["type"] == "ERROR" and event["object"]["code"] == 410


async def test_watch_filters_by_label_and_streams_live_events(api: Api, emulator: ApiEmulator) -> None:
    reader = asyncio.create_task(read_watch(emulator, CM, labelSelector="keep=yes", timeoutSeconds="2"))
    await asyncio.sleep(0.2)
    await api.call("POST", CM, {"metadata": {"name": "a", "labels": {"keep": "yes"}}})
    await api.call("POST", CM, {"metadata": {"name": "b", "labels": {"keep": "no"}}})
    events = await reader
    assert [event["object"]["metadata"]["name"] for event in events] == ["a"]


async def test_dropped_watch_streams_end_and_can_resume(api: Api, emulator: ApiEmulator) -> None:
    """A dropped stream ends at once; resumed from the last resourceVersion it delivered, the watch gives exactly
    what happened since (nothing replayed, nothing missed)."""
    reader = asyncio.create_task(read_watch(emulator, CM, timeoutSeconds="30"))
    await asyncio.sleep(0.2)
    await api.call("POST", CM, {"metadata": {"name": "a"}})
    await asyncio.sleep(0.2)
    await emulator.drop_watches()
    seen = await asyncio.wait_for(reader, timeout=5)  # ends long before its 30 s timeout
    assert [(event["type"], event["object"]["metadata"]["name"]) for event in seen] == [("ADDED", "a")]
    last = seen[-1]["object"]["metadata"]["resourceVersion"]
    await api.call("POST", CM, {"metadata": {"name": "b"}})  # while no watch is open
    await api.call("PATCH", CM + "/a", {"data": {"x": "1"}}, "application/merge-patch+json")
    resumed = await read_watch(emulator, CM, resourceVersion=last)
    assert [(event["type"], event["object"]["metadata"]["name"]) for event in resumed] == [
        ("ADDED", "b"),
        ("MODIFIED", "a"),
    ]
    assert resumed[-1]["object"]["data"] == {"x": "1"}
    assert all(int(event["object"]["metadata"]["resourceVersion"]) > int(last) for event in resumed)


async def test_finalizers_delay_deletion(api: Api) -> None:
    await api.call("POST", CM, {"metadata": {"name": "a", "finalizers": ["x/y"]}})
    status, body = await api.call("DELETE", CM + "/a")
    assert status == 200 and body["metadata"]["deletionTimestamp"]
    status, _ = await api.call("GET", CM + "/a")
    assert status == 200
    await api.call("PATCH", CM + "/a", {"metadata": {"finalizers": None}}, "application/merge-patch+json")
    status, _ = await api.call("GET", CM + "/a")
    assert status == 404


async def test_injected_faults_fail_before_any_state_change(api: Api, emulator: ApiEmulator) -> None:
    emulator.fail_next("POST", "configmaps", code=500)
    status, body = await api.call("POST", CM, {"metadata": {"name": "a"}})
    assert status == 500 and body["reason"] == "InternalError"
    status, _ = await api.call("GET", CM + "/a")
    assert status == 404
    status, _ = await api.call("POST", CM, {"metadata": {"name": "a"}})
    assert status == 201
    emulator.fail_next("PATCH", "configmaps", code=409, times=2)
    for _ in range(2):
        status, _ = await api.call("PATCH", CM + "/a", {"data": {"k": "v"}}, "application/merge-patch+json")
        assert status == 409
    status, _ = await api.call("PATCH", CM + "/a", {"data": {"k": "v"}}, "application/merge-patch+json")
    assert status == 200


async def test_a_request_costs_the_same_after_many(api: Api, emulator: ApiEmulator) -> None:
    """kmock tested a reaction's membership by walking every request ever served: the emulator slowed down with
    its uptime (a user's check at 100,000 pods saw 4 status writes a second). A reaction's criteria now see each
    request once; a reaction over a slice of the log (history-dependent) still answers as kmock's DSL says."""
    seen: list[str] = []

    def teapot(request: Any) -> bool:
        seen.append(request.url.path)
        return request.url.path.endswith("/teapot")

    (emulator**10)[teapot] << 418
    for index in range(50):
        await api.call("POST", CM, {"metadata": {"name": f"c{index}"}})
    assert len(seen) == 50  # once per request; the old walk: 1 + 2 + ... + 50 = 1275
    status, _ = await api.call("GET", CM + "/teapot")
    assert status == 418 and len(seen) == 51
    emulator["get"][CM + "/c1"][:1] << 410  # only the first GET of c1
    first, _ = await api.call("GET", CM + "/c1")
    second, _ = await api.call("GET", CM + "/c1")
    assert (first, second) == (410, 200)


def pod(name: str, phase: str = "Running", app: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
        "spec": {"nodeName": "n-1", "containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": phase},
    }


def pdb(min_available: int | str, expected: int | None = None) -> dict[str, Any]:
    budget: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": "web"}}},
    }
    if expected is not None:
        budget["status"] = {"expectedPods": expected}  # the owning Deployment's replicas
    return budget


async def test_eviction_honours_pod_disruption_budgets(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed([pod("w1"), pod("w2"), pdb(2), pod("lonely", app="other")])
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "w1", "namespace": "default"}}
    status, body = await api.call("POST", PODS + "/w1/eviction", eviction)
    assert status == 429 and body["reason"] == "TooManyRequests"
    assert "needs 2 healthy pods and has 2" in body["details"]["causes"][0]["message"]
    assert (await api.call("GET", PODS + "/w1"))[0] == 200
    await emulator.seed([pod("w3")])
    status, body = await api.call("POST", PODS + "/w1/eviction", eviction)
    assert status == 201 and body["status"] == "Success"
    assert (await api.call("GET", PODS + "/w1"))[0] == 404
    status, _ = await api.call(
        "POST", PODS + "/lonely/eviction", {**eviction, "metadata": {"name": "lonely", "namespace": "default"}}
    )
    assert status == 201
    status, _ = await api.call("POST", PODS + "/nobody/eviction", eviction)
    assert status == 404


async def test_eviction_with_percent_budget_and_dry_run(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed([pod("w1"), pod("w2"), pod("w3"), pod("w4"), pdb("50%", expected=4)])
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "w1"}}
    status, _ = await api.call("POST", PODS + "/w1/eviction", eviction, dryRun="All")
    assert status == 201 and (await api.call("GET", PODS + "/w1"))[0] == 200
    for name in ("w1", "w2"):
        status, _ = await api.call("POST", PODS + f"/{name}/eviction", {**eviction, "metadata": {"name": name}})
        assert status == 201
    status, _ = await api.call("POST", PODS + "/w3/eviction", {**eviction, "metadata": {"name": "w3"}})
    assert status == 429


async def test_namespaces_and_cluster_scoped_custom_resources(api: Api) -> None:
    status, body = await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})
    assert status == 201 and "namespace" not in body["metadata"]
    status, body = await api.call("GET", "/api/v1/namespaces/team")
    assert status == 200 and body["kind"] == "Namespace"
    slo = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": "n-1"}, "spec": {}}
    status, _ = await api.call("POST", "/apis/slo.koordinator.sh/v1alpha1/nodeslos", slo)
    assert status == 201
    status, body = await api.call("GET", "/apis/slo.koordinator.sh/v1alpha1/nodeslos")
    assert [item["metadata"]["name"] for item in body["items"]] == ["n-1"]


async def test_kubernetes_asyncio_client_works_against_it(emulator: ApiEmulator) -> None:
    configuration = k8s.Configuration(host=emulator.base_url)
    async with k8s.ApiClient(configuration) as api_client:
        core = k8s.CoreV1Api(api_client)
        created = await core.create_namespaced_config_map(
            "default", k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name="a", labels={"x": "1"}), data={"k": "v"})
        )
        assert created.metadata.uid  # 201 is understood: the object comes back
        listed = await core.list_namespaced_config_map("default", label_selector="x=1")
        assert [item.metadata.name for item in listed.items] == ["a"]
        custom = k8s.CustomObjectsApi(api_client)
        await custom.create_namespaced_custom_object(
            "appgroup.diktyo.x-k8s.io", "v1alpha1", "default", "appgroups", appgroup()
        )
        await custom.patch_namespaced_custom_object_status(
            "appgroup.diktyo.x-k8s.io",
            "v1alpha1",
            "default",
            "appgroups",
            "g",
            {"status": {"runningWorkloads": 1}},
            _content_type="application/merge-patch+json",
        )
        got = await custom.get_namespaced_custom_object(
            "appgroup.diktyo.x-k8s.io", "v1alpha1", "default", "appgroups", "g"
        )
        assert got["status"] == {"runningWorkloads": 1}


async def test_lists_are_paged_with_continue_tokens(api: Api, emulator: ApiEmulator) -> None:
    """``limit`` and ``continue`` as the API server pages a list: every item once, in order, each page with the
    first page's resourceVersion; a token from before a compaction is 410, a garbled one 400."""
    await emulator.seed(documents("cluster.yaml"))
    names: list[str] = []
    versions: set[str] = set()
    params = {"limit": "3"}
    pages = 0
    while True:
        status, page = await api.call("GET", "/api/v1/nodes", **params)
        assert status == 200 and len(page["items"]) <= 3
        pages += 1
        names += [item["metadata"]["name"] for item in page["items"]]
        versions.add(page["metadata"]["resourceVersion"])
        if not page["metadata"].get("continue"):
            break
        params = {"limit": "3", "continue": page["metadata"]["continue"]}
        if pages == 1:
            token = page["metadata"]["continue"]
    assert names == [f"n-{i}" for i in range(1, 9)] and pages == 3 and len(versions) == 1
    assert (await api.call("GET", "/api/v1/nodes", limit="3", **{"continue": "garbage"}))[0] == 400
    await api.call("PATCH", "/api/v1/nodes/n-1", {"metadata": {"labels": {"x": "1"}}}, "application/merge-patch+json")
    emulator.compact()
    assert (await api.call("GET", "/api/v1/nodes", limit="3", **{"continue": token}))[0] == 410
