"""Listeners on an event loop: every change delivered, in order, with one wake of the loop per wait."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from operators.sources.kinds import PODS
from operators.sources.store import Change, ClusterStore


def pod(name: str, node: str = "") -> dict[str, Any]:
    return {"metadata": {"namespace": "team", "name": name, "uid": name}, "spec": {"nodeName": node}, "status": {}}


def names(batches: list[list[Change]]) -> list[str]:
    return [change.new.name for batch in batches for change in batch]


def test_changes_published_while_the_loop_is_busy_arrive_in_one_batch_in_order() -> None:
    store = ClusterStore((PODS,))
    batches: list[list[Change]] = []
    loop = asyncio.new_event_loop()
    busy, subscribed = threading.Event(), threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        store.subscribe(batches.append, loop)
        subscribed.set()
        loop.call_soon(busy.wait)  # the loop is held while the store publishes
        loop.run_forever()

    thread = threading.Thread(target=run)
    thread.start()
    subscribed.wait(5)
    wakes = 0
    real_call = loop.call_soon_threadsafe

    def counted(*args: Any) -> Any:
        nonlocal wakes
        wakes += 1
        return real_call(*args)

    loop.call_soon_threadsafe = counted  # type: ignore[method-assign]
    for number in range(50):
        store.apply(PODS, "ADDED", pod(f"p{number}"))
    busy.set()
    done = threading.Event()
    real_call(done.set)
    done.wait(5)
    real_call(loop.stop)
    thread.join(5)
    loop.close()
    assert names(batches) == [f"p{number}" for number in range(50)]
    assert len(batches) == 1  # 50 publishes, one delivery
    assert wakes == 1


async def test_a_listener_on_the_publishing_loop_gets_each_wait_s_changes_on_its_next_turn() -> None:
    store = ClusterStore((PODS,))
    batches: list[list[Change]] = []
    store.subscribe(batches.append, asyncio.get_running_loop())
    store.apply(PODS, "ADDED", pod("a"))
    store.apply(PODS, "MODIFIED", pod("a", "node-1"))
    assert batches == []  # never called from inside the publisher
    await asyncio.sleep(0)
    assert [(c.old is None, c.new.node_name) for c in batches[0]] == [(True, ""), (False, "node-1")]
    store.apply(PODS, "ADDED", pod("b"))
    await asyncio.sleep(0)
    assert names(batches) == ["a", "a", "b"] and len(batches) == 2


def test_a_closed_loop_s_listener_keeps_nothing() -> None:
    store = ClusterStore((PODS,))
    loop = asyncio.new_event_loop()
    batches: list[list[Change]] = []
    store.subscribe(batches.append, loop)
    loop.close()
    for number in range(3):
        store.apply(PODS, "ADDED", pod(f"p{number}"))  # no error: its component stopped
    mailbox = store._listeners[0]
    assert batches == [] and mailbox._pending == []  # type: ignore[union-attr]


async def test_a_listener_never_hears_of_a_change_before_the_listeners_subscribed_before_it() -> None:
    """The operator's kept index subscribes before its gate keeper: a pod the keeper hears is bound must already be
    counted on its node by the index (else a plan made in between sees the node empty and fills it twice)."""
    store = ClusterStore((PODS,))
    loop = asyncio.get_running_loop()
    first_heard: list[str] = []
    heard_too_early: list[str] = []

    def first(batch: list[Change]) -> None:
        first_heard.extend(change.new.name for change in batch)
        if first_heard == ["a"]:  # the watch's next event, published while this delivery runs
            store.apply(PODS, "ADDED", pod("b"))

    def second(batch: list[Change]) -> None:
        heard_too_early.extend(change.new.name for change in batch if change.new.name not in first_heard)

    store.subscribe(first, loop)
    store.subscribe(second, loop)
    store.apply(PODS, "ADDED", pod("a"))
    for _ in range(5):
        await asyncio.sleep(0)
    assert first_heard == ["a", "b"]
    assert heard_too_early == []


async def test_a_listener_subscribed_later_gets_only_the_batches_published_after_it() -> None:
    store = ClusterStore((PODS,))
    loop = asyncio.get_running_loop()
    early: list[list[Change]] = []
    late: list[list[Change]] = []
    store.subscribe(early.append, loop)
    store.apply(PODS, "ADDED", pod("a"))  # waits for the loop: it is in what the later listener is handed below
    held = store.subscribe(late.append, loop)
    store.apply(PODS, "ADDED", pod("b"))
    await asyncio.sleep(0)
    assert [change.new.name for change in held] == ["a"]
    assert names(early) == ["a", "b"]
    assert names(late) == ["b"]
