"""`netaware probe`: on each node, a TCP request/response endpoint and a measurer of round trips to its peers,
the way netperf's TCP_RR does (a persistent connection, a 1-byte request, a 1-byte response, many
transactions), publishing its own row of P90 latencies for the NetworkTopology controller.

* **Peers** are the probe DaemonSet's pods (node name and pod IP) in the probe's namespace, and their nodes'
  zones, from one list + watch (:class:`~operators.sources.cache.ClusterCache`); the rule for which peers a
  round measures, and the row, are :mod:`operators.engine.measurement.probe`.
* **Bounded load**: each round measures its peers ``concurrency`` at a time, ``transactions`` round trips
  each over one connection; rounds are ``interval`` seconds apart. With the defaults (10 transactions per
  peer per 5 s) a peer costs about 4 bytes of payload per second (plus TCP/IP headers: ~50 packets a
  minute). Every connect and every round trip has a ``timeout``; failures are counted, never fatal.
* **Writes**: at most one per ``report_interval`` and only when the row changed (create, else replace with
  the resourceVersion read), so a steady network writes nothing. A peer not measured for ``ttl`` seconds
  leaves the row.
* **The endpoint** answers every byte with one byte, at most ``MAX_CONNECTIONS`` connections, each closed
  after ``IDLE_SECONDS`` without a request; ``delay`` (tests only) holds each answer that long.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from operators.engine.cluster.objects import Node
from operators.engine.measurement.probe import (
    Peer,
    RttWindow,
    chosen_peers,
    configmap,
    configmap_name,
    row,
)
from operators.kube import API_ERRORS, describe, read_json, send_json
from operators.logs import about
from operators.sources.cache import ClusterCache
from operators.sources.kinds import NODES, Kind
from operators.sources.trim import trim_probe_pod
from operators.supervision import Supervisor

logger = logging.getLogger("netaware.probe")

MAX_CONNECTIONS = 1024
IDLE_SECONDS = 60.0
WRITE_SECONDS = 10.0
REQUEST = b"r"
RESPONSE = b"R"


@dataclass(frozen=True)
class ProbeOptions:
    node: str
    namespace: str  # the NetworkTopology's: where the rows go
    topology: str
    peer_namespace: str  # where the probe DaemonSet's pods are
    peer_selector: str
    port: int = 8765
    listen_address: str = "0.0.0.0"
    peers_per_zone: int | None = None
    interval: float = 5.0
    transactions: int = 10
    concurrency: int = 8
    timeout: float = 1.0
    report_interval: float = 30.0
    ttl: float = 300.0
    delay: float = 0.0  # tests: hold every answer this long


def peer_kind(namespace: str, selector: str) -> Kind:
    """The probe DaemonSet's pods in its own namespace (namespaced list: RBAC in one namespace)."""
    return Kind("pods", f"/api/v1/namespaces/{namespace}/pods", "v1", "Pod", trim_probe_pod, selector)


@dataclass
class ProbeMetrics:
    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        self.rtt = Histogram(
            "netaware_probe_rtt_seconds",
            "Round trips to peers, by the peer's zone.",
            ["zone"],
            registry=self.registry,
            buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1),
        )
        self.failures = Counter(
            "netaware_probe_failures", "Round trips that failed or timed out, by the peer's zone.", ["zone"],
            registry=self.registry,
        )  # fmt: skip
        self.writes = Counter("netaware_probe_row_writes", "Writes of this node's row.", registry=self.registry)
        self.peers = Gauge("netaware_probe_peers", "Peers measured in the last round.", registry=self.registry)
        self.confirmed = Gauge(
            "netaware_probe_row_confirmed_timestamp_seconds",
            "Unix time this node's row last held the current measurements (just written, or unchanged since its last "
            "write); an old value: the row is stale (writes failing, or no round finishing).",
            registry=self.registry,
        )


async def serve_endpoint(host: str, port: int, delay: float = 0.0) -> asyncio.Server:
    """The request/response endpoint: one byte back for every byte received."""
    connections = 0

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        _no_delay(writer)
        try:
            if connections > MAX_CONNECTIONS:
                return
            while True:
                request = await asyncio.wait_for(reader.read(64), IDLE_SECONDS)
                if not request:
                    return
                if delay:
                    await asyncio.sleep(delay)
                writer.write(RESPONSE * len(request))
                await writer.drain()
        except (TimeoutError, ConnectionError):
            return
        finally:
            connections -= 1
            writer.close()
            with contextlib.suppress(ConnectionError, OSError, TimeoutError):
                await asyncio.wait_for(writer.wait_closed(), 1.0)  # a peer that never acknowledges holds nothing

    return await asyncio.start_server(answer, host, port, limit=1024)


def _no_delay(writer: asyncio.StreamWriter) -> None:
    """One small segment per transaction, sent at once (netperf's TCP_RR does the same with -D)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Prober:
    """The measuring and publishing side of one node's probe."""

    def __init__(
        self, options: ProbeOptions, cache: ClusterCache, metrics: ProbeMetrics, clock: Callable[[], float] = time.time
    ) -> None:
        self.options = options
        self.cache = cache
        self.metrics = metrics
        self.clock = clock
        self.kind = peer_kind(options.peer_namespace, options.peer_selector)
        self.windows: dict[str, RttWindow] = {}
        self.last_seen: dict[str, float] = {}
        self.connections: dict[Peer, tuple[asyncio.StreamReader, asyncio.StreamWriter]] = {}
        self.written: dict[str, str] | None = None
        self.last_write = -float("inf")
        self.round = 0

    def peers(self) -> list[Peer]:
        zones = {node.name: node.zone for node in self.cache.objects(NODES)}
        found = []
        for pod in self.cache.objects(self.kind):
            address = ((pod.raw.get("status") or {}).get("podIP")) or ""
            if pod.node_name and address and pod.phase in ("Running", "Pending"):
                found.append(Peer(pod.node_name, zones.get(pod.node_name, ""), address, self.options.port))
        return found

    @property
    def zone(self) -> str:
        node: Node | None = self.cache.get(NODES, "", self.options.node)
        return node.zone if node is not None else ""

    async def measure(self, peer: Peer) -> None:
        """``transactions`` round trips over the peer's connection (opened when missing, closed on failure)."""
        options = self.options
        try:
            held = self.connections.get(peer)
            if held is None:
                held = await asyncio.wait_for(asyncio.open_connection(peer.address, peer.port), options.timeout)
                _no_delay(held[1])
                self.connections[peer] = held
            reader, writer = held
            window = self.windows.setdefault(peer.node, RttWindow())
            self.metrics.failures.labels(peer.zone)  # the zone's failure series from its first peer on (0 is data)
            for _ in range(options.transactions):
                started = time.perf_counter()
                writer.write(REQUEST)
                await writer.drain()
                answer = await asyncio.wait_for(reader.readexactly(1), options.timeout)
                if answer != RESPONSE:
                    raise ConnectionError(f"unexpected answer {answer!r}")
                rtt = time.perf_counter() - started
                window.add(rtt)
                self.metrics.rtt.labels(peer.zone).observe(rtt)
            self.last_seen[peer.node] = self.clock()
        except (TimeoutError, OSError, ConnectionError, asyncio.IncompleteReadError) as error:
            self.metrics.failures.labels(peer.zone).inc()
            logger.debug("probe to %s (%s:%s) failed: %s", peer.node, peer.address, peer.port, error)
            self._close(peer)

    def _close(self, peer: Peer) -> None:
        held = self.connections.pop(peer, None)
        if held is not None:
            held[1].close()

    async def measure_round(self) -> None:
        options = self.options
        peers = chosen_peers(options.node, self.zone, self.peers(), options.peers_per_zone, self.round)
        self.round += 1
        self.metrics.peers.set(len(peers))
        for gone in set(self.connections) - set(peers):
            self._close(gone)
        limit = asyncio.Semaphore(options.concurrency)

        async def one(peer: Peer) -> None:
            async with limit:
                await self.measure(peer)

        await asyncio.gather(*(one(peer) for peer in peers))

    def current_row(self) -> dict[str, str]:
        p90s = {node: window.p90() for node, window in self.windows.items()}
        known = {node: value for node, value in p90s.items() if value is not None}
        return row(self.options.node, known, self.last_seen, self.clock(), self.options.ttl)

    async def publish(self, api: Any) -> bool:
        """Write the row if it changed and the report interval has passed; True when written."""
        data = self.current_row()
        now = self.clock()
        if data == self.written:
            self.metrics.confirmed.set(time.time())
            return False
        if now - self.last_write < self.options.report_interval:
            return False
        options = self.options
        node: Node | None = self.cache.get(NODES, "", options.node)
        body = configmap(options.namespace, options.topology, options.node, node.uid if node else "", data)
        path = f"/api/v1/namespaces/{options.namespace}/configmaps"
        name = configmap_name(options.topology, options.node)
        try:
            async with asyncio.timeout(WRITE_SECONDS):  # a slow API server delays the row, never the shutdown
                existing = await read_json(api, f"{path}/{name}")
                if existing is None:
                    await send_json(api, "POST", path, body)
                else:
                    body["metadata"]["resourceVersion"] = (existing.get("metadata") or {}).get("resourceVersion")
                    await send_json(api, "PUT", f"{path}/{name}", body)
        except TimeoutError:
            logger.warning(
                "row %s/%s not written within %g s; retried next round", options.namespace, name, WRITE_SECONDS
            )
            return False
        except API_ERRORS as error:
            logger.warning("row %s/%s not written (%s); retried next round", options.namespace, name, describe(error),
                           extra=about("ConfigMap", options.namespace, name, node=options.node))  # fmt: skip
            return False
        self.written, self.last_write = data, now
        self.metrics.writes.inc()
        self.metrics.confirmed.set(time.time())
        return True

    async def run(self, api: Any, stop: asyncio.Event, supervisor: Supervisor | None = None) -> None:
        """Measure and publish every interval until ``stop``; the rounds run under ``supervisor``."""
        synced = asyncio.ensure_future(self.cache.wait_synced())
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait((synced, stopped), return_when=asyncio.FIRST_COMPLETED)  # SIGTERM before the first list
        for waiter in (synced, stopped):
            waiter.cancel()

        async def rounds() -> None:
            while not stop.is_set():
                started = time.monotonic()
                await self.measure_round()
                await self.publish(api)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), max(self.options.interval - (time.monotonic() - started), 0.0))

        try:
            await (supervisor or Supervisor()).run("probe", rounds, stop.is_set)
        finally:
            for peer in list(self.connections):
                self._close(peer)


def probe_cache(options: ProbeOptions) -> ClusterCache:
    return ClusterCache((NODES, peer_kind(options.peer_namespace, options.peer_selector)))
