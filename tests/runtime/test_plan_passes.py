"""One pass of the gate keeper plans the AppGroups whose pods arrived together, first come first planned, over one
kept index: a plan made later in the pass never gives an earlier plan's room away, and the index is the cache's
again after the pass. Hand-derived on two nodes; the API is replaced by a recorder of the releases sent."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from operators.api import keys
from operators.api.config.controllers import AppGroupOptions
from operators.controllers import gates
from operators.controllers.gates import GateKeeper
from operators.controllers.releases import Placed, Releases
from operators.engine.cluster.objects import Pod
from operators.engine.simulation import ordered
from operators.sources.cache import ClusterCache
from operators.sources.kinds import APPGROUP_PODS, APPGROUP_SPECS, NETWORKTOPOLOGIES, NODES
from operators.sources.live_index import LiveIndex
from tests.support.planning import CONFIG, node, pod, topology

NOW = 1_000_000.0


def single(name: str) -> dict[str, Any]:
    """A plan-mode AppGroup of one workload, ``w``, as the API serves it."""
    raw = ordered.appgroup(name, {"w": []}).model_dump(mode="json", by_alias=True, exclude_none=True)
    raw["metadata"]["annotations"] = {keys.ORDERED_SCHEDULING: "plan"}
    return raw


def gated(name: str, group: str, cpu: str) -> dict[str, Any]:
    raw = pod(name, "w", cpu=cpu, group=group)
    raw["spec"]["schedulingGates"] = [{"name": keys.TOPOLOGY_ORDER_GATE}]
    raw["metadata"]["uid"] = name
    return raw


def keeper_over(objects: list[dict[str, Any]], arrivals: dict[str, float]) -> tuple[GateKeeper, ClusterCache]:
    """A gate keeper (plans on) over a cache holding ``objects``; pod -> when it arrived."""
    cache = ClusterCache((NODES, APPGROUP_PODS, APPGROUP_SPECS, NETWORKTOPOLOGIES))
    for raw in objects:
        kind = {"Node": NODES, "Pod": APPGROUP_PODS, "NetworkTopology": NETWORKTOPOLOGIES}[raw["kind"]]
        cache.apply(kind, "ADDED", copy.deepcopy(raw))
    for group in (single("a"), single("b")):
        cache.apply(APPGROUP_SPECS, "ADDED", group)
    members: dict[tuple[str, str], dict[str, Pod]] = {}  # what the AppGroup controller keeps
    for held in cache.objects(APPGROUP_PODS):
        members.setdefault((held.namespace, held.labels[keys.APPGROUP_LABEL]), {})[held.name] = held
    options = AppGroupOptions(plans=True, plan_config=CONFIG)
    live = LiveIndex(cache, CONFIG.bandwidth.default_node_bandwidth)
    keeper = GateKeeper(cache, 300.0, members, clock=lambda: NOW, options=options, live=live)
    keeper.on_changes(cache.subscribe(keeper.on_changes))
    for name, when in arrivals.items():
        keeper.arrived[("default", name)] = when
    return keeper, cache


async def one_pass(keeper: GateKeeper, monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    """One pass over every marked name; pod -> the node its release names (None: released without a place)."""
    sent: dict[str, str | None] = {}

    async def record(self: Releases, api: Any, writing: asyncio.Semaphore, item: Any) -> None:
        assert isinstance(item, Placed)
        sent[item.pod.name] = item.node

    async def quiet(*_: Any) -> None:
        return None

    monkeypatch.setattr(Releases, "send", record)
    monkeypatch.setattr(keeper.announcer, "announce", quiet)
    names, keeper.marked = keeper.marked, set()
    await keeper._pass(None, asyncio.Semaphore(1), names)
    await asyncio.gather(*keeper.writes.tasks)  # the pass's writes run apart from it
    return sent


async def test_a_later_plan_of_the_same_pass_never_takes_an_earlier_plans_room(monkeypatch: pytest.MonkeyPatch) -> None:
    """n1 has 3 of its 4 cpus left (a bound pod asks 1), n2 (another zone) 4. a-0 asks 3 cpus, b-0 asks 3: each fits
    n1 or n2 alone, never both on one node. b-0 arrived first: b is planned first and takes n1 (the first of two
    equal nodes in the seeded order: it may be either); a, planned next in the same pass, must get the other node,
    as the index it reads counts b-0 where b's plan put it — though b-0's release has not even been sent yet."""
    objects = [node("n1", "za"), node("n2", "zb"), topology(5), pod("bound", "x", on="n1", cpu="1", group="x"),
               gated("a-0", "a", "3"), gated("b-0", "b", "3")]  # fmt: skip
    keeper, _ = keeper_over(objects, {"a-0": NOW - 1.0, "b-0": NOW - 2.0})
    assert keeper._arrival("b") < keeper._arrival("a")  # first come (b), first planned, whatever the names' order
    sent = await one_pass(keeper, monkeypatch)
    assert set(sent) == {"a-0", "b-0"} and None not in sent.values()
    assert sent["a-0"] != sent["b-0"]  # 3 + 3 cpus never fit one node's 4 (or 3)
    # the kept index is the cache's again: nothing bound, so both nodes show their room as before the pass
    assert keeper.live is not None
    assert keeper.live.current().headroom(("cpu",))[0].tolist() == [[3000], [4000]]


async def test_a_plans_log_line_is_written_before_any_of_its_releases_is_sent(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Whoever sees a planned pod bound finds its plan in the log already: the line is written when the plan is made,
    the Event (an API write) only after the releases. It was written with the Event, and a busy machine bound the
    pods before the operator logged their plan (an e2e test read the log in between and found no plan)."""
    objects = [node("n1", "za"), node("n2", "zb"), topology(5), gated("a-0", "a", "1")]
    keeper, _ = keeper_over(objects, {"a-0": NOW - 1.0})
    logged_at_send: list[list[str]] = []

    async def record(self: Releases, api: Any, writing: asyncio.Semaphore, item: Any) -> None:
        logged_at_send.append([r.getMessage() for r in caplog.records if " planned in " in r.getMessage()])

    async def quiet(*_: Any) -> None:
        return None

    monkeypatch.setattr(Releases, "send", record)
    monkeypatch.setattr(keeper.announcer, "announce", quiet)  # the Event after the releases: no line from it
    caplog.set_level("INFO", logger="netaware.gates")
    names, keeper.marked = keeper.marked, set()
    await keeper._pass(None, asyncio.Semaphore(1), names)
    await asyncio.gather(*keeper.writes.tasks)
    assert len(logged_at_send) == 1  # a-0's one release
    assert len(logged_at_send[0]) == 1 and "AppGroup default/a: 1 pod(s) planned in " in logged_at_send[0][0]
    # and how long after its last pod arrived (a-0, 1 s before the pass's clock): the settle and any backlog
    assert logged_at_send[0][0].endswith(" (1.00 s after its last pod was seen)")


def released(name: str, group: str, on: str, cpu: str) -> dict[str, Any]:
    """A pod a plan released to ``on``, not bound yet."""
    raw = pod(name, "w", cpu=cpu, group=group)
    raw["metadata"]["annotations"] = {keys.PLANNED_NODE: on}
    raw["metadata"]["uid"] = name
    return raw


async def test_a_released_pods_planned_node_is_checked_once_per_strand_check_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A group planned in parts is planned pass after pass; its released, unbound pod a-0 is checked against the
    bound pods (is it stranded?) at the first pass, not at the next one a second later, and again once
    STRAND_CHECK_SECONDS (2 s) have passed since its check. A stranded pod is still found when it is checked: b-0,
    planned on n1, which a bound pod has filled since (4 cpus of 4), is given up at its first check, and once."""
    objects = [node("n1", "za"), node("n2", "zb"), topology(5), pod("filler", "x", on="n1", cpu="4", group="x"),
               released("a-0", "a", "n2", "1"), gated("a-1", "a", "1"),
               released("b-0", "b", "n1", "1"), gated("b-1", "b", "1")]  # fmt: skip
    keeper, _ = keeper_over(objects, {"a-1": NOW - 1.0, "b-1": NOW - 1.0})
    asked: list[list[str]] = []
    real = gates.stranded

    def recorded(members: list[Pod], *rest: Any) -> list[tuple[Pod, str]]:
        asked.append(sorted(member.name for member in members))
        return real(members, *rest)

    abandoned: list[tuple[float, str, str]] = []

    async def abandon(api: Any, group: Any, stranded_pod: Pod, why: str) -> None:
        abandoned.append((keeper.clock(), stranded_pod.name, why))

    monkeypatch.setattr(gates, "stranded", recorded)
    monkeypatch.setattr(keeper, "_abandon", abandon)
    for when in (NOW, NOW + 1.0, NOW + 2.0):
        keeper.clock = lambda when=when: when
        keeper.marked = {"a", "b"}
        await one_pass(keeper, monkeypatch)
    # each pass asks once per group planned, a's members then b's. At NOW: a-0 and b-0 (a-1, b-1 gated). At NOW + 1:
    # a-1 and b-1, released by the first pass (in flight: counted as released), not a-0 nor b-0. At NOW + 2: a-0 and
    # b-0 again, not a-1 nor b-1 (checked a second ago). Every pass asked about all of them before.
    assert asked == [["a-0"], ["b-0"], ["a-1"], ["b-1"], ["a-0"], ["b-0"]], asked
    assert abandoned == [(NOW, "b-0", "its planned node n1 no longer fits it: Insufficient cpu")], abandoned


def test_a_groups_appgroup_is_looked_up_once_per_namespace_not_per_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three gated pods of a in one namespace: the AppGroup covering them is looked up once a plan, not three times
    (a 300-pod group's lookups were a tenth of the passes' time)."""
    objects = [node("n1", "za"), topology(5), *(gated(f"a-{n}", "a", "100m") for n in range(3))]
    keeper, _ = keeper_over(objects, {f"a-{n}": NOW - 1.0 for n in range(3)})
    looked: list[tuple[str, str]] = []
    real = gates.pod_appgroup

    def counted(name: str, namespace: str, groups: Any) -> Any:
        looked.append((name, namespace))
        return real(name, namespace, groups)

    monkeypatch.setattr(gates, "pod_appgroup", counted)
    made = keeper.plans("a", NOW)
    assert looked == [("a", "default")] and len(made) == 1 and made[0][0] is not None


async def test_without_room_for_both_the_later_arrival_is_released_without_a_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One node, 4 cpus: a-0 (arrived first) and b-0 ask 3 each. a is planned first and gets n1; b, in the same
    pass, finds no room (a's 3 cpus counted on n1) and is released without a place for kube-scheduler to say."""
    objects = [node("n1", "za"), topology(5), gated("a-0", "a", "3"), gated("b-0", "b", "3")]
    keeper, _ = keeper_over(objects, {"a-0": NOW - 2.0, "b-0": NOW - 1.0})
    assert await one_pass(keeper, monkeypatch) == {"a-0": "n1", "b-0": None}
    keeper, _ = keeper_over(objects, {"a-0": NOW - 1.0, "b-0": NOW - 2.0})  # the other way round
    assert await one_pass(keeper, monkeypatch) == {"a-0": None, "b-0": "n1"}


async def test_a_pass_plans_for_its_time_at_most_and_leaves_the_rest_marked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With every plan taking longer than the pass's time, the pass plans the first arrival only; the other name
    stays marked for the next pass (after this one's releases are sent)."""
    objects = [node("n1", "za"), node("n2", "zb"), topology(5), gated("a-0", "a", "1"), gated("b-0", "b", "1")]
    keeper, _ = keeper_over(objects, {"a-0": NOW - 1.0, "b-0": NOW - 2.0})
    monkeypatch.setattr(gates, "PASS_SECONDS", 0.0)  # any plan takes longer
    sent = await one_pass(keeper, monkeypatch)
    assert list(sent) == ["b-0"] and keeper.marked == {"a"}


def answered_when_told(keeper: GateKeeper, monkeypatch: pytest.MonkeyPatch) -> tuple[asyncio.Event, list[str]]:
    """An API that answers a-0's release only once the event is set (any other at once): the event, and the pods
    whose releases were answered, in order."""
    answer = asyncio.Event()
    sent: list[str] = []

    async def slow_for_a(self: Releases, api: Any, writing: asyncio.Semaphore, item: Any) -> None:
        if item.pod.name == "a-0":
            await answer.wait()
        sent.append(item.pod.name)

    async def quiet(*_: Any) -> None:
        return None

    monkeypatch.setattr(Releases, "send", slow_for_a)
    monkeypatch.setattr(keeper.announcer, "announce", quiet)
    return answer, sent


async def test_a_pass_plans_while_the_releases_of_the_one_before_are_still_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API answers a-0's release only when told to; b, marked after a's pass, is planned and released by the
    next pass meanwhile (a pass waits for no write: its writes are a task of their own). Stopped with a-0's
    release still unanswered, the loop ends its writes: none outlives it."""
    objects = [node("n1", "za"), node("n2", "zb"), topology(5), gated("a-0", "a", "1"), gated("b-0", "b", "1")]
    keeper, _ = keeper_over(objects, {"a-0": NOW - 2.0, "b-0": NOW - 1.0})
    _, sent = answered_when_told(keeper, monkeypatch)
    await keeper._pass(None, asyncio.Semaphore(1), {"a"})
    await asyncio.wait_for(keeper._pass(None, asyncio.Semaphore(1), {"b"}), 5)
    for _ in range(10):  # b's writes run to their end; a's wait for the answer
        await asyncio.sleep(0)
    assert sent == ["b-0"] and [task.done() for task in keeper.writes.tasks] == [False, True]
    waiting = keeper.writes.tasks[0]
    await asyncio.wait_for(keeper.writes.end(), 5)
    assert waiting.cancelled() and keeper.writes.tasks == [] and sent == ["b-0"]


async def test_a_pass_waits_for_the_oldest_writes_when_too_many_are_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """With WRITES_BEHIND 1, the second pass waits until the first pass's writes are done before it plans."""
    objects = [node("n1", "za"), node("n2", "zb"), topology(5), gated("a-0", "a", "1"), gated("b-0", "b", "1")]
    keeper, _ = keeper_over(objects, {"a-0": NOW - 2.0, "b-0": NOW - 1.0})
    monkeypatch.setattr(gates, "WRITES_BEHIND", 1)
    answer, sent = answered_when_told(keeper, monkeypatch)
    await keeper._pass(None, asyncio.Semaphore(1), {"a"})
    second = asyncio.create_task(keeper._pass(None, asyncio.Semaphore(1), {"b"}))
    for _ in range(10):
        await asyncio.sleep(0)
    assert not second.done() and sent == []  # held until a's release is answered
    answer.set()
    await asyncio.wait_for(second, 5)
    await asyncio.gather(*keeper.writes.tasks)
    assert sent == ["a-0", "b-0"]


async def test_a_release_in_flight_expires_from_its_answer_not_from_its_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Planned at 0 and queued behind a burst's writes until 40 (past IN_FLIGHT_SECONDS 30 from the plan), the
    release is still counted at 40; answered at 40, it is counted until 70 and forgotten from then on."""
    from operators.controllers import releases as releases_module

    clock = [0.0]
    held = Releases(lambda: clock[0], lambda pod: None)
    item = Placed(Pod.parse(gated("a-0", "a", "1")), "planned", 0.0, node="n1")
    held.start([item], clock[0])
    clock[0] = 40.0
    assert held.expire(clock[0]) == [] and held.sending(item.pod)

    async def answered(*_: Any, **__: Any) -> dict[str, Any]:
        return {}

    monkeypatch.setattr(releases_module, "send_json", answered)
    await held.send(None, asyncio.Semaphore(1), item)
    assert held.expire(69.9) == [] and held.sending(item.pod)
    assert [pod.name for pod in held.expire(70.0)] == ["a-0"] and not held.sending(item.pod)


def budgets_given(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The budget of every call of release_by_plan from now on (the gate keeper's still decides)."""
    budgets: list[float] = []
    decide = gates.release_by_plan

    def recorded(*args: Any, **kwargs: Any) -> Any:
        budgets.append(args[7])
        return decide(*args, **kwargs)

    monkeypatch.setattr(gates, "release_by_plan", recorded)
    return budgets


async def test_a_backlog_shares_the_pass_among_its_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    """Budget 100 ms, a pass of 100 ms: a and b waiting together are planned with 50 ms each; a alone with its
    100 ms (release_by_plan is called with the budget the pass gives it)."""
    budgets = budgets_given(monkeypatch)
    monkeypatch.setattr(gates, "PASS_SECONDS", 0.1)
    objects = [node("n1", "za"), node("n2", "zb"), topology(5), gated("a-0", "a", "1"), gated("b-0", "b", "1")]
    keeper, _ = keeper_over(objects, {"a-0": NOW - 2.0, "b-0": NOW - 1.0})
    await one_pass(keeper, monkeypatch)
    assert budgets == [0.05, 0.05]
    alone = [node("n1", "za"), topology(5), gated("a-0", "a", "1")]
    keeper, _ = keeper_over(alone, {"a-0": NOW - 2.0})
    budgets.clear()
    await one_pass(keeper, monkeypatch)
    assert budgets == [0.1]


async def test_a_burst_s_recent_plans_share_its_planning_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """a waits alone, 11 plans were made in the last 2 s and one 2.5 s ago: a gets 0.3 s/s x 2 s over 11 + 1 =
    50 ms (not 100 ms; 46 ms if the older plan counted), and its plan is counted for the next pass."""
    budgets = budgets_given(monkeypatch)
    keeper, _ = keeper_over([node("n1", "za"), topology(5), gated("a-0", "a", "1")], {"a-0": NOW - 2.0})
    keeper.pace.made.extend([NOW - 2.5, *[NOW - 1.0] * 11])
    assert await one_pass(keeper, monkeypatch) == {"a-0": "n1"}
    assert budgets == [pytest.approx(0.05)]
    assert list(keeper.pace.made) == [NOW - 1.0] * 11 + [NOW]


async def test_releases_the_loop_did_not_write_before_it_ended_are_planned_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """a-0's release waits for an answer that never comes; the loop is stopped (cancelled): its writes end with
    it, and a-0 is no longer counted in flight, so the restarted loop plans it again (it was never released)."""
    objects = [node("n1", "za"), topology(5), gated("a-0", "a", "1")]
    keeper, _ = keeper_over(objects, {"a-0": NOW - 2.0})
    answered_when_told(keeper, monkeypatch)

    async def synced() -> None:
        return None

    monkeypatch.setattr(keeper.cache, "wait_synced", synced)
    loop = asyncio.create_task(keeper.run(None))
    for _ in range(200):
        await asyncio.sleep(0.01)
        if keeper.writes.tasks:
            break
    a0 = Pod.parse(gated("a-0", "a", "1"))
    assert keeper.releases.sending(a0)
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop
    assert keeper.writes.tasks == [] and not keeper.releases.sending(a0)


def test_a_retry_wakes_the_loop_to_wait_for_its_deadline() -> None:
    """A write task asks for a retry while the loop sleeps on a timeout computed before: the loop is woken."""
    keeper, _ = keeper_over([node("n1", "za"), topology(5)], {})
    keeper.wake.clear()
    keeper._retry(Pod.parse(gated("a-0", "a", "1")))
    assert keeper.wake.is_set() and keeper.deadlines == {"a": NOW + gates.RETRY_SECONDS}


def test_the_appgroups_by_name_follow_every_change_of_the_cache() -> None:
    # grouped once per change of the AppGroups, not per pass: a new AppGroup, one deleted and one changed are
    # each seen by the next call, and a call with no change in between returns what it grouped before
    keeper, cache = keeper_over([], {})
    first = keeper.appgroups_by_name()
    assert sorted(first) == ["a", "b"] and keeper.appgroups_by_name() is first
    cache.apply(APPGROUP_SPECS, "ADDED", single("c"))
    assert sorted(keeper.appgroups_by_name()) == ["a", "b", "c"]
    cache.apply(APPGROUP_SPECS, "DELETED", single("a"))
    assert sorted(keeper.appgroups_by_name()) == ["b", "c"]
    changed = single("b")
    changed["metadata"]["annotations"][keys.ORDERED_SCHEDULING] = "plan-ungated"
    cache.apply(APPGROUP_SPECS, "MODIFIED", changed)
    (group,) = keeper.appgroups_by_name()["b"]
    assert group.metadata.annotations == {keys.ORDERED_SCHEDULING: "plan-ungated"}


async def test_the_events_of_a_passs_plans_are_posted_at_once_after_its_releases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """a and b planned in one pass: their Planned Events are in flight together (the API answers none until told),
    and only once both releases are sent. Posted one after the other, the second waited for the first's answer:
    under a burst, a pass of 30 plans took half a minute to post them, and the next passes, waiting for its writes,
    planned nothing meanwhile."""
    objects = [node("n1", "za"), node("n2", "zb"), topology(5), gated("a-0", "a", "1"), gated("b-0", "b", "1")]
    keeper, _ = keeper_over(objects, {"a-0": NOW - 2.0, "b-0": NOW - 1.0})
    sent: list[str] = []
    posting: list[tuple[str, int]] = []  # (AppGroup, releases sent when its Event began)
    answer = asyncio.Event()

    async def record(self: Releases, api: Any, writing: asyncio.Semaphore, item: Any) -> None:
        sent.append(item.pod.name)

    async def slow(api: Any, group: Any, plan: Any) -> None:
        posting.append((group.metadata.name, len(sent)))
        await answer.wait()

    monkeypatch.setattr(Releases, "send", record)
    monkeypatch.setattr(keeper.announcer, "announce", slow)
    names, keeper.marked = keeper.marked, set()
    await keeper._pass(None, asyncio.Semaphore(32), {"a", "b"} | names)
    for _ in range(20):
        await asyncio.sleep(0)
    assert sorted(posting) == [("a", 2), ("b", 2)]  # both in flight, each after both releases
    answer.set()
    await asyncio.wait_for(asyncio.gather(*keeper.writes.tasks), 5)


async def test_a_pass_opens_its_view_of_the_cluster_only_for_a_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening a pass's view counts every pod released by a plan and not bound yet on its planned node (and takes
    them off again at its end): a pass that plans nothing must not pay it. a-0 arrived now, within its window: the
    pass decides nothing is due and opens no view; once the window has passed, the pass plans a and opens one."""
    opened: list[gates.Provisional] = []

    class Counted(gates.Provisional):
        def __init__(self, live: Any) -> None:
            super().__init__(live)
            opened.append(self)

    monkeypatch.setattr(gates, "Provisional", Counted)
    objects = [node("n1", "za"), topology(5), gated("a-0", "a", "1")]
    keeper, _ = keeper_over(objects, {"a-0": NOW})  # the window (1 s) not passed
    keeper.marked = {"a"}
    assert await one_pass(keeper, monkeypatch) == {} and opened == []
    keeper, _ = keeper_over(objects, {"a-0": NOW - 5.0})
    keeper.marked = {"a"}
    assert await one_pass(keeper, monkeypatch) == {"a-0": "n1"} and len(opened) == 1
