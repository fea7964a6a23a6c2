"""The extender's placement webhook: a pod of a plan-ungated AppGroup planned as it is created and pinned to its
node. Cluster (as test_plans): n1 (room for 2 pods) and n2 in zone za, n3 in zb (5 between the zones), the
dependency a -> b, a-0 bound on n1."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any

import jsonpatch
import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer

from operators.api import keys
from operators.engine.cluster.objects import Pod
from operators.extender.admission import AdmittedPods, Placer, placement_patch
from operators.extender.answers import ExtenderState
from operators.extender.server import build_app
from operators.sources.kinds import PODS
from tests.support.planning import NAMESPACE, pod
from tests.support.ungated import counted, filter_of, group_with, placing_state_of, plans_made, state_of

Client = TestClient[Any, Any]


def review(raw: dict[str, Any], uid: str = "u1") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "namespace": raw["metadata"]["namespace"], "object": raw}}  # fmt: skip


def unnamed(workload: str) -> dict[str, Any]:
    """A pod of ``workload`` as a ReplicaSet creates it: no name yet, a generateName."""
    raw = pod("", workload)
    meta = {key: value for key, value in raw["metadata"].items() if key != "name"}
    return {**raw, "metadata": {**meta, "generateName": f"{workload}-"}}


async def admitted(client: Client, raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` as the API server stores it after the webhook's answer."""
    answer = await client.post("/place-pods", json=review(raw))
    assert answer.status == 200
    response = (await answer.json())["response"]
    assert response["allowed"] is True and response["uid"] == "u1"
    if "patch" not in response:
        return raw
    return dict(jsonpatch.apply_patch(raw, orjson.loads(base64.b64decode(response["patch"]))))


def pinned_node(raw: dict[str, Any]) -> str | None:
    terms = raw["spec"].get("affinity", {}).get("nodeAffinity", {})
    terms = terms.get("requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    if not terms:
        return None
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": terms[0]["matchFields"]
                                        [0]["values"]}]}]  # fmt: skip
    (node,) = terms[0]["matchFields"][0]["values"]
    assert raw["metadata"]["annotations"][keys.PLANNED_NODE] == node
    return str(node)


def placing(*pending: dict[str, Any], **options: Any) -> ExtenderState:
    return placing_state_of(*pending, **options)[0]


@pytest.fixture
async def ungated() -> AsyncIterator[tuple[ExtenderState, Client]]:
    state = placing()
    async with TestClient(TestServer(build_app(state))) as client:
        yield state, client


async def test_each_pod_is_pinned_where_its_plan_puts_it_counting_those_admitted_before(
    ungated: tuple[ExtenderState, Client],
) -> None:
    # b-0 joins a-0 on n1 (cost 0) and fills it (2 pods); b-1, admitted before the cache holds b-0, must count it
    # there: n1 is full, so n2 in the same zone (cost 1), not n3 in the other (5)
    state, client = ungated
    first, second = await admitted(client, unnamed("b")), await admitted(client, unnamed("b"))
    assert (pinned_node(first), pinned_node(second)) == ("n1", "n2")
    tokens = {raw["metadata"]["annotations"][keys.PLACED_AT_ADMISSION] for raw in (first, second)}
    assert len(tokens) == 2 and set(state.follower.admitted.unseen) == tokens  # type: ignore[union-attr]


def pinned_pod(name: str, node: str, annotations: dict[str, str] | None = None, group: str = "pair") -> dict[str, Any]:
    """Pod ``name`` of workload b (of AppGroup ``group``) as the API server stores it once placed on ``node`` at
    admission (not bound)."""
    raw = pod(name, "b", group=group)
    raw["metadata"]["annotations"] = dict(annotations or {})
    return dict(jsonpatch.apply_patch(raw, placement_patch(Pod.parse(raw), node, f"token-{name}")))


def pods_on(state: ExtenderState, node: str) -> int:
    return state.index().requested(node)[1]


async def test_a_pod_placed_at_admission_is_counted_on_its_node_once_from_its_admission_to_its_end() -> None:
    # n1 holds a-0; b's pod is placed there (cost 0): counted there as admitted (2 pods), still once when the cache
    # shows it (its held copy forgotten), once bound, and not at all once deleted
    state, cache = placing_state_of(n1_pods="3")
    async with TestClient(TestServer(build_app(state))) as client:
        assert pods_on(state, "n1") == 1
        stored = await admitted(client, unnamed("b"))
        assert pinned_node(stored) == "n1" and pods_on(state, "n1") == 2
        stored["metadata"]["name"] = "b-x7k2p"  # the name the API server gave it
        cache.apply(PODS, "ADDED", stored)
        assert state.follower.admitted.unseen == {} and pods_on(state, "n1") == 2  # type: ignore[union-attr]
        cache.apply(PODS, "MODIFIED", {**stored, "spec": {**stored["spec"], "nodeName": "n1"}})
        assert pods_on(state, "n1") == 2
        cache.apply(PODS, "DELETED", stored)
        assert pods_on(state, "n1") == 1


async def test_a_pod_created_with_its_name_is_kept_among_its_appgroups_members_once_the_cache_shows_it() -> None:
    # a pod created with a name (no generateName) comes into the cache under the name it was placed with: its held
    # copy is forgotten, the cache's version stays, counted once on n1 and a member of pair the next plan sees
    state, cache = placing_state_of(n1_pods="3")
    async with TestClient(TestServer(build_app(state))) as client:
        stored = await admitted(client, pod("b-named", "b"))
        assert pinned_node(stored) == "n1" and pods_on(state, "n1") == 2
        cache.apply(PODS, "ADDED", stored)
    assert pods_on(state, "n1") == 2
    assert state.live is not None and set(state.live.usage.members["pair"]) == {"default/a-0", "default/b-named"}


async def test_a_pod_the_cache_never_shows_is_no_longer_counted_after_its_time() -> None:
    now = [1000.0]
    counts: list[tuple[str | None, str | None]] = []
    held = AdmittedPods(lambda old, new: counts.append((old and old.node_name, new and new.node_name)),
                        clock=lambda: now[0])  # fmt: skip
    held.admitted("t1", Pod.parse(pod("b-t1", "b", on="n1")))
    now[0] += 29.0
    held.admitted("t2", Pod.parse(pod("b-t2", "b", on="n2")))
    assert counts == [(None, "n1"), (None, "n2")]
    now[0] += 1.0  # t1 30 s old: forgotten by the next admission, uncounted
    held.admitted("t3", Pod.parse(pod("b-t3", "b", on="n3")))
    assert counts[2:] == [("n1", None), (None, "n3")] and set(held.unseen) == {"t2", "t3"}
    assert held.held("t3") is not None and held.held("t3").key == f"{NAMESPACE}/b-t3@t3"  # type: ignore[union-attr]
    now[0] += 30.0  # no admission since: the next change of the cache forgets t2 and t3
    held.on_changes([])
    assert counts[4:] == [("n2", None), ("n3", None)] and held.unseen == {}


async def test_a_pod_placed_at_admission_is_counted_on_its_node_once_the_cache_holds_it() -> None:
    # x-p of AppGroup other, placed on n1 at admission and not bound yet, is in the cache: n1 (a-0 and x-p, room
    # for 2) is full, so pair's next b pod goes to n2 (same zone, cost 1), not to n1 beside a-0 (cost 0); asked
    # about, x-p is answered with n1 alone and no plan is made
    stored = pinned_pod("x-p", "n1", group="other")
    state = placing(stored, groups=(group_with("plan-ungated", "other"),))
    async with TestClient(TestServer(build_app(state))) as client:
        assert pinned_node(await admitted(client, unnamed("b"))) == "n2"
    plans = plans_made(state)
    assert filter_of(state, stored, ["n1"])["NodeNames"] == ["n1"]
    assert plans_made(state) == plans


def test_a_pod_placed_at_admission_is_judged_on_its_node_without_itself() -> None:
    # b-p takes 600M in of n1's 1G: counted on n1 once it fits; counted again by its own filter (the usage already
    # holds it there), 1.2G would not, and the pod would be answered off its plan
    stored = pinned_pod("b-p", "n1", {keys.INGRESS_BANDWIDTH: "600M"})
    state = state_of(stored)
    assert filter_of(state, stored, ["n1"])["NodeNames"] == ["n1"]
    assert counted(state, "on-plan") == 1 and counted(state, "off-plan") == 0
    # the answer left the usage as the cache has it: another pod of 600M does not fit there
    other = pod("b-q", "b")
    other["metadata"]["annotations"] = {keys.INGRESS_BANDWIDTH: "600M"}
    assert "n1" in filter_of(state, other, ["n1"])["FailedNodes"]


async def test_a_pod_kube_scheduler_sees_before_the_cache_is_judged_without_its_held_copy() -> None:
    # b's pod of 600M in is placed on n1 (1G) at admission and held there by its token; kube-scheduler asks about
    # it before the extender's cache shows it: its held copy and itself would be 1.2G, so its filter must leave the
    # copy out, and put it back after (another 600M pod does not fit on n1)
    state, _ = placing_state_of()
    raw = unnamed("b")
    raw["metadata"]["annotations"] = {keys.INGRESS_BANDWIDTH: "600M"}
    async with TestClient(TestServer(build_app(state))) as client:
        stored = await admitted(client, raw)
    assert pinned_node(stored) == "n1" and len(state.follower.admitted.unseen) == 1  # type: ignore[union-attr]
    stored["metadata"]["name"] = "b-x7k2p"
    assert filter_of(state, stored, ["n1"])["NodeNames"] == ["n1"]
    other = pod("b-q", "b")
    other["metadata"]["annotations"] = {keys.INGRESS_BANDWIDTH: "600M"}
    assert "n1" in filter_of(state, other, ["n1"])["FailedNodes"]


async def test_the_pods_of_other_modes_and_other_pods_are_admitted_unchanged() -> None:
    for mode in ("plan", "true"):
        async with TestClient(TestServer(build_app(placing(mode=mode)))) as client:
            raw = unnamed("b")
            assert await admitted(client, raw) == raw
    async with TestClient(TestServer(build_app(placing()))) as client:
        loose = unnamed("b")
        del loose["metadata"]["labels"]
        assert await admitted(client, loose) == loose


async def test_a_review_that_is_not_one_is_refused_naming_the_field(ungated: tuple[ExtenderState, Client]) -> None:
    _, client = ungated
    for body, field in (({"request": []}, "request"), ({"request": {"uid": "u"}}, "request.object"),
                        (review({**pod("b-0", "b"), "spec": []}), "spec")):  # fmt: skip
        answer = await client.post("/place-pods", json=body)
        assert answer.status == 400
        assert field in (await answer.json())["error"]
    assert (await client.post("/place-pods", data=b"{")).status == 400


async def test_pods_admitted_together_are_placed_by_one_plan(ungated: tuple[ExtenderState, Client]) -> None:
    # a ReplicaSet creates its pods together: both b pods in one plan, each with its own node (n1 holds one more)
    state, client = ungated
    first, second = await asyncio.gather(admitted(client, unnamed("b")), admitted(client, unnamed("b")))
    assert {pinned_node(first), pinned_node(second)} == {"n1", "n2"}
    assert plans_made(state) == 1


async def test_the_plans_of_two_appgroups_admitted_together_do_not_share_a_place() -> None:
    # n1 holds a-0 of pair and x-0 of other, with room for one pod more; a b pod of each group wants it (to join its
    # a pod: cost 0). The plans are made one after the other in the same gathering: the second must count the
    # first's pod on n1 and go to n2 (cost 1), never both to n1 (one of them would never bind)
    other = group_with("plan-ungated", "other")
    state = placing(n1_pods="3", placed=(pod("x-0", "a", on="n1", group="other"),), groups=(other,))
    async with TestClient(TestServer(build_app(state))) as client:
        mine, theirs = unnamed("b"), unnamed("b")
        theirs["metadata"]["labels"][keys.APPGROUP_LABEL] = "other"
        placed = await asyncio.gather(admitted(client, mine), admitted(client, theirs))
    assert sorted(pinned_node(raw) or "" for raw in placed) == ["n1", "n2"]
    assert plans_made(state) == 2


def gathered_by(quiet: float, most: float) -> tuple[Placer, list[list[str]]]:
    """A placer whose plans record the pods each was given (and place them all on n1)."""
    plans: list[list[str]] = []

    def place(pods: list[Pod], _: Any) -> dict[str, str]:
        plans.append([p.key for p in pods])
        return {p.key: "n1" for p in pods}

    return Placer(place, AdmittedPods(lambda old, new: None), quiet=quiet, most=most), plans


async def admitted_after(placer: Placer, delay: float, name: str) -> str | None:
    await asyncio.sleep(delay)
    return await placer.node_of(Pod.parse(pod(name, "b")), group_with("plan-ungated"), f"token-{name}")


async def test_an_appgroups_pods_are_gathered_until_none_arrived_for_the_quiet_time() -> None:
    # b-0 to b-3 arrive 50 ms apart, each within 300 ms of the one before: one gathering, one plan, all four placed
    placer, plans = gathered_by(quiet=0.3, most=5.0)
    nodes = await asyncio.gather(*(admitted_after(placer, 0.05 * n, f"b-{n}") for n in range(4)))
    assert nodes == ["n1"] * 4
    assert plans == [[f"{NAMESPACE}/b-{n}" for n in range(4)]]


async def test_an_appgroups_gathering_is_planned_at_the_latest_its_most_after_its_first_pod() -> None:
    # quiet 300 ms, most 200 ms: b-0 (at 0) and b-1 (100 ms) are planned at 200 ms although b-1 came 100 ms before;
    # b-2 (250 ms) starts the next gathering, which b-3 (350 ms) joins
    placer, plans = gathered_by(quiet=0.3, most=0.2)
    await asyncio.gather(*(admitted_after(placer, delay, f"b-{n}") for n, delay in enumerate((0, 0.1, 0.25, 0.35))))
    assert plans == [[f"{NAMESPACE}/b-0", f"{NAMESPACE}/b-1"], [f"{NAMESPACE}/b-2", f"{NAMESPACE}/b-3"]]
