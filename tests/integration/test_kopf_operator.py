"""The real kopf operator from operators.controllers, against the emulator over HTTP."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from operators.emulator import ApiEmulator
from tests.integration.conftest import Api
from tests.integration.kopf_harness import running_operator
from tests.support.emulated import AG, RESOURCE, documents, eventually, labelled_pod, status_of

pytestmark = pytest.mark.integration


async def test_operator_writes_appgroup_status_and_follows_spec_changes(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(documents("cluster.yaml") + documents("pods.yaml"))
    async with running_operator(emulator.base_url):
        status, _ = await api.call("POST", AG, documents("appgroup-a1.yaml")[0])
        assert status == 201
        first = await eventually(lambda: status_of(emulator).get("observedGeneration") == 1 and status_of(emulator))
        assert first["runningWorkloads"] == 2
        await api.call("PATCH", AG + "/a1", {"spec": {"numMembers": 4}}, "application/merge-patch+json")
        await eventually(lambda: status_of(emulator).get("observedGeneration") == 2)
    obj = emulator.get_object(RESOURCE, "default", "a1")
    assert obj is not None and obj["spec"]["numMembers"] == 4
    # kopf's bookkeeping lives under our own prefix, never kopf.zalando.org
    assert all(not key.startswith("kopf.zalando.org") for key in obj["metadata"].get("annotations", {}))


async def test_operator_survives_dropped_watches_and_server_errors(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(documents("cluster.yaml") + documents("pods.yaml"))
    async with running_operator(emulator.base_url):
        await api.call("POST", AG, documents("appgroup-a1.yaml")[0])
        await eventually(lambda: status_of(emulator).get("observedGeneration") == 1)
        await emulator.drop_watches()
        emulator.fail_next("GET", "appgroups", code=500, times=2)
        emulator.fail_next("PATCH", "appgroups", code=500, times=1, subresource="status")
        await api.call("PATCH", AG + "/a1", {"spec": {"numMembers": 5}}, "application/merge-patch+json")
        await eventually(lambda: status_of(emulator).get("observedGeneration") == 2, within=20)


PODS = "/api/v1/namespaces/default/pods"
EVENTS = "/api/v1/namespaces/default/events"


def order_of(status: dict[str, Any]) -> list[str]:
    entries = sorted(status.get("topologyOrder") or [], key=lambda entry: entry["index"])
    return [entry["workload"]["selector"] for entry in entries]


def ready_of(status: dict[str, Any]) -> dict[str, Any]:
    return next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), {})


async def warning_events(api: Api, reason: str) -> list[dict[str, Any]]:
    _, body = await api.call("GET", EVENTS)
    return [
        event
        for event in body["items"]
        if event.get("reason") == reason and event.get("involvedObject", {}).get("name") == "a1"
    ]


async def test_appgroup_lifecycle(api: Api, emulator: ApiEmulator) -> None:
    await emulator.seed(documents("cluster.yaml"))
    async with running_operator(emulator.base_url):
        # 1. create the AppGroup: order computed, nothing running yet
        await api.call("POST", AG, documents("appgroup-a1.yaml")[0])
        status = await eventually(lambda: ready_of(status_of(emulator)).get("status") == "True" and status_of(emulator))
        assert order_of(status) == ["p1", "p2", "p3"]
        assert status["runningWorkloads"] == 0
        assert [placement["pods"] for placement in status["placements"]] == [[], [], []]

        # 2. labelled pods appear (Pending): placements follow, nothing running
        for name, selector, node in (("p1-a", "p1", "n-1"), ("p2-a", "p2", "n-3"), ("p3-a", "p3", "n-6")):
            assert (await api.call("POST", PODS, labelled_pod(name, selector, node)))[0] == 201
        status = await eventually(
            lambda: sum(len(p["pods"]) for p in status_of(emulator).get("placements", [])) == 3 and status_of(emulator)
        )
        assert status["runningWorkloads"] == 0
        assert status["placements"][2]["pods"] == [
            {
                "name": "p3-a",
                "namespace": "default",
                "phase": "Pending",
                "node": "n-6",
                "zone": "Z3",
                "region": "us-east-1",
            }
        ]

        # 3. they move to Running
        for name in ("p1-a", "p2-a", "p3-a"):
            await api.call(
                "PATCH", f"{PODS}/{name}/status", {"status": {"phase": "Running"}}, "application/merge-patch+json"
            )
        await eventually(lambda: status_of(emulator).get("runningWorkloads") == 3)

        # 4. one is deleted
        await api.call("DELETE", f"{PODS}/p2-a")
        status = await eventually(lambda: status_of(emulator).get("runningWorkloads") == 2 and status_of(emulator))
        assert status["placements"][1]["pods"] == []

        # 5. the spec changes: a new algorithm gives a new order
        calculated = status["topologyCalculationTime"]
        await api.call(
            "PATCH", AG + "/a1", {"spec": {"topologySortingAlgorithm": "ReverseKahn"}}, "application/merge-patch+json"
        )
        status = await eventually(lambda: status_of(emulator).get("observedGeneration") == 2 and status_of(emulator))
        assert order_of(status) == ["p3", "p2", "p1"]
        assert status["topologyCalculationTime"] >= calculated

        # 6. a cycle: Ready=False naming the cycle, the last good order kept, a Warning Event
        workloads = documents("appgroup-a1.yaml")[0]["spec"]["workloads"]
        workloads[2]["dependencies"] = [{"workload": workloads[0]["workload"]}]
        await api.call("PATCH", AG + "/a1", {"spec": {"workloads": workloads}}, "application/merge-patch+json")
        status = await eventually(lambda: status_of(emulator).get("observedGeneration") == 3 and status_of(emulator))
        ready = ready_of(status)
        assert (ready["status"], ready["reason"]) == ("False", "DependencyCycle")
        assert ready["message"] == "dependency cycle: p1 -> p2 -> p3 -> p1"
        assert order_of(status) == ["p3", "p2", "p1"]
        events = await _wait_events(api, "DependencyCycle")
        assert events[0]["type"] == "Warning" and "p1 -> p2 -> p3 -> p1" in events[0]["message"]

        # 7. the cycle is fixed: Ready again, order recomputed
        workloads[2].pop("dependencies")
        await api.call("PATCH", AG + "/a1", {"spec": {"workloads": workloads}}, "application/merge-patch+json")
        status = await eventually(lambda: status_of(emulator).get("observedGeneration") == 4 and status_of(emulator))
        assert ready_of(status)["status"] == "True"
        assert order_of(status) == ["p3", "p2", "p1"]
        assert status["runningWorkloads"] == 2
        await _wait_events(api, "TopologyComputed")


async def _wait_events(api: Api, reason: str) -> list[dict[str, Any]]:
    for _ in range(100):
        events = await warning_events(api, reason)
        if events:
            return events
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {reason} event")


async def test_an_appgroup_too_large_for_etcd_gets_a_bounded_status(api: Api, emulator: ApiEmulator) -> None:
    """7,000 workloads: the full status would take the object past etcd's 1.5 MiB (the emulator answers 413 as
    the API server does, and the write would be retried forever); the order is left out and the condition
    says so, instead."""
    group = documents("appgroup-a1.yaml")[0]
    group["metadata"]["name"] = "huge"
    group["spec"]["numMembers"] = 7000
    group["spec"]["workloads"] = [
        {"workload": {"kind": "Deployment", "name": f"w-{i:05d}", "selector": f"w-{i:05d}", "apiVersion": "apps/v1"}}
        for i in range(7000)
    ]
    await emulator.seed(documents("cluster.yaml"))
    async with running_operator(emulator.base_url):
        status, _ = await api.call("POST", AG, group)
        assert status == 201
        conditions = await eventually(lambda: status_of(emulator, "huge").get("conditions"), within=60)
    by_type = {c["type"]: c for c in conditions}
    assert by_type["Ready"]["status"] == "True"
    assert by_type["StatusComplete"]["status"] == "False"
    assert "status.topologyOrder of 7000 workloads" in by_type["StatusComplete"]["message"]
    assert "topologyOrder" not in status_of(emulator, "huge")


async def test_a_burst_of_pods_costs_a_few_coalesced_writes_that_end_correct(api: Api, emulator: ApiEmulator) -> None:
    """40 pods of an AppGroup start within two seconds: the status is written at most once per interval (1 s),
    not once per pod, and the last write has every pod."""
    from operators.api.config.controllers import AppGroupOptions, ControllerOptions

    await emulator.seed(documents("cluster.yaml"))
    options = ControllerOptions(appgroup=AppGroupOptions(status_interval_seconds=1.0))
    async with running_operator(emulator.base_url, options=options):
        await api.call("POST", AG, documents("appgroup-a1.yaml")[0])
        await eventually(lambda: status_of(emulator).get("observedGeneration") == 1)
        before = len(_status_writes(emulator))
        started = asyncio.get_running_loop().time()
        for index in range(40):
            pod = labelled_pod(f"burst-{index}", ("p1", "p2", "p3")[index % 3], f"n-{1 + index % 8}")
            pod["status"] = {"phase": "Running"}
            await emulator.seed([pod])
            await asyncio.sleep(0.05)  # 40 pods over two seconds: one write per pod without coalescing

        def placed() -> int:
            return sum(len(entry.get("pods") or []) for entry in status_of(emulator).get("placements") or [])

        await eventually(lambda: placed() == 40 and status_of(emulator).get("runningWorkloads") == 40, within=10)
        await asyncio.sleep(1.5)  # nothing more to write
        writes = _status_writes(emulator)[before:]
        elapsed = asyncio.get_running_loop().time() - started
        assert 1 <= len(writes) <= int(elapsed) + 2, writes  # at most one per second, never one per pod
        assert placed() == 40


async def test_a_burst_of_appgroups_is_written_at_the_pace_oldest_first(
    api: Api, emulator: ApiEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """30 AppGroups created at once, at most 10 status writes a second: every status is written, never more than 20
    granted in any second (a full second's worth at once, then 10 a second), over two seconds at least where they
    took a fraction of one unpaced, and in the order they were created (each waits for none marked after it)."""
    from operators.api.config.controllers import AppGroupOptions, ControllerOptions
    from operators.controllers.appgroup import WritePace

    # The pace is the writer's grants, on its own clock: stamped where they reach the emulator, each write lands
    # after its own latency, and on a loaded machine writes granted a second apart landed together (CI: 21, then
    # 24 in 0.8 s of arrival stamps).
    grants: list[tuple[float, int]] = []
    take = WritePace.take

    def counted(self: WritePace, wanted: int, now: float) -> int:
        granted = take(self, wanted, now)
        if granted:
            grants.append((now, granted))
        return granted

    monkeypatch.setattr(WritePace, "take", counted)
    await emulator.seed(documents("cluster.yaml"))
    group = documents("appgroup-a1.yaml")[0]
    options = ControllerOptions(appgroup=AppGroupOptions(status_interval_seconds=1.0, status_writes_per_second=10))
    async with running_operator(emulator.base_url, options=options):
        for index in range(30):
            await api.call("POST", AG, {**group, "metadata": {**group["metadata"], "name": f"g{index:02d}"}})
        await eventually(lambda: len({w[4] for w in _status_writes(emulator) if w[4].startswith("g")}) == 30,
                         within=15)  # fmt: skip
        writes = [w for w in _status_writes(emulator) if w[4].startswith("g")]
    assert sum(granted for _, granted in grants) >= 30
    assert max(sum(granted for at, granted in grants if start <= at < start + 1) for start, _ in grants) <= 20
    totals = itertools.accumulate(granted for _, granted in grants)
    thirtieth = next(at for (at, _), total in zip(grants, totals, strict=True) if total >= 30)
    assert thirtieth - grants[0][0] >= 1.9  # 10 at once, then 10 a second: the 30th two seconds after the first
    first = {}
    for _, _, _, _, name, _ in writes:
        first.setdefault(name, len(first))
    assert sorted(first, key=first.__getitem__)[:10] == sorted(first)[:10]  # the first created, first written


def _status_writes(emulator: ApiEmulator) -> list[Any]:
    return [write for write in emulator.writes if write[2] == "appgroups" and write[5] == "status"]


async def test_a_status_field_left_out_is_removed_not_kept_from_before(api: Api, emulator: ApiEmulator) -> None:
    """The status is a merge patch: a field the controller stops writing (here the order, once the AppGroup grows
    past what fits) must be removed on the object, not keep its old value beside a condition saying it is gone."""
    group = documents("appgroup-a1.yaml")[0]
    await emulator.seed(documents("cluster.yaml"))
    async with running_operator(emulator.base_url):
        await api.call("POST", AG, group)
        await eventually(lambda: status_of(emulator).get("topologyOrder"))
        huge = [
            {
                "workload": {
                    "kind": "Deployment",
                    "name": f"w-{i:05d}",
                    "selector": f"w-{i:05d}",
                    "apiVersion": "apps/v1",
                }
            }
            for i in range(7000)
        ]
        patch = {"spec": {"numMembers": 7000, "workloads": huge}}
        status, _ = await api.call("PATCH", AG + "/a1", patch, "application/merge-patch+json")
        assert status == 200

        def bounded() -> bool:
            by_type = {c["type"]: c for c in status_of(emulator).get("conditions") or ()}
            return by_type.get("StatusComplete", {}).get("status") == "False"

        await eventually(bounded, within=60)
    assert "topologyOrder" not in status_of(emulator)
