"""An API outage longer than kopf's retries must not leave a zombie: the leader reports it on /healthz,
releases its Lease and exits non-zero; the follower takes over and reconciles what arrives after."""

from __future__ import annotations

import asyncio
import pathlib

import aiohttp
import pytest

from operators.emulator import ApiEmulator
from tests.integration.conftest import Api, start_run, stop_replicas
from tests.support.emulated import AG, documents, eventually, holder, status_of

pytestmark = pytest.mark.integration

BACKOFFS = "0.2,0.2,0.2"  # kopf's API retries, shortened so that a 6-second outage outlasts them


async def replica(emulator: ApiEmulator, name: str, port: int, log: pathlib.Path) -> asyncio.subprocess.Process:
    return await start_run(
        emulator,
        "--components",
        "appgroup",
        "--health-address",
        "127.0.0.1",
        "--health-port",
        str(port),
        "--leader-election-identity",
        name,
        "--lease-duration",
        "4",
        "--renew-deadline",
        "3",
        "--retry-period",
        "1",
        "--api-error-backoffs",
        BACKOFFS,
        output=log.open("w"),
    )


async def healthz(session: aiohttp.ClientSession, port: int) -> tuple[int, str]:
    try:
        async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
            return response.status, await response.text()
    except aiohttp.ClientError:
        return 0, "down"


async def test_outage_longer_than_the_retries_hands_over_instead_of_a_zombie(
    api: Api, emulator: ApiEmulator, tmp_path: pathlib.Path, unused_tcp_port_factory: object
) -> None:
    port_a, port_b = unused_tcp_port_factory(), unused_tcp_port_factory()  # type: ignore[operator]
    await emulator.seed(documents("cluster.yaml") + documents("pods.yaml"))
    first = await replica(emulator, "replica-a", port_a, tmp_path / "a.log")
    await eventually(lambda: holder(emulator) == "replica-a", within=20)
    await eventually(lambda: "running appgroup" in (tmp_path / "a.log").read_text(), within=20)
    second = await replica(emulator, "replica-b", port_b, tmp_path / "b.log")
    try:
        # The outage spares the Lease: exactly the case where a zombie would keep renewing it.
        await emulator.outage(6, code=503, spare=("leases",))
        seen: list[tuple[int, str]] = []
        async with aiohttp.ClientSession() as session:
            for _ in range(300):  # until the leader exits; record what its /healthz said meanwhile
                seen.append(await healthz(session, port_a))
                if first.returncode is not None:
                    break
                await asyncio.sleep(0.1)
        await asyncio.wait_for(first.wait(), timeout=30)
        log_a = (tmp_path / "a.log").read_text()
        assert first.returncode == 1, log_a
        assert "error: component controllers" in log_a
        assert any(code == 500 and "component controllers" in text for code, text in seen), seen[-5:]

        await eventually(lambda: holder(emulator) == "replica-b", within=20)
        await eventually(lambda: "running appgroup" in (tmp_path / "b.log").read_text(), within=30)
        status, _ = await api.call("POST", AG, documents("appgroup-a1.yaml")[0])
        assert status == 201
        await eventually(lambda: status_of(emulator).get("observedGeneration") == 1, within=30)
    finally:
        await stop_replicas(first, second)
    assert second.returncode == 0
