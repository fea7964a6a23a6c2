"""The live sources watch instead of re-listing: kubernetes-asyncio sends ``?watch=True``, which the emulator
(like the API server) must read as a watch. Before, it answered a list and every client re-listed every
0.5 s while all tests passed."""

from __future__ import annotations

import asyncio

import pytest

from operators.emulator import ApiEmulator
from operators.sources.live import NODES, PODS, LiveSnapshot
from tests.integration.conftest import Api, following
from tests.integration.test_kopf_operator import documents, eventually, labelled_pod

pytestmark = pytest.mark.integration


async def test_changes_arrive_by_watch_with_one_list_per_kind(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(documents("cluster.yaml"))
    live = LiveSnapshot((NODES, PODS))
    async with following(emulator, live):
        await eventually(lambda: live.ready, within=5)
        assert len(live.snapshot().nodes) == 8
        for index in range(5):
            await api.call("POST", "/api/v1/namespaces/default/pods", labelled_pod(f"p1-{index}", "p1", "n-1"))
        await eventually(lambda: len(live.snapshot().pods) == 5, within=5)
        await api.call("DELETE", "/api/v1/nodes/n-8")
        await eventually(lambda: len(live.snapshot().nodes) == 7, within=5)
        await asyncio.sleep(1.5)  # a re-listing client would have listed three more times by now
        assert emulator.requests_of("list", "nodes") == 1
        assert emulator.requests_of("list", "pods") == 1
        assert emulator.requests_of("watch", "nodes") == 1 and emulator.requests_of("watch", "pods") == 1


async def test_a_kind_that_is_not_served_counts_as_none_without_a_list_loop(emulator: ApiEmulator) -> None:
    """A cluster without netaware's NodeMetric CRD (Koordinator not installed): the source is ready, the kind
    is empty, and it is asked for again every 30 s, not every 0.5 s."""
    from operators.sources.live import Followed, _custom

    missing = Followed("widgets", "example.com/v1", "Widget", _custom, ("example.com", "v1", "widgets"))
    live = LiveSnapshot((NODES, missing))
    async with following(emulator, live):
        await eventually(lambda: live.ready, within=5)
        await asyncio.sleep(2)
        asked = sum(1 for request in emulator._requests if "/widgets" in str(request.url))
        assert asked == 1
