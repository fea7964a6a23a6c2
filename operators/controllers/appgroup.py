"""The AppGroup controller: a thin shell over :func:`operators.engine.status.appgroup.appgroup_status`.

* AppGroups come from kopf (level-triggered, no kopf diff-base: kopf's ``last-handled-configuration``
  annotation would hold a second copy of the spec and take a large AppGroup past etcd's object limit).
* Pods and nodes come from the process's cluster cache (:mod:`operators.sources.cache`): each pod change
  updates the members of the AppGroup its label names (by delta, never a list) and marks the AppGroups
  that cover it.
* The topology-order scheduling gates of the AppGroup's pods are released by :mod:`operators.controllers.gates`.
* One writer task writes the status of the marked AppGroups through the status subresource, at most once
  per AppGroup per ``status_interval_seconds`` and always the latest state (computed when written), only
  when it changed; at most ``status_writes_per_second`` in all, the AppGroups marked longest first (a burst of
  AppGroups whose pods bind over seconds wrote about ten statuses each, as many writes as their pods: the
  API server that creates and binds those pods pays for them). A failed write keeps the AppGroup marked and is
  retried. An invalid spec posts a
  Warning Event (once per new problem); a spec that becomes valid again a Normal one.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import hashlib
import logging
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import kopf
import orjson
import pydantic

from operators.api import errors, keys
from operators.api.appgroup import AppGroup, AppGroupStatus
from operators.api.config.controllers import AppGroupOptions
from operators.controllers.gates import GateKeeper
from operators.controllers.metrics import reconciler
from operators.engine.cluster.appgroups import workload_namespaces
from operators.engine.cluster.conditions import invalid_spec
from operators.engine.cluster.objects import Node, Pod, place_of
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.status.appgroup import appgroup_status
from operators.kube import API_ERRORS, describe, patch_status, post_event
from operators.logs import about
from operators.sources.cache import ClusterCache
from operators.sources.kinds import NODES, PODS
from operators.sources.live_index import LiveIndex
from operators.sources.store import Change
from operators.supervision import Supervisor, cancel

RESOURCE = (keys.APPGROUP_GROUP, keys.V1ALPHA1, "appgroups")
RETRY_SECONDS = 2.0
# What the object's status may hold, as far as a write is concerned: every field the controller writes. (The
# status remembered after a write is kept slim, without placements, so it cannot say what is there.)
ANY_STATUS: dict[str, None] = {field.alias or name: None for name, field in AppGroupStatus.model_fields.items()}
WRITERS = 4  # status writes in flight at once
COMPONENT = "netaware"

logger = logging.getLogger("netaware.appgroup")

Key = tuple[str, str]  # (namespace, name)


def compute_status(
    body: Mapping[str, Any],
    pods: Mapping[Key, Mapping[str, Pod]],
    nodes: Callable[[str], Node | None] | Mapping[str, Node],
    now: datetime.datetime,
) -> AppGroupStatus:
    """The status of one AppGroup from its members (by (namespace, AppGroup label), then pod name) and the nodes
    they run on (a spec that does not parse: :func:`invalid_spec`)."""
    try:
        group = AppGroup.model_validate(dict(body))
    except pydantic.ValidationError as error:
        message = errors.render_all(errors.from_pydantic(error))
        previous = body.get("status") or {}
        status = AppGroupStatus.model_validate(previous) if previous else AppGroupStatus()
        return invalid_spec(status, message, now, body.get("metadata", {}).get("generation"))
    lookup = nodes.get if isinstance(nodes, Mapping) else nodes
    name = group.metadata.name
    members = [pod for namespace in workload_namespaces(group) for pod in pods.get((namespace, name), {}).values()]
    known = (lookup(name) for name in sorted({pod.node_name for pod in members if pod.node_name}))
    snapshot = Snapshot(pods=tuple(members), nodes=tuple(node for node in known if node is not None))
    return appgroup_status(group, snapshot, now)


def _ready(status: Mapping[str, Any] | None) -> Mapping[str, Any]:
    for item in (status or {}).get("conditions") or ():
        if item.get("type") == keys.CONDITION_READY:
            return dict(item)
    return {}


@dataclasses.dataclass
class _State:
    """The controller's memory (in kopf's loop): AppGroups as kopf last delivered them, members by delta, what
    was written, and which AppGroups wait for a write."""

    cache: ClusterCache
    options: AppGroupOptions
    bodies: dict[Key, dict[str, Any]] = dataclasses.field(default_factory=dict)  # their status slimmed
    covered: dict[Key, frozenset[str]] = dataclasses.field(default_factory=dict)  # namespaces; empty: unreadable
    by_name: dict[str, set[Key]] = dataclasses.field(default_factory=lambda: defaultdict(set))
    members: dict[Key, dict[str, Pod]] = dataclasses.field(default_factory=lambda: defaultdict(dict))
    written: dict[Key, tuple[dict[str, Any], bytes]] = dataclasses.field(default_factory=dict)  # slimmed, digest
    last_write: dict[Key, float] = dataclasses.field(default_factory=dict)
    dirty: dict[Key, int] = dataclasses.field(default_factory=dict)  # waiting to be written -> since (a mark count)
    marks: int = 0
    wake: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)

    def mark(self, key: Key) -> None:
        if key not in self.dirty:
            self.marks += 1
            self.dirty[key] = self.marks
        self.wake.set()

    def on_changes(self, changes: list[Change]) -> None:
        """Pod changes update the members; they, and node changes, mark the AppGroups they touch."""
        for change in changes:
            if change.kind == PODS.name:
                for pod, add in ((change.old, False), (change.new, True)):
                    if pod is None:
                        continue
                    label = pod.labels.get(keys.APPGROUP_LABEL)
                    if not label:
                        continue
                    key = (pod.namespace, label)
                    if add:
                        self.members[key][pod.name] = pod
                    elif key in self.members:
                        self.members[key].pop(pod.name, None)
                        if not self.members[key]:
                            del self.members[key]  # kept only while the label has pods
                    for key in self.by_name.get(label, ()):
                        if pod.namespace in self.covered.get(key, ()):
                            self.mark(key)
            elif change.kind == NODES.name and place_of(change.old) != place_of(change.new):
                for key in self.bodies:  # a node's zone or region changed: rare, and it moves placements
                    self.mark(key)

    def set_body(self, key: Key, body: dict[str, Any]) -> None:
        """An AppGroup as kopf delivered it; marked unless it is the echo of our own last write."""
        known = self.bodies.get(key)
        written = self.written.get(key)
        echo = (
            known is not None
            and written is not None
            and _generation(known) == _generation(body)
            and known.get("spec") == body.get("spec")
            and _digest(body.get("status")) == written[1]
        )
        self.bodies[key] = {**body, "status": _slim(body.get("status"))}
        self.by_name[key[1]].add(key)
        try:
            self.covered[key] = frozenset(workload_namespaces(AppGroup.model_validate(body)))
        except pydantic.ValidationError:
            self.covered[key] = frozenset()
        if not echo:
            self.mark(key)

    def forget(self, key: Key) -> None:
        self.bodies.pop(key, None)
        self.covered.pop(key, None)
        self.by_name[key[1]].discard(key)
        if not self.by_name[key[1]]:
            del self.by_name[key[1]]
        self.written.pop(key, None)
        self.last_write.pop(key, None)
        self.dirty.pop(key, None)


def _slim(status: Any) -> dict[str, Any]:
    """A status without its placements: what the next computation reads of it (conditions, order, generation);
    placements are computed afresh, and 500 AppGroups of 200 pods would otherwise keep 100,000 of them."""
    return {key: value for key, value in (status or {}).items() if key != "placements"}


def _digest(status: Any) -> bytes:
    return hashlib.blake2b(orjson.dumps(status or {}, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


def _generation(body: Mapping[str, Any]) -> Any:
    return (body.get("metadata") or {}).get("generation")


def writing_order(
    keys: list[Key], bodies: Mapping[Key, Mapping[str, Any]], marked_at: Mapping[Key, int] | None = None
) -> list[Key]:
    """The order of a pass's writes: first the AppGroups never decided for their current spec (no status of this
    generation: created or changed while no replica led), then the rest, each the longest marked first (``marked_at``)
    and by key. A new leader's first pass recomputes every AppGroup (thousands take seconds); the ones waiting for a
    decision do not wait for those, and under the writes' pace no AppGroup waits behind others marked after it."""
    since = marked_at or {}

    def decided(key: Key) -> bool:
        body = bodies.get(key) or {}
        return bool((body.get("status") or {}).get("observedGeneration") == _generation(body))

    return sorted(keys, key=lambda key: (decided(key), since.get(key, 0), key))


@dataclasses.dataclass
class WritePace:
    """At most ``rate`` writes a second (0: no limit), up to a second's worth at once after a quiet second."""

    rate: float
    tokens: float = -1.0  # -1: nothing taken yet (a full second's worth)
    at: float = 0.0

    def take(self, wanted: int, now: float) -> int:
        """How many of ``wanted`` writes may go at ``now`` (those are counted)."""
        if self.rate <= 0:
            return wanted
        most = max(self.rate, 1.0)
        self.tokens = most if self.tokens < 0 else min(most, self.tokens + (now - self.at) * self.rate)
        self.at = now
        granted = min(wanted, int(self.tokens))
        self.tokens -= granted
        return granted

    def wait(self) -> float:
        """Seconds from the last :meth:`take` until one more write may go."""
        return 0.0 if self.rate <= 0 or self.tokens >= 1 else (1 - self.tokens) / self.rate


@reconciler("appgroup")
async def write_status(api: Any, state: _State, key: Key) -> tuple[dict[str, Any], dict[str, Any]]:
    """Compute one AppGroup's status from the latest state and write it if it changed; (previous, new). The
    last status written is remembered: the AppGroup kopf delivered may lag behind our own writes."""
    body = state.bodies[key]
    written = state.written.get(key)
    previous = written[0] if written is not None else body["status"]
    now = datetime.datetime.now(datetime.UTC)
    node_of = lambda name: state.cache.get(NODES, "", name)  # noqa: E731
    status = compute_status({**body, "status": previous}, state.members, node_of, now).to_wire()
    digest = _digest(status)
    if written is None or digest != written[1]:
        # a merge patch keeps what it does not mention: against ANY_STATUS, a field left out this time is removed
        await patch_status(api, *RESOURCE, key[0], key[1], status, previous=ANY_STATUS)
    state.written[key] = (_slim(status), digest)
    return previous, status


async def _announce(api: Any, state: _State, key: Key, previous: Mapping[str, Any], status: Mapping[str, Any]) -> None:
    """An Event when the spec became invalid (once per new problem) or valid again."""
    old, new = _ready(previous), _ready(status)
    body = state.bodies.get(key) or {}
    meta = body.get("metadata") or {}
    involved = {
        "apiVersion": body.get("apiVersion"),
        "kind": "AppGroup",
        "name": key[1],
        "namespace": key[0],
        "uid": meta.get("uid"),
    }
    if new.get("status") == "False" and (old.get("reason"), old.get("message")) != (new["reason"], new["message"]):
        logger.warning("AppGroup %s/%s spec is not valid: %s: %s", *key, new["reason"], new["message"],
                       extra=about("AppGroup", *key))  # fmt: skip
        await post_event(api, involved, "Warning", new["reason"], new["message"], COMPONENT)
    elif new.get("status") == "True" and old.get("status") == "False":
        await post_event(api, involved, "Normal", new["reason"], new["message"], COMPONENT)


async def write_marked(api: Any, state: _State, stopped: Callable[[], bool]) -> None:
    """The writer: each marked AppGroup is written once its interval since the last write has passed, a few
    AppGroups at a time (never one AppGroup twice at once: a pass takes each key once). A write that fails (an API
    error, a broken connection, a timeout) is retried after :data:`RETRY_SECONDS`; anything else still lets the
    pass's other writes finish, keeps its AppGroup marked, and then ends the writer (its supervisor restarts it)."""
    loop = asyncio.get_running_loop()
    interval = state.options.status_interval_seconds
    pace = WritePace(state.options.status_writes_per_second)
    await state.cache.wait_synced()  # a status from half-listed pods would be wrong (and then corrected)
    writing = asyncio.Semaphore(WRITERS)

    def retry(key: Key) -> None:
        state.mark(key)
        state.last_write[key] = loop.time() + RETRY_SECONDS - interval

    async def write_one(key: Key) -> None:
        async with writing:
            if key not in state.bodies:
                return  # deleted while it waited for a write slot
            state.last_write[key] = loop.time()
            try:
                previous, status = await write_status(api, state, key)
            except API_ERRORS as error:
                logger.warning("AppGroup %s/%s: status not written (%s); retrying", *key, describe(error),
                               extra=about("AppGroup", *key))  # fmt: skip
                retry(key)
                return
            except BaseException:
                retry(key)
                raise
            await _announce(api, state, key, previous, status)

    while not stopped():
        state.wake.clear()
        now = loop.time()
        ready = [key for key in state.dirty if state.last_write.get(key, -interval) + interval <= now]
        due = writing_order(ready, state.bodies, state.dirty)
        due = due[: pace.take(len(due), now)]
        for key in due:
            del state.dirty[key]
        results = await asyncio.gather(*(write_one(key) for key in due if key in state.bodies), return_exceptions=True)
        failed = [result for result in results if isinstance(result, BaseException)]
        if failed:
            raise failed[0]
        waits = [state.last_write.get(key, 0) + interval - loop.time() for key in state.dirty]
        if len(due) < len(ready):  # held back by the pace
            waits.append(pace.wait())
        timeout = max(min(waits), 0.01) if waits else None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(state.wake.wait(), timeout)


def register(
    registry: kopf.OperatorRegistry,
    cache: ClusterCache,
    options: AppGroupOptions | None = None,
    supervisor: Supervisor | None = None,
) -> None:
    """Add the AppGroup handlers to ``registry``; pods and nodes are read from ``cache``; the status writer and the
    gate keeper run under ``supervisor``."""
    settings = options or AppGroupOptions()
    tasks = supervisor or Supervisor()

    @kopf.on.startup(id="appgroup_state", registry=registry)
    async def init_state(memo: kopf.Memo, **_: Any) -> None:
        state = _State(cache, settings)
        memo.appgroup = state
        state.on_changes(cache.subscribe(state.on_changes, asyncio.get_running_loop()))
        memo.appgroup_writer = tasks.start("appgroup-status", lambda: write_marked(memo.api, state, lambda: False))
        loop = asyncio.get_running_loop()  # the kept index first: it is current when the keeper hears of a change
        default = settings.plan_config.bandwidth.default_node_bandwidth
        live = LiveIndex(cache, default, loop) if settings.plans else None
        keeper = GateKeeper(cache, settings.gate_timeout_seconds, state.members, options=settings, live=live)
        memo.appgroup_gates = keeper
        keeper.on_changes(cache.subscribe(keeper.on_changes, asyncio.get_running_loop()))
        memo.appgroup_gate_task = tasks.start("appgroup-gates", lambda: keeper.run(memo.api))

    @kopf.on.cleanup(id="appgroup_writer", registry=registry)
    async def stop_writer(memo: kopf.Memo, **_: Any) -> None:
        await cancel((getattr(memo, "appgroup_writer", None), getattr(memo, "appgroup_gate_task", None)))

    @kopf.on.event(*RESOURCE, id="appgroup", registry=registry)  # type: ignore[arg-type]
    async def appgroup_event(
        type: str | None, body: kopf.Body, namespace: str, name: str, memo: kopf.Memo, **_: Any
    ) -> None:
        state: _State = memo.appgroup
        if type == "DELETED" or (body.get("metadata") or {}).get("deletionTimestamp"):
            state.forget((namespace, name))
            return
        state.set_body((namespace, name), dict(body))
