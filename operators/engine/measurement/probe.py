"""What `netaware probe` measures and writes, as pure functions: round-trip percentiles, which peers a node
measures, and the ConfigMap row it publishes.

* **P90** of a sliding window of round trips (nearest rank: the smallest sample with at least 90 % of the
  window at or below it), reported as upstream's producer does: ``int(p90 in µs / 1000)`` milliseconds with
  a floor of 1 (``runNetperfConfigmapV2.pl``).
* **Peers.** Every peer in the node's own zone, and per other zone either all its peers or ``per_zone`` of
  them, rotating by ``round``: round r takes the zone's peers (sorted by node name) from position
  ``r * per_zone`` on, wrapping, so that every pair is measured within ``ceil(peers / per_zone)`` rounds
  while the work per round is O(zones x per_zone).
* **Row.** One ConfigMap per origin node, in the NetworkTopology's namespace, labelled
  ``networktopology.diktyo.x-k8s.io/netperf=<NetworkTopology>`` (which the controller reads), keys in upstream's
  format ``netperf.p90.latency.milliseconds.origin.<node>.destination.<node>``, owned by the Node (the garbage
  collector deletes a removed node's row). A destination not measured for ``ttl`` seconds leaves the row.
"""

from __future__ import annotations

import hashlib
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.api import keys

WINDOW = 100  # round trips a P90 is taken over
MAX_NAME = 253


class RttWindow:
    """The last ``size`` round trips to one peer, in seconds."""

    def __init__(self, size: int = WINDOW) -> None:
        self.samples: deque[float] = deque(maxlen=size)

    def add(self, seconds: float) -> None:
        self.samples.append(seconds)

    def p90(self) -> float | None:
        return p90(self.samples) if self.samples else None


def p90(samples: Iterable[float]) -> float:
    """Nearest-rank 90th percentile."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("no samples")
    return ordered[max(math.ceil(0.9 * len(ordered)) - 1, 0)]


def reported_ms(p90_seconds: float) -> int:
    """Integer milliseconds as upstream's producer writes them: truncated, at least 1."""
    return max(int(p90_seconds * 1_000_000) // 1000, 1)


@dataclass(frozen=True, order=True)
class Peer:
    node: str
    zone: str
    address: str
    port: int


def chosen_peers(node: str, zone: str, peers: Sequence[Peer], per_zone: int | None, round_: int) -> list[Peer]:
    """The peers ``node`` measures in round ``round_`` (see the module docstring); never itself."""
    by_zone: dict[str, list[Peer]] = {}
    for peer in peers:
        if peer.node != node:
            by_zone.setdefault(peer.zone, []).append(peer)
    chosen: list[Peer] = []
    for peer_zone, members in sorted(by_zone.items()):
        members.sort()
        if peer_zone == zone or per_zone is None or len(members) <= per_zone:
            chosen.extend(members)
            continue
        start = (round_ * per_zone) % len(members)
        chosen.extend(members[(start + offset) % len(members)] for offset in range(per_zone))
    return chosen


def row_key(origin: str, destination: str) -> str:
    return f"{keys.NETPERF_NODE_KEY_PREFIX}{origin}.destination.{destination}"


def row(
    origin: str, p90s: Mapping[str, float], last_seen: Mapping[str, float], now: float, ttl: float
) -> dict[str, str]:
    """The ConfigMap data of ``origin``: one key per destination with a P90 that was measured within ``ttl``."""
    return {
        row_key(origin, destination): str(reported_ms(seconds))
        for destination, seconds in sorted(p90s.items())
        if now - last_seen.get(destination, -math.inf) <= ttl
    }


def configmap_name(topology: str, node: str) -> str:
    """``netperf-<topology>-<node>``, shortened with a hash when longer than a name may be."""
    name = f"netperf-{topology}-{node}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[: MAX_NAME - 11]}-{digest}"


def configmap(namespace: str, topology: str, node: str, node_uid: str, data: Mapping[str, str]) -> dict[str, Any]:
    """The row as a ConfigMap, labelled for the NetworkTopology and owned by its Node."""
    meta: dict[str, Any] = {
        "name": configmap_name(topology, node),
        "namespace": namespace,
        "labels": {keys.NETPERF_CONFIGMAP_LABEL: topology, "app.kubernetes.io/managed-by": "netaware-probe"},
    }
    if node_uid:
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid}]
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": dict(data)}
