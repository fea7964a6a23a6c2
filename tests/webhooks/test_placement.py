"""The extender's placement asked by the webhook (``--placement-url``): one answer with both patches, and the pod
admitted with the webhook's patch alone whenever the placement does not come."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import pathlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import jsonpatch
import orjson
import pytest
import trustme
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.api import keys
from operators.cli.serving import placement_client
from operators.extender.admission import Placer
from operators.extender.answers import ExtenderState
from operators.extender.server import PLACER_KEY
from operators.extender.server import build_app as extender_app
from operators.serving import Runner
from tests.support.planning import pod
from tests.support.ungated import placing_state_of, plans_made, state_of
from webhooks.placement import Placement, PlacementError, placement_operations
from webhooks.server import METRICS_KEY, build_app
from webhooks.view import ClusterView

Client = TestClient[Any, Any]


def unnamed(workload: str, mode_annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A pod of ``workload`` of AppGroup pair as a ReplicaSet creates it: no name yet, a generateName."""
    raw = pod("", workload)
    meta = {key: value for key, value in raw["metadata"].items() if key != "name"}
    meta["annotations"] = dict(mode_annotations or {})
    return {**raw, "metadata": {**meta, "generateName": f"{workload}-"}}


def review(raw: dict[str, Any], uid: str = "u1") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
                        "namespace": raw["metadata"]["namespace"], "object": raw}}  # fmt: skip


async def admitted(client: Client, raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` as the API server stores it after the webhook's one answer."""
    answer = await client.post("/mutate-pods", json=review(raw))
    assert answer.status == 200
    response = (await answer.json())["response"]
    assert response["allowed"] is True and response["uid"] == "u1"
    return dict(jsonpatch.apply_patch(raw, orjson.loads(base64.b64decode(response.get("patch") or "W10="))))


def pinned_node(raw: dict[str, Any]) -> str | None:
    terms = raw["spec"].get("affinity", {}).get("nodeAffinity", {})
    terms = terms.get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    return str(terms[0]["matchFields"][0]["values"][0]) if terms else None


def placements(client: Client, result: str) -> float:
    return float(client.app[METRICS_KEY].placements.labels(result)._value.get())


def webhook_of(state: ExtenderState, placement: Placement) -> web.Application:
    """The webhook seeing the extender's AppGroups (the same cluster). Its own patch gives b's pods the bandwidth
    their dependency asks (``kubernetes.io/ingress-request: 50M``), which the placement must see."""
    view = ClusterView.from_snapshot(state.index().snapshot)
    return build_app(view, placement=placement)


@pytest.fixture
async def placing() -> AsyncIterator[tuple[ExtenderState, Client]]:
    """The real extender placing at admission (n1, n2 in zone za, n3 in zb; a-0 on n1, which holds 2 pods) and
    the webhook asking it."""
    state, _ = placing_state_of()
    async with TestServer(extender_app(state)) as extender:
        placement = Placement(str(extender.make_url("/place-pods")), timeout=5.0)
        async with TestClient(TestServer(webhook_of(state, placement))) as client:
            yield state, client


async def test_a_plan_ungated_pod_is_placed_and_admitted_in_one_answer(placing: tuple[ExtenderState, Client]) -> None:
    # b-0 joins a-0 on n1 (cost 0), which it fills (2 pods); b-1 is placed counting b-0 there: n2, same zone
    state, client = placing
    first, second = await admitted(client, unnamed("b")), await admitted(client, unnamed("b"))
    assert (pinned_node(first), pinned_node(second)) == ("n1", "n2")
    for raw in (first, second):  # the webhook's own patch is in the same answer
        assert raw["metadata"]["annotations"][keys.INGRESS_REQUEST] == "50M"
        assert raw["metadata"]["annotations"][keys.PLANNED_NODE] == pinned_node(raw)
    # the extender placed the pod as the webhook's patch left it
    held = state.follower.admitted  # type: ignore[union-attr]
    tokens = [raw["metadata"]["annotations"][keys.PLACED_AT_ADMISSION] for raw in (first, second)]
    assert held is not None and sorted(held.unseen) == sorted(tokens)
    assert all(held.held(token).annotations.get(keys.INGRESS_REQUEST) == "50M" for token in tokens)
    assert (placements(client, "placed"), placements(client, "failed")) == (1 + 1, 0)


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(unnamed("b", {keys.PLACED_AT_ADMISSION: "t0"}), id="placed already (a reinvocation)"),
        pytest.param({**unnamed("b"), "spec": {**unnamed("b")["spec"], "nodeName": "n3"}}, id="bound"),
        pytest.param(pod("x", "b", group="another"), id="of no AppGroup the webhook knows"),
    ],
)
async def test_a_pod_placed_bound_or_of_another_appgroup_is_not_sent_to_the_extender(
    placing: tuple[ExtenderState, Client], raw: dict[str, Any]
) -> None:
    state, client = placing
    stored = await admitted(client, raw)
    assert pinned_node(stored) is None
    assert plans_made(state) == 0
    assert sum(placements(client, result) for result in ("placed", "unplaced", "failed")) == 0


async def test_the_pods_of_a_gated_plan_are_not_sent_to_the_extender() -> None:
    state, _ = placing_state_of(mode="plan")
    async with TestServer(extender_app(state)) as extender:
        placement = Placement(str(extender.make_url("/place-pods")), timeout=5.0)
        async with TestClient(TestServer(webhook_of(state, placement))) as client:
            stored = await admitted(client, unnamed("b"))
            assert sum(placements(client, result) for result in ("placed", "unplaced", "failed")) == 0
    assert pinned_node(stored) is None and plans_made(state) == 0


def answering(body: Callable[[dict[str, Any]], Awaitable[web.Response]]) -> web.Application:
    """An extender that answers each review with ``body(review)``."""

    async def handler(request: web.Request) -> web.Response:
        return await body(await request.json())

    app = web.Application()
    app.router.add_post("/place-pods", handler)
    return app


def reply(response: dict[str, Any]) -> Callable[[dict[str, Any]], Awaitable[web.Response]]:
    async def body(asked: dict[str, Any]) -> web.Response:
        given = {"uid": asked["request"]["uid"], **response}
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": given})

    return body


NOT_APPLYING = [{"op": "replace", "path": "/spec/nothing", "value": 1}]
REPLACING_THE_POD = [{"op": "replace", "path": "", "value": {"kind": "Pod"}}]


def encoded(operations: list[dict[str, Any]]) -> str:
    return base64.b64encode(orjson.dumps(operations)).decode()


async def slow(_: dict[str, Any]) -> web.Response:
    await asyncio.sleep(2)
    return web.json_response({})


async def refused(_: dict[str, Any]) -> web.Response:
    return web.json_response({"error": "x"}, status=500)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(slow, id="later than the timeout"),
        pytest.param(refused, id="HTTP 500"),
        pytest.param(reply({"allowed": False}), id="not allowed"),
        pytest.param(reply({"uid": "another", "allowed": True}), id="another uid"),
        pytest.param(reply({"allowed": True, "patchType": "JSONPatch", "patch": "!!"}), id="not base64"),
        pytest.param(
            reply({"allowed": True, "patchType": "JSONPatch", "patch": encoded(NOT_APPLYING)}),
            id="a patch that does not apply",
        ),
        pytest.param(
            reply({"allowed": True, "patchType": "JSONPatch", "patch": encoded(REPLACING_THE_POD)}),
            id="a patch that replaces the pod",
        ),
    ],
)
async def test_a_placement_that_fails_admits_the_pod_with_the_webhooks_patch_alone(
    body: Callable[[dict[str, Any]], Awaitable[web.Response]],
) -> None:
    state = state_of()
    async with TestServer(answering(body)) as extender:
        placement = Placement(str(extender.make_url("/place-pods")), timeout=0.3)
        async with TestClient(TestServer(webhook_of(state, placement))) as client:
            stored = await admitted(client, unnamed("b"))
            assert (placements(client, "failed"), placements(client, "placed")) == (1, 0)
    assert pinned_node(stored) is None and stored["metadata"]["annotations"][keys.INGRESS_REQUEST] == "50M"


@contextlib.asynccontextmanager
async def serving(app: web.Application, port: int, cancelling: bool) -> AsyncIterator[str]:
    """``app`` on loopback ``port``: as aiohttp's test server runs it (a handler cancelled when its caller goes), or
    as netaware serves it (:class:`~operators.serving.Runner`: the handler runs on); its placement URL."""
    if cancelling:
        async with TestServer(app, port=port) as server:
            yield str(server.make_url("/place-pods"))
        return
    runner = Runner(app)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", port).start()
        yield f"http://127.0.0.1:{port}/place-pods"
    finally:
        await runner.cleanup()


@pytest.mark.parametrize("cancelling", [True, False], ids=["handler cancelled", "handler runs on"])
async def test_a_placement_the_webhook_gave_up_on_is_not_counted_by_the_extender(
    cancelling: bool, unused_tcp_port: int
) -> None:
    # the extender gathers b's pods for 300 ms; the webhook waits 100 ms and admits the pod unplaced: the extender,
    # done later, must not keep counting a copy of a pod that will be created without its placement
    state, _ = placing_state_of()
    app = extender_app(state)
    held = state.follower.admitted
    assert held is not None
    app[PLACER_KEY] = Placer(app[PLACER_KEY].place, held, quiet=0.3, most=1.0)
    async with serving(app, unused_tcp_port, cancelling) as url:
        placement = Placement(url, timeout=0.1)
        async with TestClient(TestServer(webhook_of(state, placement))) as client:
            assert pinned_node(await admitted(client, unnamed("b"))) is None
            assert placements(client, "failed") == 1
            await asyncio.sleep(0.6)  # the gathering planned, the answer found its caller gone
    assert plans_made(state) == 1 and held.unseen == {}
    assert state.index().requested("n1")[1] == 1  # a-0 alone


async def test_an_extender_that_is_not_there_admits_the_pod_unplaced(unused_tcp_port: int) -> None:
    placement = Placement(f"http://127.0.0.1:{unused_tcp_port}/place-pods", timeout=1.0)
    async with TestClient(TestServer(webhook_of(state_of(), placement))) as client:
        stored = await admitted(client, unnamed("b"))
        assert placements(client, "failed") == 1
    assert pinned_node(stored) is None and stored["metadata"]["annotations"][keys.INGRESS_REQUEST] == "50M"


async def test_the_placement_is_asked_over_tls_verified_by_the_ca_file(tmp_path: pathlib.Path) -> None:
    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    state, _ = placing_state_of()
    extender = TestServer(extender_app(state))
    await extender.start_server(ssl=server_context)
    try:
        placement = placement_client(str(extender.make_url("/place-pods")), str(tmp_path / "ca.crt"), 5.0)
        assert placement is not None and placement.url.startswith("https://")
        async with TestClient(TestServer(webhook_of(state, placement))) as client:
            assert pinned_node(await admitted(client, unnamed("b"))) == "n1"
        untrusted = Placement(placement.url, 5.0)  # the system's roots do not know this CA
        async with TestClient(TestServer(webhook_of(state, untrusted))) as client:
            assert pinned_node(await admitted(client, unnamed("b"))) is None
            assert placements(client, "failed") == 1
    finally:
        await extender.close()


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["response", "uid", "allowed", "patch", "patchType"]), inner, max_size=5),
    max_leaves=12).map(orjson.dumps)))  # fmt: skip
def test_any_answer_is_a_list_of_operations_or_a_one_line_error(answer: bytes) -> None:
    try:
        operations = placement_operations(answer, "u1")
    except PlacementError as error:
        assert "\n" not in str(error)
    else:
        assert isinstance(operations, list) and all(isinstance(item, dict) for item in operations)


@pytest.mark.parametrize(
    ("url", "ca_file", "message"),
    [
        ("", "/tmp/ca.crt", "--placement-ca-file needs --placement-url"),
        ("ftp://extender/place-pods", None, "--placement-url"),
        ("https:///place-pods", None, "--placement-url"),
        ("https://extender:8888/place-pods", "/nonexistent/ca.crt", "--placement-ca-file /nonexistent/ca.crt"),
        ("http://extender:8888/place-pods", "/tmp/ca.crt", "--placement-ca-file needs an https://"),
    ],
)
def test_the_placement_flags_are_refused_naming_the_flag(url: str, ca_file: str | None, message: str) -> None:
    with pytest.raises(Exception) as raised:
        placement_client(url, ca_file, 1.0)
    shown = raised.value.format_message() if hasattr(raised.value, "format_message") else str(raised.value)
    assert message in shown or message in str(getattr(raised.value, "param_hint", ""))
