"""`netaware run` serves controller-runtime-style metrics; the reconcile counters move as the cluster does."""

from __future__ import annotations

import asyncio
import re
import signal
from typing import Any

import aiohttp
import pytest

from operators.emulator import ApiEmulator
from operators.runtime import RunOptions, kopf_operator
from tests.integration.conftest import Api, start_run
from tests.support.emulated import AG, documents, eventually, labelled_pod, status_of

pytestmark = pytest.mark.integration

SUCCESS = re.compile(r'^controller_runtime_reconcile_total\{controller="appgroup",result="success"\} ([\d.]+)$', re.M)


async def scrape(session: aiohttp.ClientSession, port: int) -> str:
    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
        assert response.status == 200
        return await response.text()


async def rises_above(value: float, session: aiohttp.ClientSession, port: int) -> float:
    """The appgroup success counter once it exceeds ``value`` (it moves just after the status write lands)."""
    for _ in range(100):
        current = reconciles(await scrape(session, port))
        if current > value:
            return current
        await asyncio.sleep(0.1)
    raise AssertionError(f"controller_runtime_reconcile_total stayed at {value}")


def reconciles(text: str) -> float:
    found = SUCCESS.search(text)
    return float(found.group(1)) if found else 0.0


async def test_reconcile_counters_increase(api: Api, emulator: ApiEmulator, unused_tcp_port: int) -> None:
    await emulator.seed(documents("cluster.yaml") + documents("pods.yaml"))
    process = await start_run(
        emulator,
        "--no-leader-elect",
        "--components",
        "appgroup,nodeslo",
        "--health-address",
        "127.0.0.1",
        "--health-port",
        str(unused_tcp_port),
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
            created = await rises_above(before, session, unused_tcp_port)
            await api.call("POST", "/api/v1/namespaces/default/pods", labelled_pod("p1-x", "p1", "n-3"))
            await eventually(
                lambda: any(
                    pod["name"] == "p1-x" for w in status_of(emulator).get("placements") or [] for pod in w["pods"]
                ),
                within=20,
            )
            await rises_above(created, session, unused_tcp_port)
            text = await scrape(session, unused_tcp_port)
            assert 'controller_runtime_reconcile_total{controller="nodeslo",result="success"}' in text
            assert "controller_runtime_reconcile_time_seconds_bucket" in text
            for _ in range(100):  # reconciles of our own status writes' events drain; the queue empties
                if 'workqueue_depth{name="appgroup"} 0.0' in await scrape(session, unused_tcp_port):
                    break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError("workqueue_depth of appgroup never went back to 0")
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), timeout=20)
    assert process.returncode == 0


async def test_namespace_scoping(api: Api, emulator: ApiEmulator) -> None:
    """`run --namespace team-a`: AppGroups elsewhere are left alone; cluster-scoped nodes are still followed."""
    await emulator.seed(documents("cluster.yaml"))
    for namespace in ("team-a", "team-b"):
        await api.call("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
        group = documents("appgroup-a1.yaml")[0]
        group["metadata"]["namespace"] = namespace
        await api.call("POST", f"/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/{namespace}/appgroups", group)
    options = RunOptions(("appgroup", "nodeslo"), server=emulator.base_url, namespaces=("team-a",))
    async with kopf_operator(options.components, options, asyncio.Event()):
        await eventually(lambda: status_in(emulator, "team-a").get("topologyOrder"), within=20)
        await eventually(lambda: emulator.get_object("slo.koordinator.sh/v1alpha1/nodeslos", None, "n-1"), within=20)
        await asyncio.sleep(1)
        assert status_in(emulator, "team-b") == {}


def status_in(emulator: ApiEmulator, namespace: str) -> dict[str, Any]:
    obj = emulator.get_object("appgroup.diktyo.x-k8s.io/v1alpha1/appgroups", namespace, "a1") or {}
    return dict(obj.get("status") or {})
