"""`netaware run` behind a proxy that breaks connections the way networks do (:mod:`operators.emulator.transport`):
a status PATCH whose answer is lost, a status PATCH that never arrives, a release PATCH whose answer is lost, and
AppGroups deleted while their status writes wait for a write slot. Afterwards every status is current, every pod is
released, no task was restarted (these are failures the loops expect), ``/healthz`` stayed 200 throughout, and
SIGTERM ends the process within seconds (it exits 0 and hands its Lease back)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import pathlib
import signal
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import yaml

from operators import kube
from operators.emulator import ApiEmulator
from operators.emulator.transport import FaultyProxy
from tests.integration.conftest import Api, start_run
from tests.support.emulated import AG, RESOURCE, binder, documents, eventually, holder, proxied, status_of

pytestmark = pytest.mark.integration

PODS = "/api/v1/namespaces/default/pods"
GATE = "netaware.io/topology-order"
MERGE = "application/merge-patch+json"


def gated_pod(name: str, selector: str) -> dict[str, Any]:
    labels = {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": selector}
    spec = {"containers": [{"name": "c", "image": "x"}], "schedulingGates": [{"name": GATE}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}


def appgroup(name: str) -> dict[str, Any]:
    group = copy.deepcopy(documents("appgroup-a1.yaml")[0])
    group["metadata"]["name"] = name
    return group


class Health:
    """/healthz polled every 0.1 s while inside: every answer seen."""

    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.seen: list[int] = []

    async def poll(self, stop: asyncio.Event) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while not stop.is_set():
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with session.get(f"{self.url}/healthz") as response:
                        self.seen.append(response.status)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.1)

    async def metrics(self) -> str:
        async with aiohttp.ClientSession() as session, session.get(f"{self.url}/metrics") as response:
            return await response.text()


def generation_written(emulator: ApiEmulator, name: str) -> bool:
    obj = emulator.get_object(RESOURCE, "default", name) or {}
    return bool(obj) and (obj.get("status") or {}).get("observedGeneration") == obj["metadata"]["generation"]


async def bump(api: Api, name: str, algorithm: str) -> None:
    status, _ = await api.call("PATCH", f"{AG}/{name}", {"spec": {"topologySortingAlgorithm": algorithm}}, MERGE)
    assert status == 200


@dataclasses.dataclass
class Operator:
    proxy: FaultyProxy
    log: pathlib.Path
    health: Health


@pytest.fixture
async def operator(
    api: Api, emulator: ApiEmulator, tmp_path: pathlib.Path, unused_tcp_port: int
) -> AsyncIterator[Operator]:
    """`netaware run` (the AppGroup controller) reaching the emulator through the proxy, with an AppGroup a1 whose
    status is written. On leaving: /healthz answered 200 throughout, no task was restarted, no traceback was logged,
    and SIGTERM ended the process within 5 s, exit code 0, its Lease handed back."""
    await emulator.seed(documents("cluster.yaml"))
    log = tmp_path / "run.log"
    async with proxied(emulator) as proxy:
        process = await start_run(
            emulator, "--components", "appgroup", "--health-address", "127.0.0.1", "--health-port",
            str(unused_tcp_port), "--leader-election-identity", "only", "--appgroup-status-interval", "0.2",
            output=log.open("w"), server=proxy.url,
        )  # fmt: skip
        health, stop = Health(unused_tcp_port), asyncio.Event()
        polling = asyncio.create_task(health.poll(stop))
        try:
            await eventually(lambda: "running appgroup" in log.read_text(), within=20)
            a1 = appgroup("a1")
            a1["metadata"]["annotations"] = {"netaware.io/ordered-scheduling": "true"}
            assert (await api.call("POST", AG, a1))[0] == 201
            await eventually(lambda: generation_written(emulator, "a1"), within=10)
            yield Operator(proxy, log, health)
            metrics = await health.metrics()
            restarts = [line for line in metrics.splitlines() if line.startswith("netaware_task_restarts_total{")]
            assert restarts and all(line.endswith(" 0.0") for line in restarts), restarts  # no loop had to restart
        finally:
            stop.set()
            await polling
            stopping = asyncio.get_running_loop().time()
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout=30)
            except TimeoutError:  # a process SIGTERM does not end is killed: a failed test leaves nothing behind
                process.kill()
                await process.wait()
                raise
            stopped_after = asyncio.get_running_loop().time() - stopping
    text = log.read_text()
    assert process.returncode == 0, text
    assert stopped_after < 5, (stopped_after, text)
    assert holder(emulator) == "", text  # the Lease handed back
    assert health.seen and set(health.seen) == {200}, health.seen
    assert "Traceback" not in text, text


async def test_a_status_write_whose_answer_is_lost_or_that_never_arrives_is_written_and_the_writer_goes_on(
    api: Api, emulator: ApiEmulator, operator: Operator
) -> None:
    proxy = operator.proxy
    proxy.reset_next(method="PATCH", path="/appgroups/a1/status", when="response")  # applied, answer lost
    await bump(api, "a1", "ReverseKahn")
    await eventually(lambda: proxy.applied["reset_response"] == 1 and generation_written(emulator, "a1"))
    proxy.reset_next(method="PATCH", path="/appgroups/a1/status", when="request")  # never reaches the server
    await bump(api, "a1", "TarjanSort")
    await eventually(lambda: proxy.applied["reset_request"] == 1 and generation_written(emulator, "a1"))
    await bump(api, "a1", "KahnSort")
    await eventually(lambda: generation_written(emulator, "a1"))


async def test_a_release_whose_answer_is_lost_is_not_sent_twice_and_the_gate_keeper_goes_on(
    api: Api, emulator: ApiEmulator, operator: Operator
) -> None:
    proxy = operator.proxy
    proxy.reset_next(method="PATCH", path=f"{PODS}/p3-", when="response")
    for name, selector in (("p3-0", "p3"), ("p2-0", "p2"), ("p1-0", "p1")):
        assert (await api.call("POST", PODS, gated_pod(name, selector)))[0] == 201

    def released(count: int) -> bool:
        pods = emulator.list_objects("v1/pods", "default")
        return len(pods) == count and not any(pod["spec"].get("schedulingGates") for pod in pods)

    async with binder(api, emulator):  # dependencies first: p3, then p2 once p3 is bound, then p1
        await eventually(lambda: released(3), within=15)
        assert proxy.applied["reset_response"] == 1
        assert (await api.call("POST", PODS, gated_pod("p3-1", "p3")))[0] == 201  # a later pod: released too
        await eventually(lambda: released(4), within=10)
    lines = [line for line in operator.log.read_text().splitlines() if "p3-0" in line]
    assert any("release not confirmed" in line for line in lines), lines
    assert not any("p3-0 released" in line for line in lines), lines  # the second attempt found it released


async def test_appgroups_deleted_while_their_writes_wait_for_a_slot_end_nothing(
    api: Api, emulator: ApiEmulator, operator: Operator
) -> None:
    names = [f"g{i}" for i in range(12)]
    for name in names:
        assert (await api.call("POST", AG, appgroup(name)))[0] == 201
    await eventually(lambda: all(generation_written(emulator, name) for name in names), within=15)
    # a1's write stalls the writer's pass while the twelve are changed, so that the next pass takes all twelve: four
    # of them stall in the four write slots, the other eight wait for one, and all twelve are deleted meanwhile
    operator.proxy.stall_next(1.5, times=5, method="PATCH", path="/status")
    await bump(api, "a1", "AlternateKahn")
    await eventually(lambda: operator.proxy.applied["stall"] == 1, within=5)
    for name in names:
        await bump(api, name, "AlternateKahn")
    await eventually(lambda: operator.proxy.applied["stall"] == 5, within=5)
    for name in names:
        assert (await api.call("DELETE", f"{AG}/{name}"))[0] == 200
    await bump(api, "a1", "KahnSort")  # the writer is alive: a later change is written, and a new AppGroup too
    assert (await api.call("POST", AG, appgroup("after")))[0] == 201
    await eventually(lambda: generation_written(emulator, "a1") and generation_written(emulator, "after"))
    await eventually(lambda: status_of(emulator, "after").get("topologyOrder"))


async def test_every_request_of_the_api_clients_has_a_timeout(
    emulator: ApiEmulator, monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    """An answer that never comes ends in a TimeoutError (kubernetes-asyncio's own default is to wait forever),
    for the clients every component makes: of a URL, and of a kubeconfig."""
    monkeypatch.setattr(kube, "REQUEST_TIMEOUT", aiohttp.ClientTimeout(total=0.5))
    async with proxied(emulator) as proxy:
        config = tmp_path / "kubeconfig"
        config.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": proxy.url}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
        }))  # fmt: skip
        for factory in (kube.api_client_factory(proxy.url), kube.api_client_factory(None, str(config))):
            api = await factory()
            try:
                proxy.stall_next(5.0, path="/api/v1/nodes")
                started = asyncio.get_running_loop().time()
                with pytest.raises(TimeoutError):
                    await kube.read_json(api, "/api/v1/nodes")
                assert asyncio.get_running_loop().time() - started < 2
                assert await kube.read_json(api, "/api/v1/namespaces/default") is not None  # the next one works
            finally:
                await api.close()
