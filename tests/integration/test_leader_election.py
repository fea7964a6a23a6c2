"""Two `netaware run` replicas against the emulator: only the Lease holder runs the controllers; when it
is killed the other takes over within the lease duration; a graceful stop hands the Lease over at once."""

from __future__ import annotations

import asyncio
import pathlib
import signal
import time

import aiohttp
import pytest

from hack.control_plane.ports import free_port
from operators.emulator import ApiEmulator
from tests.integration.conftest import Api, start_run, stop_replicas
from tests.support.emulated import AG, documents, eventually, holder, proxied, status_of

pytestmark = pytest.mark.integration

LEASE_SECONDS = 5
RETRY_SECONDS = 1.2


async def replica(
    emulator: ApiEmulator, name: str, log: pathlib.Path, health_port: int = 0
) -> asyncio.subprocess.Process:
    return await start_run(
        emulator,
        "--components",
        "appgroup",
        "--health-port",
        str(health_port),
        "--leader-election-identity",
        name,
        "--lease-duration",
        str(LEASE_SECONDS),
        "--renew-deadline",
        "3",
        "--retry-period",
        str(RETRY_SECONDS),
        output=log.open("w"),
    )


async def leader_gauge(port: int) -> float:
    """``leader_election_master_status`` of the replica whose health port is ``port``."""
    async with aiohttp.ClientSession() as http:
        for _ in range(50):  # the health port opens as the replica starts
            try:
                async with http.get(f"http://127.0.0.1:{port}/metrics") as answer:
                    text = await answer.text()
                    break
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.2)
        else:
            raise AssertionError(f"no metrics on port {port}")
    (line,) = [line for line in text.splitlines() if line.startswith("leader_election_master_status{")]
    assert line.startswith('leader_election_master_status{name="netaware"}'), line  # the Lease's name
    return float(line.rsplit(" ", 1)[1])


def status_writes(emulator: ApiEmulator) -> int:
    return sum(1 for w in emulator.writes if w[2] == "appgroups" and w[4] == "a1" and w[5] == "status")


async def test_only_the_leader_writes_and_a_follower_takes_over(
    api: Api, emulator: ApiEmulator, tmp_path: pathlib.Path
) -> None:
    await emulator.seed(documents("cluster.yaml") + documents("pods.yaml"))
    ports = free_port(), free_port()
    first = await replica(emulator, "replica-a", tmp_path / "a.log", ports[0])
    await eventually(lambda: holder(emulator) == "replica-a", within=20)
    second = await replica(emulator, "replica-b", tmp_path / "b.log", ports[1])
    try:
        await asyncio.sleep(2 * RETRY_SECONDS + 1)  # the follower has tried, and failed, to take the Lease
        assert holder(emulator) == "replica-a"
        # what the NetawareNoLeader alert reads: exactly one replica says 1
        assert [await leader_gauge(port) for port in ports] == [1.0, 0.0]
        await api.call("POST", AG, documents("appgroup-a1.yaml")[0])
        await eventually(lambda: status_of(emulator).get("topologyOrder"), within=20)
        await asyncio.sleep(1)
        writes_for_create = status_writes(emulator)
        assert "running appgroup" not in (tmp_path / "b.log").read_text()  # the follower runs nothing

        first.send_signal(signal.SIGKILL)  # dies without handing the Lease back
        await first.wait()
        killed = time.monotonic()
        await eventually(lambda: holder(emulator) == "replica-b", within=LEASE_SECONDS + 10)
        takeover = time.monotonic() - killed
        assert takeover <= LEASE_SECONDS + 4 * RETRY_SECONDS + 1, takeover  # the lease duration, plus retries

        await eventually(lambda: "running appgroup" in (tmp_path / "b.log").read_text(), within=20)
        assert await leader_gauge(ports[1]) == 1.0
        await asyncio.sleep(1)
        assert status_writes(emulator) == writes_for_create  # the new leader does not rewrite an unchanged status
        patch = {"spec": {"topologySortingAlgorithm": "TarjanSort"}}
        await api.call("PATCH", f"{AG}/a1", patch, content_type="application/merge-patch+json")
        await eventually(lambda: status_of(emulator).get("observedGeneration") == 2, within=20)
    finally:
        await stop_replicas(first, second)
    assert second.returncode == 0
    assert holder(emulator) == ""  # released on SIGTERM: a third replica would not wait for it to expire


async def test_the_leader_rides_out_refused_connections_shorter_than_its_renew_deadline(
    api: Api, emulator: ApiEmulator, tmp_path: pathlib.Path
) -> None:
    await emulator.seed(documents("cluster.yaml"))
    log = tmp_path / "leader.log"
    async with proxied(emulator) as proxy:
        leader = await start_run(
            emulator, "--components", "appgroup", "--health-port", "0", "--leader-election-identity", "only",
            "--lease-duration", str(LEASE_SECONDS), "--renew-deadline", "3", "--retry-period", str(RETRY_SECONDS),
            output=log.open("w"), server=proxy.url,
        )  # fmt: skip
        try:
            await eventually(lambda: "running appgroup" in log.read_text(), within=20)
            renewals = lease_renewals(emulator)
            await proxy.refuse(2.0)  # a renewal or two refused, well inside the 3 s renew deadline
            await asyncio.sleep(2.5)
            await eventually(lambda: lease_renewals(emulator) > renewals + 1, within=10)
            assert leader.returncode is None, log.read_text()
            assert holder(emulator) == "only"
            assert (await api.call("POST", AG, documents("appgroup-a1.yaml")[0]))[0] == 201
            await eventually(lambda: status_of(emulator).get("observedGeneration") == 1, within=10)
            assert "lost the lease" not in log.read_text()
        finally:
            await stop_replicas(leader)
    assert leader.returncode == 0, log.read_text()


def lease_renewals(emulator: ApiEmulator) -> int:
    return sum(1 for w in emulator.writes if w[2] == "leases")


async def test_a_follower_keeps_its_cache_synced_and_leads_from_it_without_listing_again(
    api: Api, emulator: ApiEmulator, tmp_path: pathlib.Path
) -> None:
    """Warm standby: the follower lists and watches while it waits (ready only once synced, so a rollout replaces
    the leader by a warm replica), and the components it starts on taking the Lease read that cache: no list of
    pods after the takeover, the first decision as soon as kopf is up."""
    await emulator.seed(documents("cluster.yaml") + documents("pods.yaml"))
    first = await replica(emulator, "replica-a", tmp_path / "a.log")
    await eventually(lambda: holder(emulator) == "replica-a", within=20)
    pod_lists = emulator.requests_of("list", "pods")
    follower_log = tmp_path / "b.log"
    second = await start_run(
        emulator, "--components", "appgroup", "--health-port", str(health := free_port()),
        "--leader-election-identity", "replica-b", "--lease-duration", str(LEASE_SECONDS), "--renew-deadline", "3",
        "--retry-period", str(RETRY_SECONDS), output=follower_log.open("w"),
    )  # fmt: skip
    try:
        await eventually(lambda: ready(health), within=20)  # synced, and still a follower
        assert holder(emulator) == "replica-a"
        listed_by_the_follower = emulator.requests_of("list", "pods") - pod_lists
        assert listed_by_the_follower == 1  # its own cache's list (AppGroup pods, one page)
        first.send_signal(signal.SIGKILL)
        await first.wait()
        await eventually(lambda: holder(emulator) == "replica-b", within=LEASE_SECONDS + 10)
        led = time.monotonic()
        await api.call("POST", AG, documents("appgroup-a1.yaml")[0])
        await eventually(lambda: status_of(emulator).get("runningWorkloads") is not None, within=20)
        first_decision = time.monotonic() - led
        assert emulator.requests_of("list", "pods") - pod_lists == listed_by_the_follower  # not listed again
        assert "leading from the cache kept as a follower (synced)" in follower_log.read_text()
        assert first_decision < 10, first_decision
    finally:
        await stop_replicas(first, second)
    assert second.returncode == 0


def ready(port: int) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError):
        return False
