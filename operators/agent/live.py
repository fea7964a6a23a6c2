"""`netaware agent` against a cluster (imperative shell): its node, its NodeSLO and the pods on its node through one
list + watch (field selectors), a pass on every change (batched) and every report interval, the measurements as
metrics and as the NodeSLO's ``status.networkUsage``.

* **Passes** run on one worker thread (the netlink socket is not shared between threads); a change that arrives
  during a pass brings one more pass, never a queue of them.
* **Problems** (a foreign qdisc, an impossible NodeSLO, pods without addresses) are logged and posted as one
  Warning Event each time the set of problems changes, on the node (``NetworkQOSNotEnforced``).
* **Usage** is written by merge patch of ``nodeslos/status`` (only ``networkUsage``), at most once per report
  interval and only when :func:`~operators.engine.enforcement.report.worth_writing` says so.
* **Capacity** (``--publish-capacity``): once, a node without ``node.koordinator.sh/network-bandwidth`` gets the
  interface's speed; a NIC without a speed is an Event, never 0.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import datetime
import logging
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, Metric

from operators.agent.enforce import Backend, KernelOps, Meter, NodePlanner, PassResult
from operators.api import keys
from operators.api.config.controllers import NodeSLOOptions
from operators.api.nodeslo import NetworkUsage
from operators.api.quantity import Quantity
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.enforcement.plan import node_plan
from operators.engine.enforcement.report import usage_report, worth_writing
from operators.engine.status.reconcile import node_slo_as_written
from operators.kube import API_ERRORS, MERGE_PATCH, describe, post_event, send_json
from operators.logs import about
from operators.sources.cache import ClusterCache
from operators.sources.kinds import NODES, NODESLOS, PODS, Kind
from operators.sources.trim import trim_agent_pod
from operators.supervision import Supervisor

logger = logging.getLogger("netaware.agent")

COMPONENT = "netaware-agent"
BATCH_SECONDS = 0.05  # changes arriving this close together are one pass
MAX_AGE_INTERVALS = 30  # a usage report is rewritten at least every 30 report intervals, changed or not


@dataclass(frozen=True)
class AgentOptions:
    node: str
    default_total: Quantity | None = None
    publish_capacity: bool = False
    resync: float = 60.0
    report_interval: float = 10.0
    once: bool = False
    dry_run: bool = False
    daemonset: str = ""  # "namespace/name": on stop, clean up when it is gone (uninstalled), keep shaping otherwise


def agent_kinds(node: str) -> tuple[Kind, ...]:
    """Its node, the pods bound to it, its NodeSLO: nothing else is listed or watched."""
    by_name = f"metadata.name={node}"
    return (
        dataclasses.replace(NODES, fields=by_name),
        dataclasses.replace(PODS, trim=trim_agent_pod, fields=f"spec.nodeName={node}"),
        dataclasses.replace(NODESLOS, fields=by_name),
    )


def snapshot_planner(
    snapshot: Snapshot, node_name: str, default: Quantity | None, now: datetime.datetime | None = None
) -> NodePlanner | None:
    """The plan for ``node_name`` from ``snapshot`` given the leaf ids the kernel holds; None: no such node. The
    node's NodeSLO is the one ``netaware reconcile`` would write (the live agent reads what the controller wrote):
    the snapshot's ``slo-controller-config`` applied."""
    node = snapshot.node_by_name.get(node_name)
    if node is None:
        return None
    when = now or datetime.datetime.now(datetime.UTC)
    slo = node_slo_as_written(snapshot, node, NodeSLOOptions(default_total=default), when)
    pods = snapshot.pods_by_node.get(node_name, ())
    return lambda previous: node_plan(node, slo, pods, default, previous)


class KernelCounters:
    """The kernel's byte counters of the classes and the pods' leaves, as Prometheus counters
    (``netaware_agent_class_bytes_total``, ``netaware_agent_pod_bytes_total``): each scrape reports the values of the
    last pass (a class made again starts from 0, which ``rate()`` reads as a counter reset)."""

    def __init__(self) -> None:
        self.classes: dict[tuple[str, str], int] = {}  # (direction, class) -> bytes
        self.pods: dict[tuple[str, str], int] = {}  # (direction, namespace/name) -> bytes

    def collect(self) -> Iterator[Metric]:
        for name, text, labels, counted in (
            ("netaware_agent_class_bytes", "Bytes the class has sent", ("direction", "qos_class"), self.classes),
            ("netaware_agent_pod_bytes", "Bytes the pod's leaf has sent", ("direction", "pod"), self.pods),
        ):
            family = CounterMetricFamily(name, f"{text} (kernel counter).", labels=labels)
            for values, value in sorted(counted.items()):
                family.add_metric(values, value)
            yield family


class AgentMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.counters = KernelCounters()
        self.registry.register(self.counters)
        labels = ("direction", "qos_class")
        # Deprecated (0.2.0, removed in 0.3.0): the rates the agent computes (rate(..._bytes_total[1m]) * 8 gives
        # them). The gauges netaware_agent_{class,pod}_bytes are gone: a gauge and a counter of one family name
        # cannot share an exposition.
        self.class_rate = Gauge(
            "netaware_agent_class_rate_bits_per_second",
            "Deprecated: rate(netaware_agent_class_bytes_total) * 8. The class's rate over the last interval.",
            labels,
            registry=self.registry,
        )
        self.pod_rate = Gauge(
            "netaware_agent_pod_rate_bits_per_second",
            "Deprecated: rate(netaware_agent_pod_bytes_total) * 8. The pod's rate over the last interval.",
            ("direction", "pod"),
            registry=self.registry,
        )
        self.node_rate = Gauge(
            "netaware_agent_node_rate_bits_per_second",
            "Deprecated: sum(rate(netaware_agent_class_bytes_total) * 8). The node's rate through the interface.",
            ("direction",),
            registry=self.registry,
        )
        self.operations = Counter(
            "netaware_agent_netlink_operations",
            "Kernel changes made (netlink requests, nftables elements).",
            registry=self.registry,
        )
        self.passes = Histogram(
            "netaware_agent_pass_seconds",
            "Time per enforcement pass.",
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.problems = Gauge("netaware_agent_problems", "Problems of the last pass.", registry=self.registry)
        self.pods = Gauge("netaware_agent_pods", "Pods classified.", registry=self.registry)
        self.writes = Counter("netaware_agent_usage_writes", "NodeSLO networkUsage writes.", registry=self.registry)
        self.enforced = Gauge(
            "netaware_agent_enforced",
            "1 when the kernel holds the node's plan in both directions.",
            registry=self.registry,
        )


class Agent:
    def __init__(
        self, kernel: KernelOps, backend: Backend, cache: ClusterCache, options: AgentOptions, metrics: AgentMetrics
    ):
        self.kernel, self.backend, self.cache, self.options, self.metrics = kernel, backend, cache, options, metrics
        self.meter = Meter()
        self.last: PassResult | None = None
        self.reported: tuple[str, ...] = ()
        self.usage_written: NetworkUsage | None = None
        self.capacity_checked = False
        self._dirty = asyncio.Event()
        self._worker = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="netlink", initializer=_without_stop_signals
        )

    @property
    def ready(self) -> bool:
        return self.cache.ready and self.last is not None

    def _planner(self) -> NodePlanner | None:
        return snapshot_planner(self.cache.snapshot(), self.options.node, self.options.default_total)

    async def run(self, api: Any, stop: asyncio.Event, supervisor: Supervisor | None = None) -> None:
        """Enforce on every change (and every resync) until ``stop``; the passes run under ``supervisor`` (a pass that
        fails is logged, counted and started again); on stop, clean up if the agent is being uninstalled."""
        loop = asyncio.get_running_loop()

        def changed(_: object) -> None:
            loop.call_soon_threadsafe(self._dirty.set)

        self.cache.subscribe(changed, loop)
        await self.cache.wait_synced()

        async def passes() -> None:
            next_report = 0.0
            while not stop.is_set():
                self._dirty.clear()
                measure = time.monotonic() >= next_report
                await self.once(api, measure)
                if measure:
                    next_report = time.monotonic() + self.options.report_interval
                if self.options.once:
                    return
                wait = max(0.0, min(next_report - time.monotonic(), self.options.resync))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(wait):
                        await _first(self._dirty.wait(), stop.wait())
                await asyncio.sleep(BATCH_SECONDS)

        try:
            if self.options.once:
                await passes()  # one pass: its failure is the command's
            else:
                await (supervisor or Supervisor()).run("agent", passes, stop.is_set)
        finally:
            try:
                await self._cleanup_if_uninstalled(api)
            except Exception as error:  # the stop path must finish whatever the API or the kernel says
                logger.warning(
                    "node %s: the cleanup on stop did not complete: %s: %s",
                    self.options.node,
                    type(error).__name__,
                    error,
                )
            self._worker.shutdown(wait=True)

    async def _cleanup_if_uninstalled(self, api: Any) -> None:
        """On stop: when the agent's DaemonSet is gone or being deleted (``helm uninstall``), remove what the
        agent made; on a rolling update or a restart (the DaemonSet is there), leave shaping in place. An agent
        whose ServiceAccount (401) or permission (403) is already gone is being uninstalled as well: Helm deletes
        the release's RBAC and ServiceAccounts right after the DaemonSet, before its pods have stopped."""
        if not self.options.daemonset or self.options.dry_run:
            return
        namespace, name = self.options.daemonset.split("/", 1)
        try:
            found = await send_json(api, "GET", f"/apis/apps/v1/namespaces/{namespace}/daemonsets/{name}", None)
        except ApiException as error:
            if error.status not in (401, 403, 404):
                raise
            found = None
        if found and not (found.get("metadata") or {}).get("deletionTimestamp"):
            return
        loop = asyncio.get_running_loop()
        removed = await loop.run_in_executor(self._worker, self.backend.cleanup)
        logger.info("node %s: DaemonSet %s is gone; removed %s", self.options.node, self.options.daemonset, removed)

    async def once(self, api: Any, measure: bool) -> PassResult | None:
        planner = self._planner()
        if planner is None:
            await self._report(api, (f"node {self.options.node} is not listed (deleted, or not this agent's node)",))
            return None
        started = time.perf_counter()
        result = await asyncio.get_running_loop().run_in_executor(
            self._worker, lambda: self.backend.enforce(planner, self.options.dry_run)
        )
        self.metrics.passes.observe(time.perf_counter() - started)
        self.metrics.operations.inc(result.operations)
        self.metrics.problems.set(len(result.problems))
        self.metrics.enforced.set(1 if result.applied else 0)
        self.metrics.pods.set(len(next(iter(result.plan.directions.values())).pods) if result.plan.directions else 0)
        self.last = result
        if result.operations:
            logger.info("node %s: %d changes made", self.options.node, result.operations)
        await self._report(api, tuple(result.problems))
        if measure and self.backend.measures:
            await self._measure(api, result)
        if self.options.publish_capacity and not self.capacity_checked:
            await self._publish_capacity(api)
        return result

    async def _report(self, api: Any, problems: tuple[str, ...]) -> None:
        if problems == self.reported:
            return
        self.reported = problems
        for problem in problems:
            logger.warning("node %s: %s", self.options.node, problem, extra=about("Node", name=self.options.node))
        if problems:
            involved = {"apiVersion": "v1", "kind": "Node", "name": self.options.node}
            message = "; ".join(problems)
            await post_event(api, involved, "Warning", "NetworkQOSNotEnforced", message, COMPONENT)

    async def _measure(self, api: Any, result: PassResult) -> None:
        rates = self.meter.read(result.plan, result.counters, result.counted_at)
        for direction, counted in result.counters.items():
            directed = result.plan.directions.get(direction)
            if directed is None:
                continue
            for klass in directed.classes:
                self.metrics.counters.classes[(direction, klass.name)] = counted.get(klass.minor, 0)
        leaves: dict[tuple[str, str], int] = {}  # a deleted pod's series goes with it
        for direction, counted in result.counters.items():
            directed = result.plan.directions.get(direction)
            for pod in directed.pods if directed is not None else ():
                leaves[(direction, pod.key)] = counted.get(pod.minor, 0)
        self.metrics.counters.pods = leaves
        if rates is None:
            return
        for direction, rate in rates.node.items():
            self.metrics.node_rate.labels(direction).set(rate)
        for direction, classes in rates.classes.items():
            for name, rate in classes.items():
                self.metrics.class_rate.labels(direction, name).set(rate)
        self.metrics.pod_rate.clear()
        for direction, pods in rates.pods.items():
            for key, rate in pods.items():
                self.metrics.pod_rate.labels(direction, key).set(rate)
        now = datetime.datetime.now(datetime.UTC)
        report = usage_report(rates, now)
        total = next(iter(result.plan.directions.values())).total
        max_age = MAX_AGE_INTERVALS * self.options.report_interval
        if self.options.dry_run or not worth_writing(self.usage_written, report, total, now, max_age):
            return
        if self.cache.raw(NODESLOS, "", self.options.node) is None:
            return  # no NodeSLO to report in (the NodeSLO controller or Koordinator makes it)
        body = {"status": {"networkUsage": report.to_wire()}}
        path = f"/apis/{keys.SLO_GROUP}/{keys.V1ALPHA1}/nodeslos/{self.options.node}/status"
        try:
            await send_json(api, "PATCH", path, body, MERGE_PATCH)
        except API_ERRORS as error:
            logger.warning("node %s: networkUsage not written: %s", self.options.node, describe(error),
                           extra=about("NodeSLO", name=self.options.node, node=self.options.node))  # fmt: skip
            return
        self.usage_written = report
        self.metrics.writes.inc()

    async def _publish_capacity(self, api: Any) -> None:
        self.capacity_checked = True
        node = self.cache.raw(NODES, "", self.options.node) or {}
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        if keys.NODE_BANDWIDTH_KOORDINATOR in annotations:
            return
        # sysfs (or, with --netns, a subprocess of up to 10 s): in the netlink thread, never on the event loop
        speed = await asyncio.get_running_loop().run_in_executor(self._worker, self.kernel.speed)
        involved = {"apiVersion": "v1", "kind": "Node", "name": self.options.node}
        if speed is None:
            message = (
                f"--publish-capacity: /sys/class/net/{self.kernel.interface}/speed gives no speed (a virtual NIC); "
                f"set {keys.NODE_BANDWIDTH_KOORDINATOR} on the node"
            )
            await post_event(api, involved, "Warning", "NetworkSpeedUnknown", message, COMPONENT)
            return
        patch = {"metadata": {"annotations": {keys.NODE_BANDWIDTH_KOORDINATOR: str(speed)}}}
        try:
            await send_json(api, "PATCH", f"/api/v1/nodes/{self.options.node}", patch, MERGE_PATCH)
        except API_ERRORS as error:
            self.capacity_checked = False  # asked again after the next pass
            logger.warning("node %s: capacity not published: %s", self.options.node, describe(error),
                           extra=about("Node", name=self.options.node))  # fmt: skip


def _without_stop_signals() -> None:
    """The netlink thread blocks SIGTERM and SIGINT (the main thread still gets them). pyroute2 opens a socket per
    thread, and in a network namespace (``--netns``) it forks a child to make it, then stops the child with
    SIGTERM: a child that caught it would write it to the event loop's wakeup fd, which it shares with this
    process — the agent stopped itself, now and then, just after starting. The child inherits the mask."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})


async def _first(*waits: Any) -> None:
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
