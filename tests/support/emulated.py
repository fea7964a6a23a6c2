"""What the tests against the API emulator share: the example cluster's documents, the AppGroup path, polling with
a deadline, an AppGroup's status, a labelled pod, the Lease holder, a cache's change recorder, Events posted, a
binder standing in for kube-scheduler."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from typing import Any

import yaml

from operators.api.config.descheduler import DeschedulerPolicy
from operators.api.config.scheduler import SchedulerConfig
from operators.controllers.descheduler import Descheduler, followed_kinds, layouts_in
from operators.controllers.descheduler_metrics import DeschedulerMetrics
from operators.emulator import ApiEmulator
from operators.emulator.transport import FaultyProxy
from operators.kube import url_api_client
from operators.sources.cache import ClusterCache
from operators.sources.store import Change
from operators.waiting import NotConverged, until
from tests.integration.conftest import Api

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "hack" / "examples"
AG = "/apis/appgroup.diktyo.x-k8s.io/v1alpha1/namespaces/default/appgroups"
RESOURCE = "appgroup.diktyo.x-k8s.io/v1alpha1/appgroups"


def documents(name: str) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all((EXAMPLES / name).read_text()) if document]


async def eventually(check: Callable[[], Any], within: float = 10.0) -> Any:
    try:
        return await until("condition", check, within)
    except NotConverged as error:
        raise AssertionError(str(error)) from None


def status_of(emulator: ApiEmulator, name: str = "a1") -> dict[str, Any]:
    obj = emulator.get_object(RESOURCE, "default", name) or {}
    return dict(obj.get("status") or {})


def labelled_pod(name: str, selector: str, node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": selector},
        },
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]},
    }


def recorder(cache: ClusterCache) -> list[tuple[str, str, str]]:
    """Every change the cache publishes from now on, as (kind, what, name)."""
    seen: list[tuple[str, str, str]] = []

    def listen(changes: list[Change]) -> None:
        for change in changes:
            what = "added" if change.old is None else "deleted" if change.new is None else "changed"
            seen.append((change.kind, what, (change.new or change.old).name))

    cache.subscribe(listen)
    return seen


LEASE = ("coordination.k8s.io/v1/leases", "default", "netaware")


def holder(emulator: ApiEmulator) -> Any:
    lease = emulator.get_object(*LEASE) or {}
    return (lease.get("spec") or {}).get("holderIdentity")


async def reasons_posted(api: Api, reason: str, namespace: str = "default") -> None:
    for _ in range(100):
        _, events = await api.call("GET", f"/api/v1/namespaces/{namespace}/events")
        if any(event["reason"] == reason for event in events["items"]):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {reason} event")


@contextlib.asynccontextmanager
async def running_descheduler(
    emulator: ApiEmulator,
    policy: DeschedulerPolicy,
    pods: int,
    config: SchedulerConfig | None = None,
    server: str | None = None,
) -> AsyncIterator[Descheduler]:
    """A Descheduler on a cluster cache of the emulator, once the cache holds ``pods`` pods (``server``: another URL
    to reach the emulator by, a proxy in front of it)."""
    api = await url_api_client(server or emulator.base_url)()
    live = ClusterCache(followed_kinds(policy))
    stop = asyncio.Event()
    follower = asyncio.create_task(live.follow(api, stop))
    try:
        await eventually(lambda: live.ready and len(live.snapshot().pods) == pods, within=5)
        yield Descheduler(api, policy, live.snapshot, DeschedulerMetrics.create(), config=config or SchedulerConfig(),
                          layout_seen=layouts_in(live))  # fmt: skip
    finally:
        stop.set()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        await api.close()


@contextlib.asynccontextmanager
async def binder(
    api: Api, emulator: ApiEmulator, skip: frozenset[str] = frozenset()
) -> AsyncIterator[dict[str, float]]:
    """Binds every unbound pod without scheduling gates (but those in ``skip``) to a node, round robin; yields
    pod name -> the time it was bound."""
    bound: dict[str, float] = {}
    nodes = [f"n-{index}" for index in range(1, 9)]

    async def loop() -> None:
        while True:
            for obj in emulator.list_objects("v1/pods", "default"):
                spec, name = obj.get("spec") or {}, obj["metadata"]["name"]
                if spec.get("nodeName") or spec.get("schedulingGates") or name in skip:
                    continue
                target = nodes[len(bound) % len(nodes)]
                binding = {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": name},
                    "target": {"name": target},
                }
                status, _ = await api.call("POST", f"/api/v1/namespaces/default/pods/{name}/binding", binding)
                if status in {200, 201}:
                    bound[name] = time.time()
            await asyncio.sleep(0.05)

    task = asyncio.create_task(loop())
    try:
        yield bound
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


@contextlib.asynccontextmanager
async def proxied(emulator: ApiEmulator) -> AsyncIterator[FaultyProxy]:
    """A transport-fault proxy in front of the emulator (its ``url`` reaches the emulator through it)."""
    upstream = urllib.parse.urlsplit(emulator.base_url)
    async with FaultyProxy(upstream.hostname or "127.0.0.1", upstream.port or 80) as proxy:
        yield proxy
