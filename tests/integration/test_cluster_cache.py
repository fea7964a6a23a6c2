"""The cluster cache against the emulator: one list per kind, then watches; an update that changes nothing the
engine reads is no change; a dropped watch resumes from its last version (no list); only a 410 lists again,
and that list reports what happened meanwhile; bookmarks move the resume version. Watches must be watches:
kubernetes-asyncio once sent ``?watch=True``, the emulator answered with a list, and every client re-listed
every 0.5 s while all tests passed."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from operators.emulator import ApiEmulator
from operators.sources.cache import ClusterCache
from operators.sources.kinds import NODES, PODS, Kind
from tests.integration.conftest import Api, following
from tests.support.emulated import documents, eventually, labelled_pod, recorder

pytestmark = pytest.mark.integration

PODS_PATH = "/api/v1/namespaces/default/pods"
MERGE = "application/merge-patch+json"


async def test_changes_arrive_by_watch_with_one_list_per_kind(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(documents("cluster.yaml"))
    cache = ClusterCache((NODES, PODS))
    async with following(emulator, cache):
        await eventually(lambda: cache.ready, within=5)
        assert len(cache.snapshot().nodes) == 8
        for index in range(5):
            await api.call("POST", PODS_PATH, labelled_pod(f"p1-{index}", "p1", "n-1"))
        await eventually(lambda: len(cache.snapshot().pods) == 5, within=5)
        await api.call("DELETE", "/api/v1/nodes/n-8")
        await eventually(lambda: len(cache.snapshot().nodes) == 7, within=5)
        await asyncio.sleep(1.5)  # a re-listing client would have listed three more times by now
        assert emulator.requests_of("list", "nodes") == 1
        assert emulator.requests_of("list", "pods") == 1
        assert emulator.requests_of("watch", "nodes") == 1 and emulator.requests_of("watch", "pods") == 1


async def test_an_update_the_engine_does_not_read_is_no_change(api: Api, emulator: ApiEmulator) -> None:
    """A node's heartbeat (its conditions) leaves the trimmed node equal: no change, no new snapshot; a label is a
    change, and the snapshot's other kinds are the same objects (derived per kind)."""
    await emulator.seed(documents("cluster.yaml"))
    cache = ClusterCache((NODES, PODS))
    async with following(emulator, cache):
        await eventually(lambda: cache.ready, within=5)
        seen = recorder(cache)
        before = cache.snapshot()
        heartbeat = {"status": {"conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "now"}]}}
        await api.call("PATCH", "/api/v1/nodes/n-1/status", heartbeat, MERGE)
        await api.call("PATCH", "/api/v1/nodes/n-2", {"metadata": {"labels": {"team": "a"}}}, MERGE)
        await eventually(lambda: seen, within=5)
        await asyncio.sleep(0.3)
        assert seen == [("nodes", "changed", "n-2")]
        after = cache.snapshot()
        assert after is not before and after.node_by_name["n-2"].labels["team"] == "a"
        assert after.pods is before.pods  # pods did not change: their slot is not rebuilt


async def test_a_dropped_watch_resumes_without_listing(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(documents("cluster.yaml"))
    cache = ClusterCache((NODES, PODS))
    async with following(emulator, cache):
        await eventually(lambda: cache.ready, within=5)
        for round_ in range(3):
            # each drop ends the watch the last one's resume opened (a drop before it arrives would end nothing)
            await eventually(lambda n=round_ + 1: emulator.requests_of("watch", "pods") == n, within=5)  # type: ignore[misc]
            await emulator.drop_watches()
            await api.call("POST", PODS_PATH, labelled_pod(f"p-{round_}", "p1", "n-1"))
            await eventually(lambda n=round_ + 1: len(cache.snapshot().pods) == n, within=5)  # type: ignore[misc]
        assert emulator.requests_of("list", "pods") == 1 and emulator.requests_of("list", "nodes") == 1
        assert emulator.requests_of("watch", "pods") == 4


async def test_a_410_lists_again_once_and_reports_what_happened_meanwhile(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(documents("cluster.yaml"))
    cache = ClusterCache((NODES, PODS))
    async with following(emulator, cache):
        await eventually(lambda: cache.ready, within=5)
        await api.call("POST", PODS_PATH, labelled_pod("kept", "p1", "n-1"))
        await api.call("POST", PODS_PATH, labelled_pod("gone", "p1", "n-1"))
        await eventually(lambda: len(cache.snapshot().pods) == 2, within=5)
        seen = recorder(cache)
        # While the watches are down (the cache pauses before resuming), a pod goes and the history is compacted.
        await emulator.drop_watches()
        await api.call("DELETE", PODS_PATH + "/gone")
        emulator.compact()
        await eventually(lambda: [pod.name for pod in cache.snapshot().pods] == ["kept"], within=10)
        assert ("pods", "deleted", "gone") in seen
        await asyncio.sleep(1)
        # the first list, and one after the 410 (every kind's history was compacted), not one per event
        assert emulator.requests_of("list", "pods") == 2 and emulator.requests_of("list", "nodes") == 2


async def test_bookmarks_move_the_version_a_watch_resumes_from(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(documents("cluster.yaml"))
    cache = ClusterCache((PODS,), watch_seconds=1)
    async with following(emulator, cache):
        await eventually(lambda: cache.ready, within=5)
        _, node = await api.call("PATCH", "/api/v1/nodes/n-1", {"metadata": {"labels": {"x": "1"}}}, MERGE)
        written = int(node["metadata"]["resourceVersion"])
        await eventually(lambda: emulator.requests_of("watch", "pods") >= 3, within=5)
        versions = [int(str(request.params.get("resourceVersion"))) for request in _watches(emulator, "pods")]
        assert versions[-1] >= written > versions[0]  # the bookmark carried it past the node's write
        assert emulator.requests_of("list", "pods") == 1


def _watches(emulator: ApiEmulator, plural: str) -> list[Any]:
    return [
        request
        for request in emulator._requests
        if request.action is not None and request.action.value == "WATCH" and f"/{plural}" in str(request.url)
    ]


async def test_a_kind_that_is_not_served_counts_as_none_without_a_list_loop(emulator: ApiEmulator) -> None:
    """A cluster without netaware's NodeMetric CRD (Koordinator not installed): the cache is ready, the kind
    is empty, and it is asked for again every 30 s, not every 0.5 s."""
    missing = Kind("widgets", "/apis/example.com/v1/widgets", "example.com/v1", "Widget")
    cache = ClusterCache((NODES, missing))
    async with following(emulator, cache):
        await eventually(lambda: cache.ready, within=5)
        await asyncio.sleep(2)
        asked = sum(1 for request in emulator._requests if "/widgets" in str(request.url))
        assert asked == 1


async def test_a_list_is_read_page_by_page(emulator: ApiEmulator) -> None:
    await emulator.seed(documents("cluster.yaml"))
    cache = ClusterCache((NODES,), page_size=3)
    async with following(emulator, cache):
        await eventually(lambda: cache.ready, within=5)
        assert [node.name for node in cache.snapshot().nodes] == [f"n-{i}" for i in range(1, 9)]
        pages = [request for request in emulator._requests if str(request.url.path) == "/api/v1/nodes"]
        assert len([page for page in pages if page.params.get("watch") is None]) == 3  # 3 + 3 + 2 nodes
        assert cache.lists["nodes"] == 1
