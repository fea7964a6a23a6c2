"""The live descheduler: every ``deschedulingInterval``, plan LowNodeLoad on the informers' snapshot
and evict through the ``pods/eviction`` subresource (policy/v1), so PodDisruptionBudgets hold.

The decisions are the pure planner's (:mod:`operators.engine.descheduling.lownodeload`); this shell only feeds
it the cluster, asks the API for each eviction, and tells the planner whether it happened: a 429
(a PDB's budget is spent) or a 404 (the pod is gone) skips that pod and the cycle goes on with the
next one. Every attempt is an Event on the pod and a ``descheduler_pods_evicted_total`` sample;
``dryRun`` logs the plan and evicts nothing.

With the ``NetworkRebalance`` plugin, the same cycle then runs the rebalancer
(:mod:`operators.engine.rebalancing.rebalance`) under the same eviction limits: for an AppGroup it first writes
the target layout and the moves on the AppGroup (annotation ``netaware.io/rebalance``, which the plan's release
follows), then evicts through the same path; each move is an Event (from, to, the edge cost before and after),
and the history it keeps between cycles (moves in flight, cooldowns, the moves that did not land) is this
process's: a restarted descheduler starts afresh. A dry run proposes the same moves every cycle and writes
nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from operators.api import keys
from operators.api.config.descheduler import DeschedulerPolicy
from operators.api.config.scheduler import SchedulerConfig
from operators.api.meta import format_time
from operators.controllers.descheduler_metrics import DeschedulerMetrics
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.descheduling.limits import EvictionLimits
from operators.engine.descheduling.lownodeload import Eviction, EvictionPlan, EvictionPlanner
from operators.engine.descheduling.sources import prometheus_samples
from operators.engine.planning.layout import Rebalancing, rebalancing_of
from operators.engine.rebalancing.rebalance import Move, Rebalance, after_low_node_load
from operators.engine.rebalancing.safety import History, MoveRecord, workload_of
from operators.kube import API_ERRORS, TRANSPORT_ERRORS, describe, post_event, send_json
from operators.logs import about
from operators.sources.cache import ClusterCache
from operators.sources.kinds import (
    APPGROUP_SPECS,
    FILTER_KINDS,
    NETWORKTOPOLOGIES,
    NODEMETRICS,
    NODES,
    NODESLOS,
    PODS,
    Kind,
)
from operators.sources.store import ClusterStore
from operators.supervision import Supervisor

logger = logging.getLogger("netaware.descheduler")

COMPONENT = "netaware-descheduler"


def followed_kinds(policy: DeschedulerPolicy) -> tuple[Kind, ...]:
    """What the descheduler watches: nodes and pods; NodeMetrics and NodeSLOs (the agent's measured usage) only
    when the policy reads them; what kube-scheduler's filters read when nodeFit or the rebalancer asks where a pod
    would land."""
    usage = policy.args.usage
    uses_metrics = "nodeMetric" in (usage.cpu, usage.memory)
    measured = usage.net_bandwidth == "measured" and "netBandwidth" in policy.args.resources
    rebalancing = (APPGROUP_SPECS, NETWORKTOPOLOGIES) if policy.rebalance is not None else ()
    filtering = FILTER_KINDS if policy.args.node_fit or policy.rebalance is not None else ()
    return ((NODES, PODS) + ((NODEMETRICS,) if uses_metrics else ()) + ((NODESLOS,) if measured else ()) + rebalancing
            + filtering)  # fmt: skip


MOVES_KEPT = 20  # the latest moves the AppGroup's annotation lists
LAYOUT_SEEN_SECONDS = 5.0  # a layout written is waited for in the process's cache at most this long
LAYOUT_POLL_SECONDS = 0.02


@dataclass
class Descheduler:
    api: client.ApiClient
    policy: DeschedulerPolicy
    snapshot: Callable[[], Snapshot]
    metrics: DeschedulerMetrics = field(default_factory=DeschedulerMetrics.create)
    clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)
    observations: dict[str, int] = field(default_factory=dict)  # carried between cycles (anomaly counts)
    # Asked before every eviction: still the leader and not stopping. False ends the cycle there, so an
    # old leader never finishes its plan while a new one starts its own.
    may_evict: Callable[[], bool] = lambda: True
    config: SchedulerConfig = field(default_factory=SchedulerConfig)  # the plans' (the rebalancer's costs and filters)
    history: History = field(default_factory=History)
    rebalanced: Rebalance | None = None  # the last cycle's rebalancing, as carried out
    unreachable: bool = False  # an eviction's answer was lost in this cycle: it evicts no more
    # (namespace, name) -> an AppGroup's layout as the process's cache (the release's) holds it; None: no cache
    layout_seen: Callable[[str, str], str | None] | None = None

    def _may_go_on(self) -> bool:
        return self.may_evict() and not self.unreachable

    async def cycle(self) -> EvictionPlan:
        """One descheduling cycle; returns LowNodeLoad's plan as carried out (the rebalancer's in ``rebalanced``).

        The computing (the snapshot, the planners: a second at 5,000 nodes and 100,000 pods) runs in a worker
        thread, so the loop that renews the Lease and answers the probes keeps answering meanwhile."""
        samples = await self._prometheus() if self.policy.args.usage.net_bandwidth == "prometheus" else None
        snapshot, now = await asyncio.to_thread(self.snapshot), self.clock()
        limits = EvictionLimits.of(self.policy)
        cooldown = self.policy.rebalance.cooldown_seconds if self.policy.rebalance else 0.0
        self.unreachable = False
        planner = await asyncio.to_thread(
            EvictionPlanner, snapshot, self.policy, now, self.observations, samples, limits,
            lambda pod: self.history.protects(pod, cooldown, now.timestamp()),
        )  # fmt: skip
        plan = await self._low_node_load(planner)
        if self.policy.rebalance is not None and plan.note != ABANDONED:
            await self._rebalance(snapshot, now, planner, plan)
        self.metrics.prune(snapshot)
        return plan

    async def _low_node_load(self, planner: EvictionPlanner) -> EvictionPlan:
        steps = planner.steps()
        step = await asyncio.to_thread(_advance, steps, None)
        while isinstance(step, Eviction):
            if not self._may_go_on():
                logger.warning("no longer the leader, stopping, or the API unreachable: the rest of this cycle's plan "
                               "is dropped")  # fmt: skip
                steps.close()
                return EvictionPlan(observations=self.observations, note=ABANDONED)
            step = await asyncio.to_thread(_advance, steps, await self._evict(step))
        plan = step
        self.observations = plan.observations
        for node, usage in plan.usage.items():
            for resource, percent in usage.items():
                self.metrics.utilization.labels(node, resource).set(percent)
                self.metrics.ratio.labels(node, resource).set(percent / 100)
        for node, why in plan.skipped.items():
            logger.info("node %s skipped: %s", node, why)
        if plan.note and not plan.evictions:
            logger.info("nothing to evict: %s", plan.note)
        return plan

    async def _rebalance(
        self, snapshot: Snapshot, now: datetime.datetime, planner: EvictionPlanner, plan: EvictionPlan
    ) -> None:
        args = self.policy.rebalance
        assert args is not None
        at = now.timestamp()
        landed, missed = self.history.settle(snapshot, at, args.layout_seconds)
        self.metrics.moves.labels("landed").inc(len(landed))
        self.metrics.moves.labels("missed").inc(len(missed))
        for record in missed:
            logger.warning("the move of %s (%s) to %s did not land: not proposed again", record.pod, record.workload,
                           record.target)  # fmt: skip
        found = await asyncio.to_thread(
            after_low_node_load, snapshot, self.policy, self.config, self.history, at, planner, plan
        )
        self.metrics.moves.labels("proposed").inc(len(found.moves))
        for group, cost in found.groups.items():
            for when, value in (("before", cost.before), ("after", cost.after), ("planned", cost.planned)):
                self.metrics.cost.labels(group, when).set(value)
        self.metrics.imbalance.labels("before").set(found.imbalance[0])
        self.metrics.imbalance.labels("after").set(found.imbalance[1])
        for skipped, why in sorted(found.skipped.items()):
            logger.info("rebalancer: %s skipped: %s", skipped, why)
        if not found.moves:
            logger.info("rebalancer: nothing to move: %s", found.note or "no move gains enough")
        else:
            logger.info("rebalancer: %d moves proposed (objective %.1f -> %.1f, imbalance %.1f -> %.1f)",
                        len(found.moves), *found.objective, *found.imbalance)  # fmt: skip
        by_group: dict[str, list[Move]] = {}
        for move in found.moves:
            by_group.setdefault(move.appgroup, []).append(move)
        carried: list[Move] = []
        for group, moves in sorted(by_group.items()):
            if group and not self.policy.dry_run and not await self._write_layout(snapshot, group, found, moves, at):
                self.metrics.moves.labels("refused").inc(len(moves))
                continue
            for move in moves:
                if not self._may_go_on():
                    logger.warning("no longer the leader, stopping, or the API unreachable: the rest of the "
                                   "rebalancer's moves dropped")  # fmt: skip
                    self.rebalanced = found
                    return
                if await self._evict(Eviction(move.pod, move.source, move.target, _reason(move)), "Rebalanced"):
                    carried.append(move)
                    if not self.policy.dry_run:
                        self.metrics.moves.labels("applied").inc()
                        self.history.record(await asyncio.to_thread(_record, snapshot, move, at))
                else:
                    self.metrics.moves.labels("refused").inc()
        found.moves = carried
        self.rebalanced = found

    async def _write_layout(
        self, snapshot: Snapshot, group: str, found: Rebalance, moves: list[Move], at: float
    ) -> bool:
        """The AppGroup's annotation: the target layout until ``layoutTTL`` from now, with the latest moves."""
        args = self.policy.rebalance
        assert args is not None
        namespace, name = group.split("/", 1)
        current = next(
            (g for g in snapshot.app_groups if (g.metadata.namespace, g.metadata.name) == (namespace, name)), None
        )
        written = rebalancing_of(current) if current is not None else None
        earlier = list(written.moves) if written is not None else []
        stamp = format_time(datetime.datetime.fromtimestamp(at, datetime.UTC))
        made = [{**move.to_json(), "at": stamp} for move in moves]
        annotation = Rebalancing(found.layouts[group], at + args.layout_seconds, tuple((earlier + made)[-MOVES_KEPT:]))
        body = {"metadata": {"annotations": {keys.REBALANCE: annotation.to_annotation()}}}
        path = f"/apis/{keys.APPGROUP_GROUP}/{keys.V1ALPHA1}/namespaces/{namespace}/appgroups/{name}"
        try:
            answer = await send_json(self.api, "PATCH", path, body, "application/merge-patch+json")
        except API_ERRORS as error:
            logger.warning("cannot write the rebalancer's layout on AppGroup %s (%s): its moves are dropped", group,
                           describe(error))  # fmt: skip
            return False
        if answer is None:
            return False
        if not await self._layout_in_cache(namespace, name, annotation.to_annotation()):
            logger.warning("the rebalancer's layout on AppGroup %s not seen by this process's cache within %g s: "
                           "its moves are dropped (a replacement released before it is would not follow it)",
                           group, LAYOUT_SEEN_SECONDS)  # fmt: skip
            return False
        return True

    async def _layout_in_cache(self, namespace: str, name: str, text: str) -> bool:
        """Whether the process's cache holds ``text`` as the AppGroup's layout (waited for up to
        :data:`LAYOUT_SEEN_SECONDS`): the release plans a replacement from it within milliseconds of the eviction,
        and the AppGroup's watch event and the pod's come on two streams, in either order."""
        seen = self.layout_seen
        if seen is None:
            return True
        deadline = asyncio.get_running_loop().time() + LAYOUT_SEEN_SECONDS
        while seen(namespace, name) != text:
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(LAYOUT_POLL_SECONDS)
        return True

    async def _evict(self, eviction: Eviction, reason: str = "Descheduled") -> bool:
        pod = eviction.pod
        if self.policy.dry_run:
            logger.info("dry run: would evict %s from %s: %s", pod.key, eviction.node, eviction.reason)
            self._count("dry-run", eviction)
            return True
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod.name, "namespace": pod.namespace},
        }
        path = f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction"
        try:
            answer = await send_json(self.api, "POST", path, body)
        except TRANSPORT_ERRORS as error:
            # the eviction may or may not have happened: the rest of the cycle waits for the next one, which sees
            # the pod terminating (never evicted again) or still there
            logger.warning("eviction of %s not confirmed (%s): this cycle stops here", pod.key, describe(error),
                           extra=about("Pod", pod.namespace, pod.name, node=pod.node_name))  # fmt: skip
            self._count("error", eviction)
            self.unreachable = True
            return False
        except ApiException as error:
            result = "refused" if error.status == 429 else "error"
            message = _status_message(error)
            logger.warning("eviction of %s refused (%s): %s", pod.key, error.status, message,
                           extra=about("Pod", pod.namespace, pod.name, node=pod.node_name))  # fmt: skip
            self._count(result, eviction)
            await self._event(eviction, "Warning", "EvictionRefused", f"Eviction refused ({error.status}): {message}")
            return False
        if answer is None:  # 404: the pod went away on its own
            self._count("gone", eviction)
            return False
        logger.info("evicted %s from %s: %s", pod.key, eviction.node, eviction.reason)
        self._count("success", eviction)
        by = "the rebalancer" if reason == "Rebalanced" else "LowNodeLoad"
        await self._event(eviction, "Normal", reason, f"Evicted by {by}: {eviction.reason}")
        return True

    def _count(self, result: str, eviction: Eviction) -> None:
        self.metrics.evicted.labels(result, eviction.node, eviction.pod.namespace).inc()

    async def _event(self, eviction: Eviction, kind: str, reason: str, message: str) -> None:
        pod = eviction.pod
        involved = {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
        await post_event(self.api, involved, kind, reason, message, COMPONENT)

    async def _prometheus(self) -> Mapping[str, tuple[float, float]]:
        source = self.policy.args.usage.prometheus
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
                session.get(f"{source.url.rstrip('/')}/api/v1/query", params={"query": source.query}) as response,
            ):
                return prometheus_samples(await response.json(content_type=None), source.node_label)
        except (aiohttp.ClientError, TimeoutError, ValueError) as error:
            logger.warning("Prometheus query failed (%s): every node's netBandwidth is unknown this cycle", error)
            return {}

    async def run(self, stop: asyncio.Event, synced: Callable[[], Awaitable[None]] | None = None) -> None:
        """Cycle every ``deschedulingInterval`` (once when it is 0) until ``stop`` is set, after ``synced()``
        (the cluster cache has listed every kind)."""
        if synced is not None:
            waiting = asyncio.ensure_future(synced())
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait((waiting, stopping), return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            stopping.cancel()
        while not stop.is_set():
            await self.cycle()  # a cycle that fails ends this; its supervisor starts again from a fresh snapshot
            if self.policy.descheduling_interval <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.policy.descheduling_interval)


ABANDONED = "abandoned: no longer the leader or stopping"


def _reason(move: Move) -> str:
    """The Event's words for a move: where from and to, and what it changes."""
    if move.appgroup:
        return (
            f"moved from {move.source} to {move.target} for AppGroup {move.appgroup}: edge cost "
            f"{move.cost[0]} -> {move.cost[1]} (gain {move.gain:.1f})"
        )
    return (
        f"moved from {move.source} to {move.target}: bandwidth imbalance {move.imbalance[0]:.1f} -> "
        f"{move.imbalance[1]:.1f} (gain {move.gain:.1f})"
    )


def _record(snapshot: Snapshot, move: Move, at: float) -> MoveRecord:
    owned = [pod for pod in snapshot.pods if not pod.is_terminal and workload_of(pod) == move.workload]
    on_target = sum(pod.node_name == move.target for pod in owned)
    return MoveRecord(move.pod.key, move.workload, move.pod.namespace, move.source, move.target, at, on_target,
                      len(owned))  # fmt: skip


def _advance(steps: Generator[Eviction, bool, EvictionPlan], happened: bool | None) -> Eviction | EvictionPlan:
    """LowNodeLoad's next eviction, or its finished plan (``happened``: whether the last eviction did; None at
    first). In a worker thread: a StopIteration cannot cross into the loop's future."""
    try:
        return next(steps) if happened is None else steps.send(happened)
    except StopIteration as finished:
        plan: EvictionPlan = finished.value
        return plan


def _status_message(error: ApiException) -> str:
    try:
        status = json.loads(error.body or "{}")
    except ValueError:
        return str(error.reason)
    causes = (status.get("details") or {}).get("causes") or []
    return "; ".join([str(status.get("message") or error.reason), *(str(c.get("message")) for c in causes)])


def layouts_in(cache: ClusterStore) -> Callable[[str, str], str | None]:
    """An AppGroup's rebalance annotation as ``cache`` holds it (:attr:`Descheduler.layout_seen`)."""

    def seen(namespace: str, name: str) -> str | None:
        group = cache.raw(APPGROUP_SPECS, namespace, name)
        annotations = ((group or {}).get("metadata") or {}).get("annotations") or {}
        found = annotations.get(keys.REBALANCE)
        return found if isinstance(found, str) else None

    return seen


async def run_descheduler(
    api_factory: Callable[[], Awaitable[client.ApiClient]],
    policy: DeschedulerPolicy,
    cache: ClusterCache,
    stop: asyncio.Event,
    metrics: DeschedulerMetrics | None = None,
    may_evict: Callable[[], bool] = lambda: True,
    config: SchedulerConfig | None = None,
    supervisor: Supervisor | None = None,
) -> None:
    """The component as ``netaware run`` starts it: cycles on the process's cluster cache (which follows
    :func:`followed_kinds`) until ``stop``, under ``supervisor`` (a failed cycle: the loop starts again, with what
    it carries between cycles); ``config``: the plans' scheduler configuration (the rebalancer's)."""
    api = await api_factory()
    descheduler = Descheduler(api, policy, cache.snapshot, metrics or DeschedulerMetrics.create(), may_evict=may_evict,
                              config=config or SchedulerConfig(), layout_seen=layouts_in(cache))  # fmt: skip

    async def cycles() -> None:
        await descheduler.run(stop, cache.wait_synced)
        await stop.wait()  # a single cycle (interval 0) done: nothing more to do, which is no failure

    try:
        await (supervisor or Supervisor()).run("descheduler", cycles, stop.is_set)
    finally:
        await api.close()
