"""The live extender as the composition root builds it (cluster cache + index kept by delta) against the
emulator: it follows the cluster; pod changes and nodes added, deleted or changed are applied as deltas (the
tables are built once) and its answers then equal those of an index built from scratch from the same objects; a
heartbeat is no change; a Deployment's next replica gets the first one's answer without a new computation; a pod
placed at admission is held by its token, then by its key until it is bound."""

from __future__ import annotations

import asyncio
import base64
import copy
import pathlib
from typing import Any

import jsonpatch
import orjson
import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from operators import compose
from operators.api import keys
from operators.api.config.scheduler import parse_config
from operators.emulator import ApiEmulator
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling.index import ClusterIndex
from operators.extender.answers import ExtenderState
from operators.extender.live import LIVE_KEY, LiveIndex
from operators.extender.server import STATE_KEY, build_app
from operators.sources.kinds import NODES
from tests.integration.conftest import Api
from tests.support.emulated import documents, eventually, labelled_pod, proxied

pytestmark = pytest.mark.integration

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIG = parse_config(yaml.safe_load((ROOT / "hack" / "configs" / "scheduler-config.yaml").read_text()))
POD = yaml.safe_load((ROOT / "hack" / "pod-p1.yaml").read_text())
NAMES = [f"n-{i}" for i in range(1, 9)]
PODS = "/api/v1/namespaces/default/pods"
MERGE = "application/merge-patch+json"


def seeded() -> list[dict[str, Any]]:
    return documents("cluster.yaml") + documents("networktopology.yaml") + documents("appgroup-a1.yaml")


async def answers(http: TestClient[Any, Any], pod: dict[str, Any]) -> tuple[Any, Any]:
    args = {"Pod": pod, "NodeNames": NAMES}
    filtered = await (await http.post("/filter", json=args)).json()
    scored = await (await http.post("/prioritize", json=args)).json()
    return filtered, scored


async def from_scratch(emulator: ApiEmulator, pod: dict[str, Any]) -> tuple[Any, Any]:
    """The answers of an extender serving a snapshot of the emulator's objects as they are now."""
    kinds = {
        "v1/nodes": "Node",
        "v1/pods": "Pod",
        "appgroup.diktyo.x-k8s.io/v1alpha1/appgroups": "AppGroup",
        "networktopology.diktyo.x-k8s.io/v1alpha1/networktopologies": "NetworkTopology",
    }
    objects = [
        {"apiVersion": resource.rsplit("/", 1)[0], "kind": kind, **obj}
        for resource, kind in kinds.items()
        for obj in emulator.list_objects(resource)
    ]
    snapshot = build_snapshot(objects)
    async with TestClient(TestServer(build_app(ExtenderState(lambda: snapshot, CONFIG)))) as http:
        return await answers(http, pod)


def bandwidth_pod(name: str, node: str, amount: str) -> dict[str, Any]:
    pod = labelled_pod(name, "p2", node)
    pod["metadata"]["annotations"] = {
        "kubernetes.io/ingress-bandwidth": amount,
        "kubernetes.io/egress-bandwidth": amount,
    }
    return pod


async def test_extender_follows_the_cluster(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(seeded())
    async with (
        compose.extender(compose.ClusterSource(server=emulator.base_url), CONFIG) as app,
        TestClient(TestServer(app)) as http,
    ):
        await eventually(app[STATE_KEY].ready, within=5)
        assert (await http.get("/readyz")).status == 200
        filtered, _ = await answers(http, POD)
        assert filtered["NodeNames"] == NAMES  # no p2 placed yet: every node passes, scores equal

        # p2 lands on n-7 (us-east-1): the extender sees it and prefers n-7 for p1
        await api.call("POST", PODS, labelled_pod("p2-a", "p2", "n-7"))

        async def best() -> str:
            _, scores = await answers(http, POD)
            return str(max(scores, key=lambda entry: entry["Score"])["Host"])

        for _ in range(50):
            if await best() == "n-7":
                break
            await asyncio.sleep(0.05)
        assert await best() == "n-7"


async def test_pod_changes_are_deltas_and_answers_equal_an_index_from_scratch(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(seeded())
    async with (
        compose.extender(compose.ClusterSource(server=emulator.base_url), CONFIG) as app,
        TestClient(TestServer(app)) as http,
    ):
        live, state = app[LIVE_KEY], app[STATE_KEY]
        await eventually(state.ready, within=5)
        assert live.rebuilds == 1
        pending = copy.deepcopy(POD)
        pending["metadata"]["annotations"] = {"kubernetes.io/ingress-request": "300M"}
        # n-1 (1G) fills up: 2 x 400M leaves 200M, less than the 300M asked; n-7 gets one, p1 prefers it
        for name, node in (("a", "n-1"), ("b", "n-1"), ("c", "n-7"), ("d", "n-3")):
            await api.call("POST", PODS, bandwidth_pod(f"p2-{name}", node, "400M"))
        await api.call("DELETE", PODS + "/p2-d")
        await eventually(lambda: len(live.usage.members.get("a1", {})) == 3, within=5)
        live_answers = await answers(http, pending)
        assert live_answers == await from_scratch(emulator, pending)
        assert "n-1" in live_answers[0]["FailedNodes"] and "n-1" not in live_answers[0]["NodeNames"]
        assert live.rebuilds == 1 and live.deltas >= 1  # applied as deltas, no table rebuilt

        heartbeat = {"status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "now"}]}}
        await api.call("PATCH", "/api/v1/nodes/n-2/status", heartbeat, MERGE)
        await api.call(
            "PATCH", "/api/v1/nodes/n-3", {"metadata": {"labels": {"topology.kubernetes.io/zone": "Z4"}}}, MERGE
        )
        # the zone move is applied in place (its row computed again), the heartbeat is no change: nothing rebuilt
        await eventually(lambda: live.cache.get(NODES, "", "n-3").zone == "Z4", within=5)
        assert await answers(http, pending) == await from_scratch(emulator, pending)
        assert live.rebuilds == 1
        # a node added and one deleted move the rows: the table is derived all the same, nothing is rebuilt
        assert (await api.call("POST", "/api/v1/nodes", new_node("n-9")))[0] == 201
        assert (await api.call("DELETE", "/api/v1/nodes/n-2"))[0] == 200
        await eventually(lambda: live.cache.get(NODES, "", "n-2") is None and live.cache.get(NODES, "", "n-9"))
        assert await answers(http, pending) == await from_scratch(emulator, pending)
        assert live.rebuilds == 1


async def test_a_replica_gets_the_first_replicas_answer(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(seeded())
    async with (
        compose.extender(compose.ClusterSource(server=emulator.base_url), CONFIG) as app,
        TestClient(TestServer(app)) as http,
    ):
        state = app[STATE_KEY]
        await eventually(state.ready, within=5)
        first = await answers(http, POD)
        replica = copy.deepcopy(POD)
        replica["metadata"]["name"], replica["metadata"]["uid"] = "p1-deployment-6b7c8d-other", "uid-2"
        assert state.answers_reused == 0
        assert await answers(http, replica) == first
        assert state.answers_reused == 2  # /filter and /prioritize
        other = copy.deepcopy(POD)
        other["metadata"]["annotations"] = {"kubernetes.io/egress-request": "900M"}
        await answers(http, other)  # another shape: computed
        assert state.answers_reused == 2


async def test_a_pod_that_fits_nowhere_gets_one_warning_per_reason_not_per_retry(emulator: ApiEmulator) -> None:
    await emulator.seed(seeded())
    source = compose.ClusterSource(server=emulator.base_url)
    async with compose.extender(source, CONFIG) as app, TestClient(TestServer(app)) as http:
        await eventually(lambda: app[LIVE_KEY].ready, 10)
        huge = copy.deepcopy(POD)
        huge["metadata"]["annotations"] = {"kubernetes.io/ingress-request": "50G"}  # more than any node has
        for _ in range(3):  # kube-scheduler retries the pod
            await http.post("/filter", json={"Pod": huge, "NodeNames": NAMES})
        replica = copy.deepcopy(huge)
        replica["metadata"]["name"] = "p1-deployment-6b7c8d-other"  # same shape: the cached answer, its own Event
        await http.post("/filter", json={"Pod": replica, "NodeNames": NAMES})
        fewer = {"Pod": huge, "NodeNames": NAMES[:4]}  # another reason (4 of 4 nodes): a new Event
        await http.post("/filter", json=fewer)
        await http.post("/filter", json=fewer)

        def warnings() -> list[dict[str, Any]]:
            events = emulator.list_objects("v1/events", "default")
            return [e for e in events if e.get("reason") == "NetworkUnschedulable"]

        await eventually(lambda: len(warnings()) == 3, 5)
        await asyncio.sleep(0.3)
        events = warnings()
        assert sorted(e["involvedObject"]["name"] for e in events) == sorted(
            [huge["metadata"]["name"], huge["metadata"]["name"], replica["metadata"]["name"]]
        )
        assert all(e["type"] == "Warning" for e in events)
        messages = {e["message"] for e in events}
        assert "no node fits: NetworkBandwidth: 8 of 8 nodes: insufficient ingress bandwidth" in " ".join(messages)
        assert any("4 of 4 nodes" in message for message in messages)


def new_node(name: str) -> dict[str, Any]:
    """An example node again under another name."""
    node = copy.deepcopy(next(d for d in documents("cluster.yaml") if d.get("kind") == "Node"))
    node["metadata"] = {**node["metadata"], "name": name}
    node["metadata"].pop("resourceVersion", None)
    node["metadata"].pop("uid", None)
    return node


async def known(http: TestClient[Any, Any], name: str) -> bool:
    """The extender knows node ``name`` (it passes or fails it by a plugin, not as unknown)."""
    filtered = await (await http.post("/filter", json={"Pod": POD, "NodeNames": [name]})).json()
    return "not known to the extender" not in str(filtered.get("FailedNodes") or {})


async def test_the_index_follows_node_changes_after_its_watches_break_and_after_a_failed_delta(
    api: Api, emulator: ApiEmulator, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    await emulator.seed(seeded())
    async with (
        proxied(emulator) as proxy,
        compose.extender(compose.ClusterSource(server=proxy.url), CONFIG) as app,
        TestClient(TestServer(app)) as http,
    ):
        await eventually(app[STATE_KEY].ready, within=5)
        live = app[LIVE_KEY]
        proxy.reset_all()  # every watch broken, as by a restarted API server: the cache resumes them
        assert (await api.call("POST", "/api/v1/nodes", new_node("n-9")))[0] == 201
        await eventually(lambda: known(http, "n-9"), within=10)
        assert live.rebuilds == 1  # a node added: a delta

        derive = ClusterIndex.with_nodes
        failures = iter([RuntimeError("a bug in a delta")])

        def failing_once(self: ClusterIndex, *args: Any) -> Any:
            for error in failures:
                raise error
            return derive(self, *args)

        monkeypatch.setattr(ClusterIndex, "with_nodes", failing_once)
        assert (await api.call("POST", "/api/v1/nodes", new_node("n-10")))[0] == 201
        await eventually(lambda: known(http, "n-10"), within=10)  # built again from the cache: nothing lost
        assert live.rebuilds == 2
        assert "building it again" in caplog.text and "a bug in a delta" in caplog.text
        assert (await http.get("/healthz")).status == 200


async def test_an_index_follower_that_keeps_failing_makes_healthz_fail(
    emulator: ApiEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    await emulator.seed(seeded())

    def broken(self: LiveIndex) -> None:
        raise RuntimeError("a bug in every build")

    monkeypatch.setattr(LiveIndex, "_rebuild", broken)
    async with (
        compose.extender(compose.ClusterSource(server=emulator.base_url), CONFIG) as app,
        TestClient(TestServer(app)) as http,
    ):

        async def unhealthy() -> bool:
            return (await http.get("/healthz")).status == 500

        await eventually(unhealthy, within=20)  # five failures: backoffs 0.5 + 1 + 2 + 4 s
        text = await (await http.get("/healthz")).text()
        assert text == "task extender-index failed 5 times in a row (last: RuntimeError: a bug in every build)"
        assert (await http.get("/readyz")).status == 503
        metrics = await (await http.get("/metrics")).text()
        assert 'netaware_task_restarts_total{task="extender-index"} 5.0' in metrics


async def test_a_pod_placed_at_admission_is_held_by_its_token_then_counted_on_its_node(
    api: Api, emulator: ApiEmulator
) -> None:
    # a1 plan-ungated, p2-a bound on n-7: a p1 pod admitted with no name yet is pinned there (p1 -> p2, same node:
    # cost 0) and counted on n-7 by the kept usage from then on: held by its token until the cache shows it, then as
    # the cache has it, once while pending, once bound (never twice), and no more once deleted
    group = next(doc for doc in seeded() if doc["kind"] == "AppGroup")
    group["metadata"]["annotations"] = {keys.ORDERED_SCHEDULING: keys.UNGATED_PLAN}
    await emulator.seed([*(doc for doc in seeded() if doc["kind"] != "AppGroup"), group])
    await api.call("POST", PODS, labelled_pod("p2-a", "p2", "n-7"))
    source = compose.ClusterSource(server=emulator.base_url)
    async with compose.extender(source, CONFIG, place_at_admission=True) as app, TestClient(TestServer(app)) as http:
        state = app[STATE_KEY]
        held = state.follower.admitted
        assert held is not None
        members = app[LIVE_KEY].usage.members
        await eventually(lambda: state.ready() and "default/p2-a" in members.get("a1", {}), within=5)
        pod = labelled_pod("", "p1", "")
        del pod["metadata"]["name"], pod["spec"]["nodeName"]
        pod["metadata"].update(generateName="p1-", namespace="default")
        review = {"request": {"uid": "u1", "namespace": "default", "object": pod}}
        response = (await (await http.post("/place-pods", json=review)).json())["response"]
        created = jsonpatch.apply_patch(pod, orjson.loads(base64.b64decode(response["patch"])))
        assert created["metadata"]["annotations"][keys.PLANNED_NODE] == "n-7"
        assert len(held.unseen) == 1
        usage = app[LIVE_KEY].usage
        assert usage.count["n-7"] == 2  # p2-a, and p1 held by its token
        created["metadata"]["name"] = "p1-x7k2p"
        await api.call("POST", PODS, created)
        await eventually(lambda: "default/p1-x7k2p" in members.get("a1", {}), within=5)
        assert held.unseen == {} and usage.count["n-7"] == 2
        assert members["a1"]["default/p1-x7k2p"].node_name == "n-7"
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p1-x7k2p"},
                   "target": {"kind": "Node", "name": "n-7"}}  # fmt: skip
        pending = members["a1"]["default/p1-x7k2p"]  # the version counted on its planned node
        await api.call("POST", PODS + "/p1-x7k2p/binding", binding)
        await eventually(lambda: members["a1"]["default/p1-x7k2p"] is not pending, within=5)  # bound: seen
        assert usage.count["n-7"] == 2
        await api.call("DELETE", PODS + "/p1-x7k2p")
        await eventually(lambda: "default/p1-x7k2p" not in members.get("a1", {}), within=5)
        assert usage.count["n-7"] == 1
