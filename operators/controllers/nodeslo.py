"""The NodeSLO netqos controller (kopf): a thin shell over :mod:`operators.engine.status.nodeslo`.

* The ``slo-controller-config`` ConfigMap is watched; each change updates the configuration in
  force (last good per key), posts one Warning Event on the ConfigMap per newly refused key
  (naming the key, the field and the value), and re-renders every node. Its deletion changes
  nothing (as Koordinator).
* Nodes come from the process's cluster cache (:mod:`operators.sources.cache`): a node whose labels or
  bandwidth annotations changed (upstream ignores annotation-only changes) is queued and re-rendered by
  a few workers; a deleted node's NodeSLO is deleted. Only nodes whose inputs changed are rendered.
* NodeSLOs come from the cache too: changes revert manual edits of the network-QoS fields netaware owns
  (:data:`operators.engine.status.nodeslo.OWNED_PATHS`) and recreate a deleted NodeSLO of a live node; every
  other field (``cpuBurstStrategy``, ``extensions``, ``cpuQOS``, ...) is left exactly as found, whoever
  wrote it. With ``spec_owner="koordinator"`` only the status is written, and NodeSLOs are never
  created or deleted (Koordinator's slo-controller owns them).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import datetime
import logging
import weakref
from dataclasses import dataclass
from typing import Any

import kopf
import pydantic
from kubernetes_asyncio.client.exceptions import ApiException

from operators.api import keys
from operators.api.config.controllers import NodeSLOOptions
from operators.api.nodeslo import NodeSLO
from operators.controllers.metrics import reconciler
from operators.controllers.workqueue import WorkQueue
from operators.engine.cluster.objects import Node
from operators.engine.status.nodeslo import owned_spec, owned_spec_patch, render_nodeslo
from operators.engine.status.sloconfig import ConfigState, update_config
from operators.kube import patch_status, read_json, send_json
from operators.sources.cache import ClusterCache
from operators.sources.kinds import NODES, NODESLOS
from operators.sources.store import Change
from operators.sources.trim import trim_other
from operators.supervision import Supervisor

RESOURCE = (keys.SLO_GROUP, keys.V1ALPHA1, "nodeslos")
PATH = f"/apis/{keys.SLO_GROUP}/{keys.V1ALPHA1}/nodeslos"
JSON_PATCH = "application/json-patch+json"
WATCHED_ANNOTATIONS = (keys.NODE_BANDWIDTH_KOORDINATOR, keys.NODE_BANDWIDTH_THESIS)


# Nodes rendered at once: the first sync of 5,000 nodes is 5,000 creations and as many status writes; a few
# at a time leave the API server (and this process's other controllers) room for everything else.
WORKERS = 4


@dataclass
class _State:
    cache: ClusterCache
    config: ConfigState = dataclasses.field(default_factory=ConfigState)
    loaded: bool = False
    nodes: dict[str, Node] = dataclasses.field(default_factory=dict)
    slos: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    # one lock per node while a sync of it runs or waits (weak: gone with the last sync, never kept per node forever)
    locks: weakref.WeakValueDictionary[str, asyncio.Lock] = dataclasses.field(
        default_factory=weakref.WeakValueDictionary
    )
    own_versions: dict[str, collections.deque[Any]] = dataclasses.field(default_factory=dict)
    work: WorkQueue = dataclasses.field(
        default_factory=lambda: WorkQueue(
            logging.getLogger("netaware.nodeslo"), "NodeSLO %s: rendering failed", "nodeslo"
        )
    )

    def enqueue(self, name: str) -> None:
        self.work.enqueue(name)

    def on_changes(self, changes: list[Change]) -> None:
        """Nodes whose labels or bandwidth annotations changed (or that came or went) are queued; so are nodes
        whose NodeSLO someone else changed or deleted (our own writes come back with the version we hold)."""
        for change in changes:
            if change.kind == NODESLOS.name:
                self._slo_changed(change)
                continue
            if change.kind != NODES.name:
                continue
            if change.new is None:
                self.nodes.pop(change.old.name, None)
                self.enqueue(change.old.name)
                continue
            node: Node = change.new
            previous = self.nodes.get(node.name)
            self.nodes[node.name] = node
            if previous is None or _watched(previous) != _watched(node) or node.name not in self.slos:
                self.enqueue(node.name)

    def own(self, name: str, written: dict[str, Any] | None) -> dict[str, Any] | None:
        """Remember the version of an object we wrote: its event is our own write coming back."""
        if written is None:
            return None
        self.own_versions.setdefault(name, collections.deque(maxlen=8)).append(_version(written))
        return trim_other(written)  # kept as the cache keeps it: no managedFields

    def _slo_changed(self, change: Change) -> None:
        name = (change.new or change.old).metadata.name
        if change.new is None:
            self.slos.pop(name, None)
            self.own_versions.pop(name, None)
        else:
            raw = self.cache.raw(NODESLOS, "", name)
            if raw is None or _version(raw) in self.own_versions.get(name, ()):
                return  # our own write
            self.slos[name] = raw
        if name in self.nodes:
            self.enqueue(name)


def _version(raw: dict[str, Any]) -> Any:
    return (raw.get("metadata") or {}).get("resourceVersion")


def _watched(node: Node) -> tuple[Any, ...]:
    return (dict(node.labels), tuple(node.annotations.get(key) for key in WATCHED_ANNOTATIONS))


@reconciler("nodeslo")
async def sync_node(api: Any, state: _State, name: str, options: NodeSLOOptions) -> None:
    """Create, fix or delete the NodeSLO of one node, from the configuration in force."""
    async with state.locks.setdefault(name, asyncio.Lock()):
        node = state.nodes.get(name)
        current = state.slos.get(name)
        if node is None:
            if current is not None and options.spec_owner == "netaware":
                await send_json(api, "DELETE", f"{PATH}/{name}", None)
                state.slos.pop(name, None)
            return
        existing = None
        if current is not None:
            try:
                existing = NodeSLO.model_validate(current)
            except pydantic.ValidationError:
                existing = None  # unreadable: render afresh
        wanted = render_nodeslo(node, state.config, existing, options, datetime.datetime.now(datetime.UTC)).to_wire()
        if current is None:
            if options.spec_owner != "netaware":
                return  # Koordinator creates it; its first event brings us back here
            body = {key: value for key, value in wanted.items() if key not in ("status", "spec")}
            created = await send_json(api, "POST", PATH, {**body, "spec": owned_spec(wanted["spec"])})
            current = state.own(name, created) or wanted
        elif options.spec_owner == "netaware":
            operations = owned_spec_patch(current, wanted["spec"])
            if operations:
                version = (current.get("metadata") or {}).get("resourceVersion")
                guard = [{"op": "test", "path": "/metadata/resourceVersion", "value": version}] if version else []
                try:
                    patched = await send_json(api, "PATCH", f"{PATH}/{name}", guard + operations, JSON_PATCH)
                    current = state.own(name, patched) or current
                except ApiException as error:
                    if error.status not in (409, 422):
                        raise
                    return  # someone wrote it meanwhile: their event brings the newer object back here
        if current.get("status") != wanted.get("status"):
            written = await patch_status(
                api, *RESOURCE, None, name, wanted.get("status") or {}, current.get("status") or {}
            )
            # the object as written: its resourceVersion guards our next spec patch
            current = state.own(name, written) or {**current, "status": wanted.get("status")}
        state.slos[name] = current


async def ensure_config(api: Any, state: _State, options: NodeSLOOptions) -> None:
    """Read the ConfigMap once before the first rendering (it may never send an event: absent)."""
    if state.loaded:
        return
    found = await read_json(api, f"/api/v1/namespaces/{options.config_namespace}/configmaps/{options.config_name}")
    state.config = update_config(
        state.config, (found or {}).get("data") or ({} if found else None), list(state.nodes.values())
    )
    state.loaded = True


def register(
    registry: kopf.OperatorRegistry,
    cache: ClusterCache,
    options: NodeSLOOptions | None = None,
    supervisor: Supervisor | None = None,
) -> None:
    """Add the NodeSLO handlers to ``registry``; nodes are read from ``cache``."""
    settings = options or NodeSLOOptions()

    @kopf.on.startup(id="nodeslo_state", registry=registry)
    async def init_state(memo: kopf.Memo, **_: Any) -> None:
        state = _State(cache)
        memo.nodeslo = state
        state.on_changes(cache.subscribe(state.on_changes, asyncio.get_running_loop()))

        async def render(name: str) -> None:
            await ensure_config(memo.api, state, settings)
            await sync_node(memo.api, state, name, settings)

        state.work.start(WORKERS, cache.wait_synced, render, supervisor)

    @kopf.on.cleanup(id="nodeslo_workers", registry=registry)
    async def stop_workers(memo: kopf.Memo, **_: Any) -> None:
        state: _State | None = getattr(memo, "nodeslo", None)
        if state is not None:
            await state.work.stop()

    def is_config(namespace: str, name: str, **_: Any) -> bool:
        return namespace == settings.config_namespace and name == settings.config_name

    @kopf.on.event("configmaps", id="nodeslo_config", when=is_config, registry=registry)  # type: ignore[arg-type]
    async def config_event(
        type: str | None, body: kopf.Body, memo: kopf.Memo, logger: logging.Logger, **_: Any
    ) -> None:
        state: _State = memo.nodeslo
        data = None if type == "DELETED" else dict(body.get("data") or {})
        before = dict(state.config.problems)
        state.config = update_config(state.config, data, list(state.nodes.values()))
        state.loaded = True
        for key, problem in state.config.problems.items():
            if str(before.get(key)) != str(problem):
                kopf.warn(
                    body, reason="NetworkQOSConfigInvalid", message=f"{problem}; the last valid {key} stays in force"
                )
                logger.warning("slo-controller-config refused: %s", problem)
        for name in sorted(state.nodes):
            state.enqueue(name)
