"""The NetworkTopology controller (kopf): a debounced shell over :mod:`operators.engine.status.networktopology`.

* Pods, nodes and AppGroups come from the process's cluster cache (:mod:`operators.sources.cache`):
  changes of AppGroup pods, of AppGroups and of a node's region or zone mark the topologies dirty; so do
  the topology's ConfigMaps and the NetworkTopology itself (kopf; no writes, no annotations on them).
* One task per NetworkTopology (started by its events, not a kopf daemon: a daemon puts kopf's finalizer on the
  object, and a finalizer nobody removes, once the operator is gone, blocks ``helm uninstall`` deleting the CRD and
  every namespace holding a NetworkTopology) recomputes at most once per ``debounce`` seconds (default 10)
  after something changed, and at least every ``resync`` seconds (default 300); it reads the
  NetworkTopology and its ConfigMaps, takes nodes, AppGroups and pods from the cache, computes, and writes
  ``spec.weights`` and ``status`` only when they changed (the weights with the resourceVersion
  it read, so a concurrent edit is never overwritten).
* Skipped netperf entries are reported in one Warning Event per change, capped.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kopf
import pydantic
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from operators.api import errors, keys
from operators.api.config.controllers import NetworkTopologyOptions
from operators.api.networktopology import NetworkTopology
from operators.controllers.metrics import reconciler
from operators.engine.cluster.objects import place_of
from operators.engine.cluster.snapshot import SnapshotBuilder
from operators.engine.status.netperf import Skipped
from operators.engine.status.networktopology import SKIPPED_SHOWN, invalid_spec_status, networktopology_result
from operators.kube import API_ERRORS, MERGE_PATCH, describe, patch_status, read_json
from operators.logs import about
from operators.sources.cache import ClusterCache
from operators.sources.kinds import APPGROUP_PODS, APPGROUP_SPECS, NODES
from operators.sources.store import Change
from operators.supervision import Supervisor, cancel

RESOURCE = (keys.NETWORKTOPOLOGY_GROUP, keys.V1ALPHA1, "networktopologies")
EVENT_SHOWN = 5


@dataclass
class _State:
    """The controller's memory, shared by its handlers (kept in kopf's memo)."""

    cache: ClusterCache
    dirty: dict[tuple[str, str], asyncio.Event] = dataclasses.field(default_factory=dict)
    loops: dict[tuple[str, str], asyncio.Task[None]] = dataclasses.field(default_factory=dict)
    config_maps: dict[tuple[str, str], set[str]] = dataclasses.field(default_factory=dict)
    reported: dict[tuple[str, str], tuple[str, ...]] = dataclasses.field(default_factory=dict)
    writes: int = 0

    def mark(self, namespace: str | None = None) -> None:
        for (topology_namespace, _), event in self.dirty.items():
            if namespace is None or topology_namespace == namespace:
                event.set()

    def on_changes(self, changes: list[Change]) -> None:
        """AppGroup pods, AppGroups and nodes whose region or zone changed: every topology is dirty."""
        for change in changes:
            if change.kind == NODES.name:
                if place_of(change.old) != place_of(change.new):
                    self.mark()
                    return
            elif change.kind == APPGROUP_SPECS.name or (
                change.kind == APPGROUP_PODS.name  # the process's cache has other kinds too (NodeSLOs, ...)
                and any(pod is not None and keys.APPGROUP_LABEL in pod.labels for pod in (change.old, change.new))
            ):
                self.mark()
                return


def _skipped_message(skipped: list[Skipped]) -> str:
    shown = "; ".join(str(entry) for entry in skipped[:EVENT_SHOWN])
    more = f" (and {len(skipped) - EVENT_SHOWN} more, see status.netperf)" if len(skipped) > EVENT_SHOWN else ""
    return f"{len(skipped)} netperf entries skipped: {shown}{more}"


@reconciler("networktopology")
async def recompute(
    api: client.ApiClient,
    state: _State,
    namespace: str,
    name: str,
    options: NetworkTopologyOptions,
    logger: logging.Logger | logging.LoggerAdapter[Any],
) -> None:
    """Read what the topology depends on, compute, write what changed."""
    custom = client.CustomObjectsApi(api)
    try:
        raw = await custom.get_namespaced_custom_object(*RESOURCE[:2], namespace, RESOURCE[2], name)
    except ApiException as error:
        if error.status == 404:
            return
        raise
    builder = SnapshotBuilder()
    try:
        topology = NetworkTopology.model_validate(raw)
    except pydantic.ValidationError as error:
        message = errors.render_all(errors.from_pydantic(error))
        generation = (raw.get("metadata") or {}).get("generation")
        status = invalid_spec_status(raw.get("status"), generation, message, datetime.datetime.now(datetime.UTC))
        wire = status.to_wire()
        if wire != raw.get("status"):
            kopf.warn(raw, reason="InvalidSpec", message=message)  # once per new problem, not per recompute
            await patch_status(api, *RESOURCE, namespace, name, wire, raw.get("status") or {})
        return
    named = topology.spec.configmap_name
    state.config_maps[(namespace, name)] = {named}
    named_map = await read_json(api, f"/api/v1/namespaces/{namespace}/configmaps/{named}")
    labelled = await read_json(
        api, f"/api/v1/namespaces/{namespace}/configmaps", labelSelector=f"{keys.NETPERF_CONFIGMAP_LABEL}={name}"
    )
    for item in ([named_map] if named_map else []) + list((labelled or {}).get("items", [])):
        builder.add({"apiVersion": "v1", "kind": "ConfigMap", **item})
    cached = state.cache.snapshot()
    pods = tuple(pod for pod in cached.pods if keys.APPGROUP_LABEL in pod.labels)
    snapshot = dataclasses.replace(builder.build(), nodes=cached.nodes, app_groups=cached.app_groups, pods=pods)
    result = networktopology_result(topology, snapshot, datetime.datetime.now(datetime.UTC), options.default_capacity)
    new = result.topology.to_wire()
    if new["spec"]["weights"] != raw["spec"].get("weights"):
        body = {
            "metadata": {"resourceVersion": raw["metadata"]["resourceVersion"]},
            "spec": {"weights": new["spec"]["weights"]},
        }
        await custom.patch_namespaced_custom_object(
            *RESOURCE[:2], namespace, RESOURCE[2], name, body, _content_type=MERGE_PATCH
        )  # type: ignore[call-arg]
        state.writes += 1
    if new.get("status") != raw.get("status"):
        await patch_status(api, *RESOURCE, namespace, name, new["status"], raw.get("status") or {})
        state.writes += 1
    skipped = tuple(str(entry) for entry in result.skipped[:SKIPPED_SHOWN])
    if skipped and skipped != state.reported.get((namespace, name)):
        kopf.warn(raw, reason="NetperfEntriesSkipped", message=_skipped_message(result.skipped))
    state.reported[(namespace, name)] = skipped
    ready = (new.get("status") or {}).get("conditions", [{}])[0]
    old_ready: dict[str, Any] = next(iter((raw.get("status") or {}).get("conditions") or []), {})
    if ready.get("status") == "False" and ready.get("reason") != old_ready.get("reason"):
        kopf.warn(raw, reason=ready["reason"], message=ready["message"])
    logger.debug("NetworkTopology %s/%s recomputed", namespace, name)


def register(
    registry: kopf.OperatorRegistry,
    cache: ClusterCache,
    options: NetworkTopologyOptions | None = None,
    supervisor: Supervisor | None = None,
) -> None:
    """Add the NetworkTopology handlers to ``registry``; nodes, AppGroups and pods are read from ``cache``; each
    topology's loop runs under ``supervisor``."""
    settings = options or NetworkTopologyOptions()
    tasks = supervisor or Supervisor()

    @kopf.on.startup(id="networktopology_state", registry=registry)
    async def init_state(memo: kopf.Memo, **_: Any) -> None:
        memo.networktopology = _State(cache)
        cache.subscribe(memo.networktopology.on_changes, asyncio.get_running_loop())

    @kopf.on.cleanup(id="networktopology_loops", registry=registry)
    async def stop_loops(memo: kopf.Memo, **_: Any) -> None:
        await cancel(list(memo.networktopology.loops.values()))

    @kopf.on.event("configmaps", id="networktopology_configmaps", registry=registry)  # type: ignore[arg-type]
    async def configmap_event(namespace: str, name: str, labels: Mapping[str, str], memo: kopf.Memo, **_: Any) -> None:
        _configmap_changed(memo.networktopology, namespace, name, labels)

    @kopf.on.event(*RESOURCE, id="networktopology_changed", registry=registry)  # type: ignore[arg-type]
    async def topology_event(
        event: Mapping[str, Any], namespace: str, name: str, memo: kopf.Memo, logger: logging.Logger, **_: Any
    ) -> None:
        state: _State = memo.networktopology
        key = (namespace, name)
        if event.get("type") == "DELETED":
            task = state.loops.pop(key, None)
            if task is not None:
                task.cancel()
            for held in (state.dirty, state.config_maps, state.reported):
                held.pop(key, None)
        elif key not in state.loops or state.loops[key].done():
            dirty = state.dirty[key] = asyncio.Event()
            state.loops[key] = tasks.start(
                "networktopology", lambda: _topology_loop(namespace, name, dirty, memo, logger, settings)
            )
        else:
            state.dirty[key].set()


def _configmap_changed(state: _State, namespace: str, name: str, labels: Mapping[str, str]) -> None:
    """A netperf ConfigMap (labelled with its NetworkTopology) or one a topology names changed: mark it dirty."""
    owner = labels.get(keys.NETPERF_CONFIGMAP_LABEL)
    if owner is not None and (namespace, owner) in state.dirty:
        state.dirty[(namespace, owner)].set()
    for key, names in state.config_maps.items():
        if key[0] == namespace and name in names and key in state.dirty:
            state.dirty[key].set()


async def _topology_loop(
    namespace: str,
    name: str,
    dirty: asyncio.Event,
    memo: kopf.Memo,
    logger: logging.Logger,
    settings: NetworkTopologyOptions,
) -> None:
    """Recompute one NetworkTopology whenever it is marked dirty (debounced) or every resync period, until
    cancelled. A failed API call (an error, a broken connection, a timeout) is retried after the debounce; anything
    else ends the loop, and its supervisor starts it again (recomputing at once)."""
    state: _State = memo.networktopology
    dirty.set()
    await state.cache.wait_synced()  # allocated bandwidth from half-listed pods would be wrong
    loop = asyncio.get_running_loop()
    last_run = -settings.debounce_seconds
    while True:
        with contextlib.suppress(TimeoutError):  # a timeout is the periodic resync
            await asyncio.wait_for(dirty.wait(), timeout=settings.resync_seconds)
        pause = last_run + settings.debounce_seconds - loop.time()
        if pause > 0:
            await asyncio.sleep(pause)
        dirty.clear()
        try:
            await recompute(memo.api, state, namespace, name, settings, logger)
        except API_ERRORS as error:
            logger.warning("NetworkTopology %s/%s: recompute failed (%s); retrying", namespace, name, describe(error),
                           extra=about("NetworkTopology", namespace, name))  # fmt: skip
            dirty.set()
        last_run = loop.time()  # the interval runs from the end of one computation
