"""Koordinator's ``slo-controller-config``, network part: parsing, merging and validation (pure).

Each key (``resource-qos-config``, ``system-config``) is JSON
``{"clusterStrategy": {...}, "nodeStrategies": [{"name", "nodeSelector", ...}]}`` and is handled on its
own, as Koordinator does:

* the cluster strategy is overlaid on the key's default (empty), and each node strategy is
  JSON-overlaid on the merged cluster strategy (objects merge key by key, lists and scalars
  replace, ``null`` means "not set");
* a node takes the first node strategy whose ``nodeSelector`` matches it, else the cluster strategy;
* a key that does not parse or does not validate keeps its **last good** value; a key that is
  absent takes its default; a deleted ConfigMap changes nothing.

Validation (Koordinator's admission webhook for this ConfigMap, plus what it misses): each
``networkQOS`` value is an int 0..100 (percent of the node total) or a quantity string (bits/s);
per strategy the lsr/ls/be requests use one format, sum to at most 100 % (or to at most the
strategy's ``totalNetworkBandwidth`` when absolute); no limit is below its request; no node
matches two node strategies. One deliberate difference: a node strategy of ``system-config``
that omits ``totalNetworkBandwidth`` inherits the cluster's (Koordinator resets it to 0, because
Go always serialises a Quantity).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from operators.api import keys
from operators.api.errors import FieldError
from operators.api.quantity import Quantity, QuantityError
from operators.api.selectors import Selector, from_label_selector
from operators.engine.cluster.objects import Node

ALL_CLASSES = ("lsrClass", "lsClass", "beClass", "systemClass")
DIRECTIONS = ("ingress", "egress")


def overlay(base: Any, patch: Any) -> Any:
    """Koordinator's ``MergeCfg``: JSON of ``patch`` unmarshalled onto ``base``."""
    if not isinstance(base, dict) or not isinstance(patch, dict):
        return copy.deepcopy(base) if patch is None else copy.deepcopy(patch)
    result = copy.deepcopy(base)
    for key, value in patch.items():
        if value is None:
            continue
        result[key] = overlay(result.get(key), value)
    return result


@dataclass(frozen=True)
class NodeStrategy:
    name: str
    selector: Selector
    raw_selector: Any
    strategy: dict[str, Any]  # merged onto the cluster strategy; without name and nodeSelector


@dataclass(frozen=True)
class KeyConfig:
    """One key's configuration, merged."""

    cluster: dict[str, Any] = field(default_factory=dict)
    node_strategies: tuple[NodeStrategy, ...] = ()

    def for_node(self, labels: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
        """(where it came from, the strategy) for a node with ``labels``."""
        for strategy in self.node_strategies:
            if strategy.selector.matches(labels):
                return f"nodeStrategies {strategy.name}", strategy.strategy
        return "clusterStrategy", self.cluster


def parse_key(key: str, text: str) -> KeyConfig:
    """Parse and merge one key; raises ``FieldError`` naming the key and the field."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise FieldError(
            key, text[:80], f"not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
        ) from None
    if not isinstance(document, dict):
        raise FieldError(key, document, "expected a JSON object with clusterStrategy and nodeStrategies")
    cluster = document.get("clusterStrategy") or {}
    if not isinstance(cluster, dict):
        raise FieldError(f"{key}: clusterStrategy", cluster, "expected an object")
    merged_cluster = overlay({}, cluster)
    strategies = []
    raw_strategies = document.get("nodeStrategies") or []
    if not isinstance(raw_strategies, list):
        raise FieldError(f"{key}: nodeStrategies", raw_strategies, "expected a list")
    for index, raw in enumerate(raw_strategies):
        where = f"{key}: nodeStrategies[{index}]"
        if not isinstance(raw, dict):
            raise FieldError(where, raw, "expected an object")
        selector = from_label_selector(raw.get("nodeSelector"), f"{where}.nodeSelector")
        body = {name: value for name, value in raw.items() if name not in ("name", "nodeSelector")}
        strategies.append(
            NodeStrategy(
                str(raw.get("name") or f"#{index}"), selector, raw.get("nodeSelector"), overlay(merged_cluster, body)
            )
        )
    return KeyConfig(merged_cluster, tuple(strategies))


def _value(raw: Any, path: str) -> int | Quantity:
    """An int percent 0..100 or an absolute quantity (bits/s)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        raise FieldError(path, raw, "expected a percent (0..100) or a quantity string")
    if isinstance(raw, int):
        if not 0 <= raw <= 100:
            raise FieldError(path, raw, "percent outside 0..100")
        return raw
    if raw == "":
        raise FieldError(path, raw, "empty value")
    try:
        return Quantity.parse(raw, path)
    except QuantityError as error:
        raise FieldError(path, raw, "not a quantity") from error


def network_qos(strategy: Mapping[str, Any], class_name: str) -> Mapping[str, Any]:
    qos = (strategy.get(class_name) or {}).get("networkQOS") or {}
    return qos if isinstance(qos, Mapping) else {}


def strategy_total(strategy: Mapping[str, Any], path: str) -> Quantity | None:
    raw = (strategy.get("systemStrategy") or strategy).get("totalNetworkBandwidth") if strategy else None
    if raw is None:
        return None
    return Quantity.parse(raw, f"{path}.totalNetworkBandwidth")


def validate_strategy(strategy: Mapping[str, Any], path: str, total: Quantity | None) -> None:
    """Raise the first problem of one resource-qos strategy."""
    formats: dict[str, str] = {}
    sums: dict[str, int] = dict.fromkeys(DIRECTIONS, 0)
    absolute: dict[str, Quantity] = {direction: Quantity(0) for direction in DIRECTIONS}
    for class_name in ALL_CLASSES:
        qos = network_qos(strategy, class_name)
        for direction in DIRECTIONS:
            where = f"{path}.{class_name}.networkQOS.{direction}"
            request = _value(qos[f"{direction}Request"], f"{where}Request") if f"{direction}Request" in qos else None
            limit = _value(qos[f"{direction}Limit"], f"{where}Limit") if f"{direction}Limit" in qos else None
            if request is not None and limit is not None and type(request) is type(limit) and limit < request:
                raise FieldError(
                    f"{where}Limit", qos[f"{direction}Limit"], f"limit below its request {qos[f'{direction}Request']!r}"
                )
            if class_name == "systemClass" or request is None:
                continue
            kind = "percent" if isinstance(request, int) else "absolute"
            if formats.setdefault("requests", kind) != kind:
                raise FieldError(
                    f"{where}Request", qos[f"{direction}Request"], "mixes percent and absolute requests in one strategy"
                )
            if isinstance(request, int):
                sums[direction] += request
                if sums[direction] > 100:
                    raise FieldError(
                        f"{path}.*.networkQOS.{direction}Request",
                        sums[direction],
                        "lsr, ls and be requests sum above 100 percent",
                    )
            else:
                absolute[direction] = absolute[direction] + request
                if total is not None and total and absolute[direction] > total:
                    raise FieldError(
                        f"{path}.*.networkQOS.{direction}Request",
                        str(absolute[direction]),
                        f"lsr, ls and be requests sum above the total {total}",
                    )


def _node_conflicts(config: KeyConfig, key: str, nodes: Sequence[Node]) -> None:
    for node in nodes:
        matching = [strategy.name for strategy in config.node_strategies if strategy.selector.matches(node.labels)]
        if len(matching) > 1:
            raise FieldError(
                f"{key}: nodeStrategies", matching, f"node {node.name} matches more than one node strategy"
            )


def validate_key(key: str, config: KeyConfig, system: KeyConfig | None, nodes: Sequence[Node]) -> None:
    """Raise the first problem of one parsed key."""
    _node_conflicts(config, key, nodes)
    if key == keys.SYSTEM_CONFIG_KEY:
        named: list[tuple[str, dict[str, Any]]] = [("clusterStrategy", config.cluster)]
        named.extend((f"nodeStrategies[{i}]", item.strategy) for i, item in enumerate(config.node_strategies))
        for where, settings in named:
            raw_total = settings.get("totalNetworkBandwidth")
            if raw_total is not None and Quantity.parse(raw_total, f"{key}: {where}.totalNetworkBandwidth") < 0:
                raise FieldError(f"{key}: {where}.totalNetworkBandwidth", raw_total, "negative bandwidth")
        return
    cluster_total = strategy_total(system.cluster, "system-config: clusterStrategy") if system else None
    validate_strategy(config.cluster, f"{key}: clusterStrategy", cluster_total)
    for index, node_strategy in enumerate(config.node_strategies):
        total = cluster_total
        if system is not None:  # Koordinator: the system strategy with the same nodeSelector, else the cluster's
            for candidate in system.node_strategies:
                if candidate.raw_selector == node_strategy.raw_selector:
                    total = strategy_total(candidate.strategy, "system-config") or cluster_total
        validate_strategy(node_strategy.strategy, f"{key}: nodeStrategies[{index}] ({node_strategy.name})", total)


@dataclass(frozen=True)
class ConfigState:
    """The configuration in force: the last good value of each key, and why newer ones were refused."""

    configs: Mapping[str, KeyConfig] = field(default_factory=dict)
    problems: Mapping[str, FieldError] = field(default_factory=dict)
    found: bool = False  # the ConfigMap has been seen at least once


def update_config(previous: ConfigState, data: Mapping[str, str] | None, nodes: Sequence[Node]) -> ConfigState:
    """The configuration after reading the ConfigMap's ``data`` (None: the ConfigMap is absent).

    1. Absent ConfigMap: nothing changes (Koordinator keeps the last config).
    2. Per key: absent -> its default; parses and validates -> new value; else -> the last good
       value is kept and the problem recorded.
    """
    if data is None:
        return previous
    configs = dict(previous.configs)
    problems: dict[str, FieldError] = {}
    for key in (keys.SYSTEM_CONFIG_KEY, keys.RESOURCE_QOS_CONFIG_KEY):  # system first: qos checks its totals
        if key not in data:
            configs[key] = KeyConfig()
            continue
        try:
            candidate = parse_key(key, data[key])
            system = configs.get(keys.SYSTEM_CONFIG_KEY)
            validate_key(key, candidate, system, nodes)
        except FieldError as error:
            problems[key] = error if error.path.startswith(key) else error.at(key)
            continue
        configs[key] = candidate
    return ConfigState(configs, problems, True)
