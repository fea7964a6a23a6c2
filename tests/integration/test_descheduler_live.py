"""The live descheduler against the emulator: evictions through pods/eviction, a PDB's 429, Events, metrics."""

from __future__ import annotations

import asyncio
import copy
import pathlib
import signal
from typing import Any

import aiohttp
import pytest
import yaml
from prometheus_client import generate_latest

from operators.api.config.descheduler import DEFAULT_POLICY, DeschedulerPolicy, parse_policy
from operators.controllers.descheduler import ABANDONED
from operators.emulator import ApiEmulator
from tests.integration.conftest import Api, start_run
from tests.support.emulated import eventually, proxied, running_descheduler
from tests.support.lownodeload import node, pod

pytestmark = pytest.mark.integration


def cluster() -> list[dict[str, Any]]:
    """hot: 3 `web` pods (priority 0, evicted first) under a PDB allowing one disruption, and 6 `api` pods:
    9 units, 87.9 % of 1Gi. Two evictions bring it to 68.4 %, below the 70 % high threshold."""
    objects = [node("hot"), node("cold-1"), node("cold-2")]
    objects += [pod(f"web-{k}", "hot", 1, labels={"app": "web"}) for k in range(3)]
    objects += [pod(f"api-{k}", "hot", 1, labels={"app": "api"}, spec={"priority": 100}) for k in range(6)]
    objects.append(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
        }
    )
    return objects


def policy(dry_run: bool = False) -> DeschedulerPolicy:
    document = copy.deepcopy(DEFAULT_POLICY)
    document["dryRun"] = dry_run
    document["profiles"][0]["pluginConfig"][0]["args"]["accountingMode"] = "combined"
    return parse_policy(document)


def descheduler(emulator: ApiEmulator, chosen: DeschedulerPolicy) -> Any:
    return running_descheduler(emulator, chosen, 9)


async def pod_names(api: Api) -> set[str]:
    _, listing = await api.call("GET", "/api/v1/namespaces/default/pods")
    return {item["metadata"]["name"] for item in listing["items"]}


async def test_a_spent_budget_skips_the_pod_and_the_cycle_goes_on(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(cluster())
    async with descheduler(emulator, policy()) as running:
        plan = await running.cycle()
        metrics = generate_latest(running.metrics.registry).decode()
    assert [e.pod.name for e in plan.evictions] == ["web-0", "api-0"]
    assert [e.pod.name for e in plan.refused] == ["web-1", "web-2"]
    remaining = await pod_names(api)
    assert "web-0" not in remaining and "api-0" not in remaining
    assert {"web-1", "web-2", "api-1"} <= remaining and len(remaining) == 7
    assert 'descheduler_pods_evicted_total{namespace="default",node="hot",result="success"} 2.0' in metrics
    assert 'descheduler_pods_evicted_total{namespace="default",node="hot",result="refused"} 2.0' in metrics
    hot = plan.usage["hot"]["netBandwidth"]  # the plan's own figure, published as the node's utilisation
    assert f'netaware_node_utilization_percent{{node="hot",resource="netBandwidth"}} {hot}' in metrics  # deprecated
    assert f'netaware_node_utilization_ratio{{node="hot",resource="netBandwidth"}} {hot / 100}' in metrics
    _, events = await api.call("GET", "/api/v1/namespaces/default/events")
    by_pod = {(e["involvedObject"]["name"], e["reason"], e["type"]) for e in events["items"]}
    assert by_pod == {
        ("web-0", "Descheduled", "Normal"),
        ("api-0", "Descheduled", "Normal"),
        ("web-1", "EvictionRefused", "Warning"),
        ("web-2", "EvictionRefused", "Warning"),
    }
    refused = next(e for e in events["items"] if e["involvedObject"]["name"] == "web-1")
    assert "disruption budget web needs 2 healthy pods" in refused["message"]


async def test_dry_run_evicts_nothing(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(cluster())
    async with descheduler(emulator, policy(dry_run=True)) as running:
        plan = await running.cycle()
        metrics = generate_latest(running.metrics.registry).decode()
    assert [e.pod.name for e in plan.evictions] == ["web-0", "web-1"]  # planned as if every eviction happened
    assert len(await pod_names(api)) == 9
    assert 'result="dry-run"} 2.0' in metrics
    _, events = await api.call("GET", "/api/v1/namespaces/default/events")
    assert events["items"] == []


async def test_netaware_run_with_the_descheduler(
    api: Api, emulator: ApiEmulator, tmp_path: pathlib.Path, unused_tcp_port: int
) -> None:
    """`netaware run --components descheduler` in its own process: evicts, serves the metric, stops on SIGTERM."""
    await emulator.seed(cluster())
    document = copy.deepcopy(DEFAULT_POLICY)
    document["profiles"][0]["pluginConfig"][0]["args"]["accountingMode"] = "combined"
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(document))
    process = await start_run(
        emulator,
        "--components",
        "descheduler",
        "--descheduler-policy",
        str(tmp_path / "policy.yaml"),
        "--health-address",
        "127.0.0.1",
        "--health-port",
        str(unused_tcp_port),
        output=asyncio.subprocess.PIPE,
    )
    try:

        async def evicted() -> bool:
            return len(await pod_names(api)) == 7

        for _ in range(200):
            if await evicted():
                break
            await asyncio.sleep(0.1)
        assert await evicted()
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{unused_tcp_port}/readyz") as response:
                assert response.status == 200
            async with session.get(f"http://127.0.0.1:{unused_tcp_port}/metrics") as response:
                text = await response.text()
        assert 'descheduler_pods_evicted_total{namespace="default",node="hot",result="success"} 2.0' in text
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = await asyncio.wait_for(process.communicate(), timeout=20)
    assert process.returncode == 0, output.decode()


async def test_leadership_is_checked_before_every_eviction(api: Api, emulator: ApiEmulator) -> None:
    """The plan wants four evictions; leadership is lost after the first: the other three are never sent,
    so an old leader cannot finish its plan while a new one starts its own."""
    await emulator.seed(cluster())
    asked: list[bool] = []

    def still_leader() -> bool:
        asked.append(True)
        return len(asked) == 1

    async with descheduler(emulator, policy()) as running:
        running.may_evict = still_leader
        plan = await running.cycle()
    assert plan.evictions == [] and "abandoned" in plan.note
    assert len(asked) == 2  # asked before the first eviction (yes) and before the second (no)
    evictions = [w for w in emulator.writes if w[2] == "pods" and w[1] == "DELETED"]
    assert [w[4] for w in evictions] == ["web-0"]
    assert len(await pod_names(api)) == 8


async def test_an_eviction_whose_answer_is_lost_ends_the_cycle_and_is_never_repeated(
    api: Api, emulator: ApiEmulator
) -> None:
    await emulator.seed(cluster())
    async with proxied(emulator) as proxy, running_descheduler(emulator, policy(), 9, server=proxy.url) as running:
        proxy.reset_next(method="POST", path="/eviction", when="response")  # web-0 evicted, the answer lost
        first = await running.cycle()
        assert first.note == ABANDONED and first.evictions == []
        assert "web-0" not in await pod_names(api)
        metrics = generate_latest(running.metrics.registry).decode()
        assert 'descheduler_pods_evicted_total{namespace="default",node="hot",result="error"} 1.0' in metrics
        await eventually(lambda: len(running.snapshot().pods) == 8, within=5)
        # 8 units left on hot: 78.1 % of 1Gi, above 70 %: web-1 and web-2 are refused (the PDB keeps 2 of the 2
        # web pods left), api-0 goes, 68.4 %
        second = await running.cycle()
    assert [e.pod.name for e in second.evictions] == ["api-0"]
    assert [e.pod.name for e in second.refused] == ["web-1", "web-2"]
    assert proxy.applied["reset_response"] == 1


async def test_the_series_of_a_deleted_node_go_at_the_next_cycle(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(cluster())
    async with running_descheduler(emulator, policy(dry_run=True), 9) as running:
        await running.cycle()
        before = generate_latest(running.metrics.registry).decode()
        assert 'node="cold-2"' in before
        assert (await api.call("DELETE", "/api/v1/nodes/cold-2"))[0] == 200
        await eventually(lambda: "cold-2" not in running.snapshot().node_by_name, within=5)
        await running.cycle()
        after = generate_latest(running.metrics.registry).decode()
    assert 'node="cold-2"' not in after
    assert 'netaware_node_utilization_percent{node="cold-1",resource="netBandwidth"}' in after
