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

from collections.abc import Iterable, Set
from dataclasses import dataclass, field

from operators.api import keys
from operators.engine.snapshot import ConfigMap

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
    node_pairs: dict[tuple[str, str], int] = field(default_factory=dict)
    zone_pairs: dict[tuple[str, str], int] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    config_maps: list[str] = field(default_factory=list)

    @property
    def used(self) -> int:
        return len(self.node_pairs) + len(self.zone_pairs)


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


def read_measurements(config_maps: Iterable[ConfigMap], nodes: Set[str], zones: Set[str]) -> Measurements:
    """Every usable measurement of ``config_maps`` (in the order given; the first of a repeated pair wins)."""
    result = Measurements()
    for config_map in config_maps:
        result.config_maps.append(config_map.name)
        for key in sorted(config_map.data):
            value = config_map.data[key]

            def skip(reason: str, key: str = key, name: str = config_map.name) -> None:
                result.skipped.append(Skipped(name, key, reason))

            if key.startswith(keys.NETPERF_ZONE_KEY_PREFIX):
                origin, separator, destination = key[len(keys.NETPERF_ZONE_KEY_PREFIX) :].partition(_ZONE_SEPARATOR)
                table, known, kind = result.zone_pairs, zones, "zone"
            elif key.startswith(keys.NETPERF_NODE_KEY_PREFIX):
                origin, separator, destination = key[len(keys.NETPERF_NODE_KEY_PREFIX) :].partition(_NODE_SEPARATOR)
                table, known, kind = result.node_pairs, nodes, "node"
            else:
                skip("not a netperf key")
                continue
            if not separator or not origin or not destination:
                skip("malformed key: expected <origin>.destination.<destination>")
                continue
            milliseconds = _milliseconds(value)
            if milliseconds is None:
                skip(f"value {value!r} is not a whole number of milliseconds")
            elif origin == destination:
                skip(f"self-pair {origin}")
            elif origin not in known or destination not in known:
                unknown = origin if origin not in known else destination
                skip(f"unknown {kind} {unknown}")
            elif (origin, destination) in table:
                skip("repeated pair (an earlier ConfigMap or key already measured it)")
            else:
                table[(origin, destination)] = milliseconds
    return result
