"""`netaware run` serves controller-runtime-style metrics; the reconcile counters move as the cluster does."""

from __future__ import annotations

import asyncio
import re
import signal
import sys

import aiohttp
import pytest

from operators.emulator import ApiEmulator
from tests.integration.conftest import Api
from tests.integration.test_kopf_operator import AG, documents, eventually, labelled_pod, status_of

pytestmark = pytest.mark.integration

SUCCESS = re.compile(r'^controller_runtime_reconcile_total\{controller="appgroup",result="success"\} ([\d.]+)$', re.M)


async def scrape(session: aiohttp.ClientSession, port: int) -> str:
    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
        assert response.status == 200
        return await response.text()


def reconciles(text: str) -> float:
    found = SUCCESS.search(text)
    return float(found.group(1)) if found else 0.0


async def test_reconcile_counters_increase(api: Api, emulator: ApiEmulator, unused_tcp_port: int) -> None:
    await emulator.seed(documents("cluster.yaml") + documents("pods.yaml"))
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "operators.cli",
        "run",
        "--no-leader-elect",
        "--components",
        "appgroup,nodeslo",
        "--server",
        emulator.base_url,
        "--health-address",
        "127.0.0.1",
        "--health-port",
        str(unused_tcp_port),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with aiohttp.ClientSession() as session:
            for _ in range(200):
                try:
                    async with session.get(f"http://127.0.0.1:{unused_tcp_port}/readyz") as response:
                        if response.status == 200:
                            break
                except aiohttp.ClientError:
                    pass
                await asyncio.sleep(0.1)
            before = reconciles(await scrape(session, unused_tcp_port))
            await api.call("POST", AG, documents("appgroup-a1.yaml")[0])
            await eventually(lambda: status_of(emulator).get("topologyOrder"), within=20)
            created = reconciles(await scrape(session, unused_tcp_port))
            assert created > before
            await api.call("POST", "/api/v1/namespaces/default/pods", labelled_pod("p1-x", "p1", "n-3"))
            await eventually(
                lambda: any(
                    pod["name"] == "p1-x" for w in status_of(emulator).get("placements") or [] for pod in w["pods"]
                ),
                within=20,
            )
            text = await scrape(session, unused_tcp_port)
            assert reconciles(text) > created
            assert 'controller_runtime_reconcile_total{controller="nodeslo",result="success"}' in text
            assert "controller_runtime_reconcile_time_seconds_bucket" in text
            assert 'workqueue_depth{name="appgroup"} 0.0' in text
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), timeout=20)
    assert process.returncode == 0
