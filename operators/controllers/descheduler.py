"""The live descheduler: every ``deschedulingInterval``, plan LowNodeLoad on the informers' snapshot
and evict through the ``pods/eviction`` subresource (policy/v1), so PodDisruptionBudgets hold.

The decisions are the pure planner's (:mod:`operators.engine.descheduling.lownodeload`); this shell only feeds
it the cluster, asks the API for each eviction, and tells the planner whether it happened: a 429
(a PDB's budget is spent) or a 404 (the pod is gone) skips that pod and the cycle goes on with the
next one. Every attempt is an Event on the pod and a ``descheduler_pods_evicted_total`` sample;
``dryRun`` logs the plan and evicts nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, Counter, Gauge

from operators.api.config.descheduler import DeschedulerPolicy
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.descheduling.lownodeload import Eviction, Plan, Planner
from operators.engine.descheduling.sources import prometheus_samples
from operators.kube import post_event, send_json
from operators.sources.cache import NODEMETRICS, NODES, NODESLOS, PODS, ClusterCache, Kind

logger = logging.getLogger("netaware.descheduler")

COMPONENT = "netaware-descheduler"


def followed_kinds(policy: DeschedulerPolicy) -> tuple[Kind, ...]:
    """What the descheduler watches: nodes and pods; NodeMetrics and NodeSLOs (the agent's measured usage) only
    when the policy reads them."""
    usage = policy.args.usage
    uses_metrics = "nodeMetric" in (usage.cpu, usage.memory)
    measured = usage.net_bandwidth == "measured" and "netBandwidth" in policy.args.resources
    return (NODES, PODS) + ((NODEMETRICS,) if uses_metrics else ()) + ((NODESLOS,) if measured else ())


@dataclass
class DeschedulerMetrics:
    registry: CollectorRegistry
    evicted: Counter
    utilization: Gauge

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> DeschedulerMetrics:
        registry = registry or CollectorRegistry()
        return cls(
            registry,
            Counter(
                "descheduler_pods_evicted",
                "Eviction attempts by the descheduler, by result (success, refused, gone, error, dry-run).",
                ["result", "node", "namespace"],
                registry=registry,
            ),
            Gauge(
                "netaware_node_utilization_percent",
                "Each node's usage of the policy's resources (netBandwidth included), percent, as of the last cycle.",
                ["node", "resource"],
                registry=registry,
            ),
        )


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

    async def cycle(self) -> Plan:
        """One descheduling cycle; returns the plan as carried out."""
        samples = await self._prometheus() if self.policy.args.usage.net_bandwidth == "prometheus" else None
        steps = Planner(self.snapshot(), self.policy, self.clock(), self.observations, samples).steps()
        try:
            eviction = next(steps)
            while True:
                if not self.may_evict():
                    logger.warning("no longer the leader (or stopping): the rest of this cycle's plan is dropped")
                    steps.close()
                    return Plan(observations=self.observations, note="abandoned: no longer the leader or stopping")
                eviction = steps.send(await self._evict(eviction))
        except StopIteration as finished:
            plan: Plan = finished.value
        self.observations = plan.observations
        for node, usage in plan.usage.items():
            for resource, percent in usage.items():
                self.metrics.utilization.labels(node, resource).set(percent)
        for node, why in plan.skipped.items():
            logger.info("node %s skipped: %s", node, why)
        if plan.note and not plan.evictions:
            logger.info("nothing to evict: %s", plan.note)
        return plan

    async def _evict(self, eviction: Eviction) -> bool:
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
        except ApiException as error:
            result = "refused" if error.status == 429 else "error"
            message = _status_message(error)
            logger.warning("eviction of %s refused (%s): %s", pod.key, error.status, message)
            self._count(result, eviction)
            await self._event(eviction, "Warning", "EvictionRefused", f"Eviction refused ({error.status}): {message}")
            return False
        if answer is None:  # 404: the pod went away on its own
            self._count("gone", eviction)
            return False
        logger.info("evicted %s from %s: %s", pod.key, eviction.node, eviction.reason)
        self._count("success", eviction)
        await self._event(eviction, "Normal", "Descheduled", f"Evicted by LowNodeLoad: {eviction.reason}")
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
            try:
                await self.cycle()
            except Exception:  # a failed cycle is logged; the next one starts from a fresh snapshot
                logger.exception("descheduling cycle failed")
            if self.policy.descheduling_interval <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.policy.descheduling_interval)


def _status_message(error: ApiException) -> str:
    try:
        status = json.loads(error.body or "{}")
    except ValueError:
        return str(error.reason)
    causes = (status.get("details") or {}).get("causes") or []
    return "; ".join([str(status.get("message") or error.reason), *(str(c.get("message")) for c in causes)])


async def run_descheduler(
    api_factory: Callable[[], Awaitable[client.ApiClient]],
    policy: DeschedulerPolicy,
    cache: ClusterCache,
    stop: asyncio.Event,
    metrics: DeschedulerMetrics | None = None,
    may_evict: Callable[[], bool] = lambda: True,
) -> None:
    """The component as ``netaware run`` starts it: cycles on the process's cluster cache (which follows
    :func:`followed_kinds`) until ``stop``."""
    api = await api_factory()
    descheduler = Descheduler(api, policy, cache.snapshot, metrics or DeschedulerMetrics.create(), may_evict=may_evict)
    try:
        await descheduler.run(stop, cache.wait_synced)
        await stop.wait()
    finally:
        await api.close()
