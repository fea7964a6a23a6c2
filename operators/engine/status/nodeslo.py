"""One NodeSLO per node, network part, from the configuration in force (pure).

``render_nodeslo(node, state, existing, options, now)``:

1. **Strategies.** The node's resource-qos and system strategies: the first node strategy whose
   selector matches, else the cluster strategy (:mod:`operators.engine.status.sloconfig`). A key that
   has never been valid renders what the existing NodeSLO already has (no silent reset).
2. **Spec** (unless ``spec_owner`` is ``koordinator``): ``resourceQOSStrategy`` is the strategy,
   ``systemStrategy`` the system strategy with the node annotation
   ``node.koordinator.sh/network-bandwidth`` as ``totalNetworkBandwidth`` when present (as Koordinator); none
   when a bandwidth annotation does not parse (as Koordinator, whose controller then writes no system strategy;
   the status says why the total is unknown).
3. **Node total**, first found: annotation ``node.koordinator.sh/network-bandwidth``, annotation
   ``node.kubernetes.io/network-limit``, the system strategy's ``totalNetworkBandwidth`` (non-zero),
   the configured default. None of them (or an annotation that is not a quantity) gives
   ``NetworkBandwidthKnown=False`` and no ``status.networkQOS``, never zeros. Units: bits/s.
4. **status.networkQOS**: per class and direction, request and limit in bits/s — an int is
   ``total * percent // 100`` (Koordinator's tc arithmetic), a string its value; a missing request
   is 0 and a missing limit 100 % (the CRD defaults). The system class gets the remainder,
   ``total - ls request - be request`` (never below 0), with the whole total as limit.
5. **Conditions**: ``NetworkQOSConfigValid`` (False with the refused key's message while a newer
   config is refused), ``NetworkBandwidthKnown``.

Ownership: Koordinator's NodeSLO carries much more than network QoS (``cpuBurstStrategy``,
``extensions``, ``resourceQOSStrategy.*.cpuQOS``, ...). netaware writes only the fields in
:data:`OWNED_PATHS` (with ``spec_owner="netaware"``) and its status; :func:`owned_spec_patch` is the
JSON patch that brings those fields, and nothing else, to what was rendered.
"""

from __future__ import annotations

import datetime
import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import jsonpatch

from operators.api import keys
from operators.api.config.controllers import NodeSLOOptions
from operators.api.errors import FieldError
from operators.api.meta import ObjectMeta
from operators.api.nodeslo import (
    ClassBandwidth,
    NetworkQOSClasses,
    NetworkQOSStatus,
    NodeSLO,
    NodeSLOSpec,
    NodeSLOStatus,
)
from operators.api.quantity import Quantity, QuantityError, parse_bandwidth
from operators.engine.cluster.bandwidth import CAPACITY_ANNOTATIONS, node_capacity
from operators.engine.cluster.conditions import condition
from operators.engine.cluster.objects import Node
from operators.engine.status.sloconfig import ConfigState, KeyConfig, network_qos

BANDWIDTH_KNOWN = "NetworkBandwidthKnown"


def node_total(
    node: Node, system_strategy: Mapping[str, Any], default: Quantity | None
) -> tuple[Quantity | None, str, str]:
    """(total or None, its source, a problem message or ""): the bandwidth model's node capacity, with the
    system strategy's ``totalNetworkBandwidth`` as the NodeSLO total."""
    try:
        found = node_capacity(node, system_strategy.get("totalNetworkBandwidth"), default)
    except FieldError as error:
        source = next((name for name in CAPACITY_ANNOTATIONS if name in node.annotations), keys.SYSTEM_CONFIG_KEY)
        return None, source, str(error)
    if found is not None:
        return found.quantity, found.source, ""
    return (
        None,
        "",
        (
            f"no bandwidth for node {node.name}: no {keys.NODE_BANDWIDTH_KOORDINATOR} or "
            f"{keys.NODE_BANDWIDTH_THESIS} annotation, no totalNetworkBandwidth in system-config, "
            "no default"
        ),
    )


def _bits(raw: Any, total: int, fallback: int) -> int:
    if raw is None:
        return fallback
    if isinstance(raw, int) and not isinstance(raw, bool):
        return total * raw // 100
    return Quantity.parse(raw).value()


def class_bandwidth(strategy: Mapping[str, Any], total: Quantity) -> NetworkQOSClasses:
    """Request and limit per class and direction in bits/s (nodes sharing a strategy and a total share it)."""
    classes = {name: strategy.get(name) for name in ("lsrClass", "lsClass", "beClass")}
    return _class_bandwidth(json.dumps(classes, sort_keys=True, default=str), total.nanos)


@functools.lru_cache(maxsize=4096)
def _class_bandwidth(classes_json: str, total_nanos: int) -> NetworkQOSClasses:
    strategy = json.loads(classes_json)
    bits = Quantity(total_nanos).value()
    classes: dict[str, ClassBandwidth] = {}
    for short, class_name in (("lsr", "lsrClass"), ("ls", "lsClass"), ("be", "beClass")):
        qos = network_qos(strategy, class_name)
        classes[short] = ClassBandwidth(
            **{
                f"{direction}_{kind}": Quantity.of(
                    _bits(qos.get(f"{direction}{kind.title()}"), bits, 0 if kind == "request" else bits)
                )
                for direction in ("ingress", "egress")
                for kind in ("request", "limit")
            }
        )
    remainder = {
        direction: max(
            0,
            bits
            - getattr(classes["ls"], f"{direction}_request").value()
            - getattr(classes["be"], f"{direction}_request").value(),
        )
        for direction in ("ingress", "egress")
    }
    classes["system"] = ClassBandwidth(
        ingress_request=Quantity.of(remainder["ingress"]),
        ingress_limit=Quantity.of(bits),
        egress_request=Quantity.of(remainder["egress"]),
        egress_limit=Quantity.of(bits),
    )
    return NetworkQOSClasses(**classes)


def _strategy(config: KeyConfig | None, node: Node, fallback: Mapping[str, Any] | None) -> dict[str, Any]:
    if config is None:
        return dict(fallback or {})
    return dict(config.for_node(node.labels)[1])


def _is_bandwidth(text: str) -> bool:
    try:
        parse_bandwidth(text)
    except QuantityError:
        return False
    return True


def render_nodeslo(
    node: Node, state: ConfigState, existing: NodeSLO | None, options: NodeSLOOptions, now: datetime.datetime
) -> NodeSLO:
    """The NodeSLO of ``node`` (see the module docstring)."""
    old_spec = existing.spec.model_dump(mode="json", by_alias=True, exclude_none=True) if existing else {}
    qos_strategy = _strategy(state.configs.get(keys.RESOURCE_QOS_CONFIG_KEY), node, old_spec.get("resourceQOSStrategy"))
    system_strategy = _strategy(state.configs.get(keys.SYSTEM_CONFIG_KEY), node, old_spec.get("systemStrategy"))
    annotated = node.annotations.get(keys.NODE_BANDWIDTH_KOORDINATOR)
    if annotated is not None and _is_bandwidth(annotated):  # a bad one is reported by NetworkBandwidthKnown
        system_strategy["totalNetworkBandwidth"] = annotated
    total, source, problem = node_total(node, system_strategy, options.default_total)
    if total is None and source in CAPACITY_ANNOTATIONS:
        # A bandwidth annotation that does not parse: Koordinator's controller then writes no system strategy, and
        # the status says the total is unknown; the spec must not carry a total the status denies.
        system_strategy = {}
    if options.spec_owner == "koordinator" and existing is not None:
        spec = existing.spec
    else:
        spec = NodeSLOSpec.model_validate({"resourceQOSStrategy": qos_strategy, "systemStrategy": system_strategy})
    refused = [str(state.problems[key]) for key in sorted(state.problems)]
    previous = existing.status.conditions if existing and existing.status else None
    conditions = [
        condition(
            previous,
            keys.CONDITION_NETWORK_QOS_VALID,
            not refused,
            "ConfigRefused" if refused else "ConfigApplied",
            "; ".join(refused) + " (the last valid configuration stays in force)"
            if refused
            else "the network QoS configuration is valid",
            now,
        ),
        condition(
            previous,
            BANDWIDTH_KNOWN,
            total is not None,
            "TotalFound" if total is not None else "TotalUnknown",
            f"{total} bits/s from {source}" if total is not None else problem,
            now,
        ),
    ]
    network = (
        NetworkQOSStatus(
            total_network_bandwidth=total, total_source=source, classes=class_bandwidth(qos_strategy, total)
        )
        if total is not None
        else None
    )
    metadata = existing.metadata if existing else ObjectMeta(name=node.name)
    usage = existing.status.network_usage if existing and existing.status else None  # the agent's, kept
    return NodeSLO(
        metadata=metadata,
        spec=spec,
        status=NodeSLOStatus(network_qos=network, network_usage=usage, conditions=conditions),
    )


# The spec fields netaware owns: the network QoS of each class, the network QoS policy, the node total.
OWNED_PATHS: tuple[tuple[str, ...], ...] = (
    *(("resourceQOSStrategy", f"{name}Class", "networkQOS") for name in ("lsr", "ls", "be", "system")),
    ("resourceQOSStrategy", "policies", "netQOSPolicy"),
    ("systemStrategy", "totalNetworkBandwidth"),
)


def _at(document: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(document, Mapping) or key not in document:
            return None
        document = document[key]
    return document


def owned_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Only the owned fields of ``spec``, nested as in the NodeSLO (what netaware creates a NodeSLO with)."""
    result: dict[str, Any] = {}
    for path in OWNED_PATHS:
        value = _at(spec, path)
        if value is not None:
            target = result
            for key in path[:-1]:
                target = target.setdefault(key, {})
            target[path[-1]] = value
    return result


def owned_spec_patch(current: Mapping[str, Any], wanted_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """RFC 6902 operations that set the owned fields of ``current`` (a NodeSLO) to ``wanted_spec``'s, and touch
    nothing else: missing parents are added as empty objects, an owned field no longer wanted is removed.
    Empty when the owned fields already agree."""
    operations: list[dict[str, Any]] = []
    spec = current.get("spec")
    created: set[tuple[str, ...]] = set()
    for path in OWNED_PATHS:
        want, have = _at(wanted_spec, path), _at(spec, path)
        if want == have:
            continue
        if want is None:
            operations.append({"op": "remove", "path": _pointer(path)})
            continue
        if not isinstance(spec, Mapping) and () not in created:
            operations.append({"op": "add", "path": "/spec", "value": {}})
            created.add(())
        for depth in range(1, len(path)):
            parent = path[:depth]
            if parent not in created and not isinstance(_at(spec, parent), Mapping):
                operations.append({"op": "add", "path": _pointer(parent), "value": {}})
                created.add(parent)
        operations.append({"op": "replace" if have is not None else "add", "path": _pointer(path), "value": want})
    return operations


def _pointer(path: tuple[str, ...]) -> str:
    return "/spec" + "".join("/" + key.replace("~", "~0").replace("/", "~1") for key in path)


def as_written(current: Mapping[str, Any] | None, wanted: NodeSLO, options: NodeSLOOptions) -> dict[str, Any]:
    """The NodeSLO as it is after the controller's writes (what ``netaware reconcile`` prints): created with the
    owned spec only, else ``current`` with :func:`owned_spec_patch` applied (``spec_owner="netaware"``) — every
    other field (``cpuBurstStrategy``, ``extensions``, other ``resourceQOSStrategy`` parts) as found — and the
    rendered status."""
    rendered = wanted.to_wire()
    if current is None:
        body = {key: value for key, value in rendered.items() if key not in ("spec", "status")}
        result = {**body, "spec": owned_spec(rendered.get("spec") or {})}
    elif options.spec_owner == "netaware":
        result = jsonpatch.apply_patch(dict(current), owned_spec_patch(current, rendered.get("spec") or {}))
    else:
        result = dict(current)
    if "status" in rendered:
        result["status"] = rendered["status"]
    return result


def render_all(
    nodes: Sequence[Node],
    state: ConfigState,
    existing: Mapping[str, NodeSLO],
    options: NodeSLOOptions,
    now: datetime.datetime,
) -> list[NodeSLO]:
    return [render_nodeslo(node, state, existing.get(node.name), options, now) for node in nodes]
