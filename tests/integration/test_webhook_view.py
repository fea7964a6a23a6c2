"""The webhook's in-memory view follows the API (kubernetes-asyncio list + watch) against the emulator."""

from __future__ import annotations

import asyncio

import pytest

from operators.emulator import ApiEmulator
from tests.integration.conftest import Api, following
from tests.support.emulated import AG, documents, eventually
from webhooks.server import decide
from webhooks.view import ClusterView

pytestmark = pytest.mark.integration


def requests_for(view: ClusterView, selector: str) -> dict[str, str]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "x",
            "namespace": "default",
            "labels": {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": selector},
        },
    }
    answer = decide(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u", "kind": {"kind": "Pod"}, "operation": "CREATE", "object": pod},
        },
        view,
    )
    import base64
    import json

    patch = json.loads(base64.b64decode(answer["response"].get("patch", "W10=")))
    return patch[0]["value"] if patch else {}


async def test_view_follows_appgroups_and_namespaces(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed([d for d in documents("cluster.yaml") if d["kind"] == "Namespace"])
    view = ClusterView()
    async with following(emulator, view):
        await eventually(lambda: view.ready, within=5)
        assert "default" in view.namespaces

        await api.call("POST", AG, documents("appgroup-a1.yaml")[0])
        await eventually(lambda: "default" in {g.metadata.namespace for g in view.app_groups_named("a1")}, within=1)
        assert requests_for(view, "p1")["kubernetes.io/egress-request"] == "100Mi"

        # a status write the gate does not read (the controller's running pods, placements) is no change: the view
        # keeps the AppGroup it had (followed whole, each such write made a new snapshot, grouped by name again)
        held = view.app_groups_named("a1")
        running = {"status": {"runningWorkloads": 2, "placements": [{"selector": "p1", "pods": []}]}}
        await api.call("PATCH", AG + "/a1/status", running, "application/merge-patch+json")
        await asyncio.sleep(0.5)  # the emulator delivers an event in milliseconds
        assert view.app_groups_named("a1") is held

        workloads = documents("appgroup-a1.yaml")[0]["spec"]["workloads"]
        workloads[0]["dependencies"][0]["minBandwidth"] = "300M"
        await api.call("PATCH", AG + "/a1", {"spec": {"workloads": workloads}}, "application/merge-patch+json")
        await eventually(lambda: requests_for(view, "p1").get("kubernetes.io/egress-request") == "300M", within=1)

        await emulator.drop_watches()  # a dropped watch is resumed, the view keeps following
        await api.call(
            "PATCH",
            "/api/v1/namespaces/default",
            {"metadata": {"annotations": {"netaware.io/default-egress-bandwidth": "2G"}}},
            "application/merge-patch+json",
        )
        await eventually(
            lambda: "netaware.io/default-egress-bandwidth" in view.namespaces["default"].annotations, within=2
        )

        await api.call("DELETE", AG + "/a1")
        await eventually(lambda: not view.app_groups_named("a1"), within=1)


async def test_a_broken_namespace_default_admits_the_pod_and_posts_one_event(api: Api, emulator: ApiEmulator) -> None:
    """A typo in a namespace default must not block the namespace's workloads: the pod is admitted without
    that default, with a warning kubectl prints, a metric, and one Warning Event on the Namespace."""
    from aiohttp.test_utils import TestClient, TestServer

    from webhooks.server import NamespaceNotifier, build_app

    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team", "annotations": {"netaware.io/default-egress-bandwidth": "lots"}},
    }
    await emulator.seed([namespace])
    view = ClusterView()
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "kind": {"kind": "Pod"},
            "operation": "CREATE",
            "namespace": "team",
            "object": {"metadata": {"name": "x", "namespace": "team"}},
        },
    }
    async with following(emulator, view) as client:
        await eventually(lambda: view.ready and "team" in view.namespaces, within=5)
        app = build_app(view, notifier=NamespaceNotifier(client))
        async with TestClient(TestServer(app)) as http:
            for _ in range(3):  # three pods: one Event
                response = await http.post("/mutate-pods", json=review)
                answer = (await response.json())["response"]
                assert answer["allowed"] is True
                assert answer["warnings"] == [
                    "Namespace team metadata.annotations[netaware.io/default-egress-bandwidth]: not a quantity: "
                    'no digits (got "lots"); the default is ignored'
                ]
            metrics = await (await http.get("/metrics")).text()
        assert 'netaware_webhook_namespace_default_errors_total{namespace="team"} 3.0' in metrics

        def events() -> list[dict[str, object]]:
            return [
                event
                for event in emulator.list_objects("v1/events", "default")
                if event.get("reason") == "InvalidDefaultBandwidth"
            ]

        await eventually(events, within=5)
        await asyncio.sleep(0.3)
        (event,) = events()
        assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Namespace", "name": "team"}
        assert event["type"] == "Warning"


async def test_a_deleted_namespaces_metric_series_goes_with_it(api: Api, emulator: ApiEmulator) -> None:
    """The webhook as the composition root builds it: its per-namespace counter loses a namespace's series when the
    namespace is deleted (a cluster that makes and deletes namespaces would otherwise keep every one of them)."""
    from aiohttp.test_utils import TestClient, TestServer

    from operators import compose

    broken = {"netaware.io/default-egress-bandwidth": "lots"}
    await emulator.seed(
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team", "annotations": broken}}]
    )
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "u", "kind": {"kind": "Pod"}, "operation": "CREATE", "namespace": "team",
                          "object": {"metadata": {"name": "x", "namespace": "team"}}}}  # fmt: skip
    async with (
        compose.webhook(compose.ClusterSource(server=emulator.base_url)) as app,
        TestClient(TestServer(app)) as http,
    ):

        async def ready() -> bool:
            return (await http.get("/readyz")).status == 200

        await eventually(ready, within=5)
        assert (await http.post("/mutate-pods", json=review)).status == 200
        metrics = await (await http.get("/metrics")).text()
        assert 'netaware_webhook_namespace_default_errors_total{namespace="team"} 1.0' in metrics
        assert (await api.call("DELETE", "/api/v1/namespaces/team"))[0] == 200

        async def gone() -> bool:
            return 'namespace="team"' not in await (await http.get("/metrics")).text()

        await eventually(gone, within=5)
