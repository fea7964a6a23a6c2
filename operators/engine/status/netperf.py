"""Netperf measurements: ConfigMap keys in, per-pair latencies (integer milliseconds) out.

Accepted keys (values are integer milliseconds, ``^[0-9]+$``):

* ``netperf.p90.latency.milliseconds.origin.<node>.destination.<node>`` — upstream's format,
  one key per ordered node pair;
* ``netperf.p90.latency.milliseconds.origin-zone.<zone>.destination-zone.<zone>`` — one key per
  ordered zone pair, for clusters too large for a node-pair matrix.

The data may be spread over several ConfigMaps (a ConfigMap holds at most 1 MiB): the one
named by ``spec.configmapName`` first, then those labelled
``networktopology.diktyo.x-k8s.io/netperf=<NetworkTopology name>`` by name. Everything that
cannot be used is skipped and counted with its reason — a malformed key or value, an unknown
node or zone, a self-pair, a repeated pair — and never read as 0 (upstream reads it as 0).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field

from operators.api import keys
from operators.engine.cluster.objects import ConfigMap

_NODE_SEPARATOR = ".destination."
_ZONE_SEPARATOR = ".destination-zone."


@dataclass(frozen=True)
class Skipped:
    config_map: str
    key: str
    reason: str

    def __str__(self) -> str:
        return f"{self.config_map}/{self.key}: {self.reason}"


@dataclass
class Measurements:
    """Usable measurements. Node pairs are bucketed by the places (region, zone) of their two nodes
    (``place_pairs[a * len(places) + b]``), which is all the cost aggregation needs and keeps a
    million-key matrix cheap."""

    places: list[tuple[str, str]] = field(default_factory=list)
    place_pairs: list[list[int]] = field(default_factory=list)
    zone_pairs: dict[tuple[str, str], int] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    config_maps: list[str] = field(default_factory=list)
    node_measurements: int = 0

    @property
    def used(self) -> int:
        return self.node_measurements + len(self.zone_pairs)


def netperf_config_maps(config_maps: Iterable[ConfigMap], namespace: str, topology: str, named: str) -> list[ConfigMap]:
    """The ConfigMaps of one NetworkTopology: the named one first, then the labelled ones by name."""
    first = [cm for cm in config_maps if cm.namespace == namespace and cm.name == named]
    labelled = sorted(
        (
            cm
            for cm in config_maps
            if cm.namespace == namespace
            and cm.name != named
            and cm.labels.get(keys.NETPERF_CONFIGMAP_LABEL) == topology
        ),
        key=lambda cm: cm.name,
    )
    return first + labelled


def _milliseconds(value: str) -> int | None:
    return int(value) if value.isascii() and value.isdigit() else None


def _reason(key: str, value: str, nodes: Set[str], zones: Set[str], seen: Set[str]) -> str | None:
    """Why a key cannot be used (None: it can)."""
    if key.startswith(keys.NETPERF_ZONE_KEY_PREFIX):
        origin, separator, destination = key[len(keys.NETPERF_ZONE_KEY_PREFIX) :].partition(_ZONE_SEPARATOR)
        known, kind = zones, "zone"
    elif key.startswith(keys.NETPERF_NODE_KEY_PREFIX):
        origin, separator, destination = key[len(keys.NETPERF_NODE_KEY_PREFIX) :].partition(_NODE_SEPARATOR)
        known, kind = nodes, "node"
    else:
        return "not a netperf key"
    if not separator or not origin or not destination:
        return "malformed key: expected <origin>.destination.<destination>"
    if _milliseconds(value) is None:
        return f"value {value!r} is not a whole number of milliseconds"
    if origin == destination:
        return f"self-pair {origin}"
    if origin not in known or destination not in known:
        return f"unknown {kind} {origin if origin not in known else destination}"
    if key in seen:
        return "repeated pair (an earlier ConfigMap or key already measured it)"
    return None


def read_measurements(
    config_maps: Iterable[ConfigMap], node_places: Mapping[str, tuple[str, str]], zones: Set[str]
) -> Measurements:
    """Every usable measurement of ``config_maps`` (in the order given; the first of a repeated pair wins).

    ``node_places`` maps every known node to its (region, zone).
    """
    places = sorted(set(node_places.values()))
    place_id = {place: index for index, place in enumerate(places)}
    node_place = {node: place_id[place] for node, place in node_places.items()}
    width = len(places)
    result = Measurements(places=places, place_pairs=[[] for _ in range(width * width)])
    buckets = result.place_pairs
    seen_keys: set[str] = set()  # a repeated pair has the same key, whichever ConfigMap holds it
    node_prefix, zone_prefix = keys.NETPERF_NODE_KEY_PREFIX, keys.NETPERF_ZONE_KEY_PREFIX
    node_start, zone_start = len(node_prefix), len(zone_prefix)
    nodes = node_places.keys()
    for config_map in config_maps:
        result.config_maps.append(config_map.name)
        for key, value in config_map.data.items():
            # The common case, a valid node-pair key, inline: a full matrix has a million of them.
            if key.startswith(node_prefix):
                origin, separator, destination = key[node_start:].partition(_NODE_SEPARATOR)
                a, b = node_place.get(origin), node_place.get(destination)
                if (
                    separator
                    and a is not None
                    and b is not None
                    and origin != destination
                    and value.isascii()
                    and value.isdigit()
                    and key not in seen_keys
                ):
                    seen_keys.add(key)
                    buckets[a * width + b].append(int(value))
                    result.node_measurements += 1
                    continue
                reason = _reason(key, value, nodes, zones, seen_keys)
            elif key.startswith(zone_prefix):
                origin, separator, destination = key[zone_start:].partition(_ZONE_SEPARATOR)
                reason = _reason(key, value, nodes, zones, seen_keys)
                if reason is None:
                    seen_keys.add(key)
                    result.zone_pairs[(origin, destination)] = int(value)
                    continue
            else:
                reason = "not a netperf key"
            result.skipped.append(Skipped(config_map.name, key, reason or "unusable"))
    return result


def node_pairs(config_maps: Iterable[ConfigMap], nodes: Set[str]) -> dict[tuple[str, str], int]:
    """The usable node-pair measurements of ``config_maps`` (same rules as :func:`read_measurements`; the first of
    a repeated pair wins): (origin, destination) -> milliseconds."""
    pairs: dict[tuple[str, str], int] = {}
    seen: set[str] = set()
    for config_map in config_maps:
        for key, value in config_map.data.items():
            if not key.startswith(keys.NETPERF_NODE_KEY_PREFIX) or _reason(key, value, nodes, set(), seen) is not None:
                continue
            seen.add(key)
            origin, _, destination = key[len(keys.NETPERF_NODE_KEY_PREFIX) :].partition(_NODE_SEPARATOR)
            pairs[(origin, destination)] = int(value)
    return pairs
