"""The live rebalancer against the emulator: the descheduler's cycle writes an AppGroup's layout before it evicts,
evicts through pods/eviction, posts an Event per move and counts it; the next cycle waits for the move to land;
a dry run writes and evicts nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from prometheus_client import generate_latest

from operators.api import keys
from operators.api.config.descheduler import DeschedulerPolicy, parse_policy
from operators.emulator import ApiEmulator
from tests.integration.conftest import Api
from tests.support.emulated import running_descheduler
from tests.support.rebalancing import CONFIG, NS, appgroup, node, pod, topology

pytestmark = pytest.mark.integration

AG = f"/apis/{keys.APPGROUP_GROUP}/{keys.V1ALPHA1}/namespaces/{NS}/appgroups/app"


def cluster() -> list[dict[str, Any]]:
    """front -> back, one pod each, front on a1 (zone za), back on b1 (zone zb): the pair costs 10; on one node
    it costs 0. b1 cannot take front (no cpu left), so the move is back-0 from b1 to a1."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
    full = node("b1", "zb", cpu="100m")
    return [namespace, node("a1", "za"), full, topology(["za", "zb"]),
            appgroup("app", {"front": ["back"], "back": []}),
            pod("front-0", "a1", "front", "app"), pod("back-0", "b1", "back", "app")]  # fmt: skip


def policy(dry_run: bool = False) -> DeschedulerPolicy:
    return parse_policy({
        "kind": "DeschedulerConfiguration",
        "dryRun": dry_run,
        "profiles": [{"name": "p", "pluginConfig": [
            {"name": "LowNodeLoad", "args": {"lowThresholds": {"cpu": 0}, "highThresholds": {"cpu": 100}}},
            {"name": "NetworkRebalance", "args": {"weights": {"bandwidthBalance": 0}}},
        ]}],
    })  # fmt: skip


def descheduler(emulator: ApiEmulator, chosen: DeschedulerPolicy) -> Any:
    return running_descheduler(emulator, chosen, 2, CONFIG)


async def names(api: Api) -> set[str]:
    _, listing = await api.call("GET", f"/api/v1/namespaces/{NS}/pods")
    return {item["metadata"]["name"] for item in listing["items"]}


async def test_a_move_writes_the_layout_then_evicts_and_the_next_cycle_waits(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(cluster())
    async with descheduler(emulator, policy()) as running:
        await running.cycle()
        moved = running.rebalanced
        assert moved is not None
        assert [(m.pod.name, m.source, m.target, m.cost) for m in moved.moves] == [("back-0", "b1", "a1", (10, 0))]
        assert await names(api) == {"front-0"}
        _, group = await api.call("GET", AG)
        written = json.loads(group["metadata"]["annotations"][keys.REBALANCE])
        assert written["layout"] == {"back": {"a1": 1}, "front": {"a1": 1}}
        assert [(m["pod"], m["from"], m["to"], m["cost"]) for m in written["moves"]] == [
            (f"{NS}/back-0", "b1", "a1", {"before": 10, "after": 0})
        ]
        _, events = await api.call("GET", f"/api/v1/namespaces/{NS}/events")
        [event] = events["items"]
        assert (event["involvedObject"]["name"], event["reason"]) == ("back-0", "Rebalanced")
        assert "from b1 to a1 for AppGroup shop/app: edge cost 10 -> 0" in event["message"]
        metrics = generate_latest(running.metrics.registry).decode()
        assert 'netaware_rebalance_moves_total{result="applied"} 1.0' in metrics
        assert 'netaware_rebalance_appgroup_cost{appgroup="shop/app",when="before"} 10.0' in metrics
        assert 'netaware_rebalance_appgroup_cost{appgroup="shop/app",when="after"} 0.0' in metrics
        # the replacement has not come: the move is in flight, the next cycle moves nothing
        await running.cycle()
        assert running.rebalanced is not None and running.rebalanced.moves == []
        assert "in flight" in running.rebalanced.note


async def test_a_dry_run_writes_and_evicts_nothing(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(cluster())
    async with descheduler(emulator, policy(dry_run=True)) as running:
        await running.cycle()
        assert running.rebalanced is not None and len(running.rebalanced.moves) == 1
        await running.cycle()  # nothing recorded: the same move proposed again
        assert running.rebalanced is not None and len(running.rebalanced.moves) == 1
        metrics = generate_latest(running.metrics.registry).decode()
    assert await names(api) == {"front-0", "back-0"}
    _, group = await api.call("GET", AG)
    assert keys.REBALANCE not in (group["metadata"].get("annotations") or {})
    assert 'netaware_rebalance_moves_total{result="applied"}' not in metrics
    assert 'result="dry-run"} 2.0' in metrics


async def test_no_eviction_before_the_processs_cache_holds_the_layout(
    api: Api, emulator: ApiEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The release plans a replacement from the process's cache: an eviction made before that cache holds the
    # layout lets the replacement go anywhere. Here the cache is made to lag three looks behind the write: the
    # eviction comes after the fourth look (none without the wait), and a layout never seen evicts nothing.
    from operators.controllers import descheduler as module

    monkeypatch.setattr(module, "LAYOUT_SEEN_SECONDS", 0.3)
    await emulator.seed(cluster())
    async with descheduler(emulator, policy()) as running:
        actual = running.layout_seen
        assert actual is not None
        looks: list[str | None] = []

        def lagging(namespace: str, name: str) -> str | None:
            looks.append(actual(namespace, name) if len(looks) >= 3 else None)
            return looks[-1]

        at_eviction: list[int] = []
        evict = running._evict

        async def recorded(*args: Any, **kwargs: Any) -> bool:
            at_eviction.append(len(looks))
            return bool(await evict(*args, **kwargs))

        running.layout_seen = lagging
        monkeypatch.setattr(running, "_evict", recorded)
        await running.cycle()
        assert at_eviction == [4] and looks[-1] is not None
        assert await names(api) == {"front-0"}

    await emulator.seed(cluster())  # back-0 again, and a cache that never holds the layout
    async with descheduler(emulator, policy()) as running:
        running.layout_seen = lambda namespace, name: None
        await running.cycle()
        assert running.rebalanced is not None and running.rebalanced.moves == []
        assert await names(api) == {"front-0", "back-0"}
        metrics = generate_latest(running.metrics.registry).decode()
        assert 'netaware_rebalance_moves_total{result="refused"} 1.0' in metrics
