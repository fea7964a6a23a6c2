"""The extender's live cluster cache (list + watch of five kinds) against the emulator."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib

import pytest
import yaml
from aiohttp.test_utils import TestClient, TestServer

from operators.api.config.scheduler import parse_config
from operators.emulator import ApiEmulator
from operators.extender.server import ExtenderState, build_app
from operators.kube import url_api_client
from operators.sources.cache import APPGROUPS, NETWORKTOPOLOGIES, NODES, NODESLOS, PODS, ClusterCache
from tests.integration.conftest import Api
from tests.integration.test_kopf_operator import documents, eventually, labelled_pod

pytestmark = pytest.mark.integration

ROOT = pathlib.Path(__file__).resolve().parents[2]


async def test_extender_follows_the_cluster(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(documents("cluster.yaml") + documents("networktopology.yaml") + documents("appgroup-a1.yaml"))
    live = ClusterCache((NODES, PODS, APPGROUPS, NETWORKTOPOLOGIES, NODESLOS))
    stop = asyncio.Event()
    client = await url_api_client(emulator.base_url)()
    follower = asyncio.create_task(live.follow(client, stop))
    config = parse_config(yaml.safe_load((ROOT / "hack" / "scheduler-config.yaml").read_text()))
    pod = yaml.safe_load((ROOT / "hack" / "pod-p1.yaml").read_text())
    names = [f"n-{i}" for i in range(1, 9)]
    try:
        await eventually(lambda: live.ready, within=5)
        async with TestClient(TestServer(build_app(ExtenderState(live.snapshot, config, lambda: live.ready)))) as http:
            assert (await http.get("/readyz")).status == 200
            answer = await (await http.post("/filter", json={"Pod": pod, "NodeNames": names})).json()
            assert answer["NodeNames"] == names  # no p2 placed yet: every node passes, scores equal

            # p2 lands on n-7 (us-east-1): the extender sees it and prefers n-7 for p1
            placed = labelled_pod("p2-a", "p2", "n-7")
            await api.call("POST", "/api/v1/namespaces/default/pods", placed)

            async def best() -> str:
                scores = await (await http.post("/prioritize", json={"Pod": pod, "NodeNames": names})).json()
                return str(max(scores, key=lambda entry: entry["Score"])["Host"])

            for _ in range(50):
                if await best() == "n-7":
                    break
                await asyncio.sleep(0.05)
            assert await best() == "n-7"
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        await client.close()
