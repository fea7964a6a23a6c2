"""The real kopf operator from operators.controllers, against the emulator over HTTP."""

from __future__ import annotations

import asyncio
import pathlib
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from operators.emulator import ApiEmulator
from tests.integration.conftest import Api
from tests.integration.kopf_harness import running_operator

pytestmark = pytest.mark.integration

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "hack" / "examples"
AG = "/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/default/appgroups"
RESOURCE = "appgroup.diktyo.x-k8s.io/v1alpha1/appgroups"


def documents(name: str) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all((EXAMPLES / name).read_text()) if document]


async def eventually(check: Callable[[], Any], within: float = 10.0) -> Any:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = check()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


def status_of(emulator: ApiEmulator, name: str = "a1") -> dict[str, Any]:
    obj = emulator.get_object(RESOURCE, "default", name) or {}
    return dict(obj.get("status") or {})


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
