"""The bandwidth model (docs/design/contracts.md), written once: every component that needs a node's capacity, a
pod's demand or the accounting of the two imports it from here (admission, the scheduling plugins, the descheduler's
usage, the simulator, the rebalancer, the NodeSLO controller).

* **Units**: bits/s; a bandwidth is a quantity from 0 to 1P (:func:`operators.api.quantity.parse_bandwidth`).
* **Pod demand**: what kube-scheduler counts when the pod carries netaware's extended resources (its effective
  requests of ``netaware.io/{ingress,egress}-bandwidth``, else of ``netaware.io/bandwidth``, ingress + egress,
  split as the annotations say when they add up to it, else counted as egress); otherwise, per direction, the
  first present of ``kubernetes.io/<dir>-request``, ``kubernetes.io/<dir>-bandwidth`` (the limit), Koordinator's
  ``koordinator.sh/networkQOS`` ``<dir>Request``, its ``<dir>Limit``; none: 0. A present value that is not a
  bandwidth is a ``FieldError`` naming the annotation, never read as 0. Resources win over annotations: they
  are what kube-scheduler counts, and unlike annotations they cannot change after creation.
* **Node capacity**, first found: annotation ``node.koordinator.sh/network-bandwidth``, annotation
  ``node.kubernetes.io/network-limit``, the node's NodeSLO ``systemStrategy.totalNetworkBandwidth``
  (non-zero), the configured default; none: unknown. A present annotation that is not a bandwidth makes
  the capacity unreadable (a ``FieldError``), not the next source's.
* **Accounting**: ``duplex`` (each direction has the whole capacity; the total is doubled) or
  ``combined`` (ingress + egress share it). :class:`Accounting` holds the doubling and the fit rule, for
  Python ints and numpy arrays alike, and the extended resources of the mode: what a pod requests
  (:meth:`Accounting.requests`) and what a node advertises (:meth:`Accounting.advertised`).
* **Advertised**: a node advertises, per resource of the mode, its capacity less what its *unaccounted* pods use
  (pods that carry none of the mode's resources: created before the change or while the webhook was down).
  kube-scheduler then counts ``accounted requests <= capacity - unaccounted use``, which is exactly this
  module's ``all pods' demand <= capacity``.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from operators.api import keys
from operators.api.errors import FieldError
from operators.api.nodeslo import NodeSLO
from operators.api.quantity import Quantity, parse_bandwidth
from operators.engine.cluster.objects import Node
from operators.engine.cluster.snapshot import Snapshot
from operators.memo import remember

DIRECTIONS = ("ingress", "egress")
CAPACITY_ANNOTATIONS = (keys.NODE_BANDWIDTH_KOORDINATOR, keys.NODE_BANDWIDTH_THESIS)
SYSTEM_CONFIG = keys.SYSTEM_CONFIG_KEY  # the source name of a NodeSLO / system-config total
DEFAULT = "default"

Amount = TypeVar("Amount")  # an int, or a numpy array of them


class Accounting(enum.StrEnum):
    """How a pod's ingress and egress count against a node's capacity."""

    DUPLEX = "duplex"
    COMBINED = "combined"

    def total(self, capacity: Amount) -> Amount:
        """The capacity both directions share: doubled in duplex accounting (the one place it is)."""
        doubled: Amount = capacity * 2 if self is Accounting.DUPLEX else capacity  # type: ignore[operator,assignment]
        return doubled

    def fits(self, capacity: Any, used_in: Any, used_out: Any, want_in: Any, want_out: Any) -> Any:
        """Whether a demand fits the free capacity (elementwise for arrays). Duplex: each direction that asks
        for something fits its own free capacity; combined: in + out fits what both leave. Asking for nothing
        fits anywhere, an overcommitted node included."""
        if self is Accounting.COMBINED:
            wanted = want_in + want_out
            return (wanted == 0) | (wanted <= capacity - used_in - used_out)
        return ((want_in == 0) | (want_in <= capacity - used_in)) & (
            (want_out == 0) | (want_out <= capacity - used_out)
        )

    @property
    def resources(self) -> tuple[str, ...]:
        """The extended resources kube-scheduler accounts in this mode."""
        if self is Accounting.COMBINED:
            return (keys.COMBINED_BANDWIDTH_RESOURCE,)
        return (keys.INGRESS_BANDWIDTH_RESOURCE, keys.EGRESS_BANDWIDTH_RESOURCE)

    def requests(self, ingress: int, egress: int) -> dict[str, int]:
        """The extended resources a pod of this demand requests (requests = limits); none for a zero amount."""
        if self is Accounting.COMBINED:
            wanted = {keys.COMBINED_BANDWIDTH_RESOURCE: ingress + egress}
        else:
            wanted = {keys.INGRESS_BANDWIDTH_RESOURCE: ingress, keys.EGRESS_BANDWIDTH_RESOURCE: egress}
        return {name: amount for name, amount in wanted.items() if amount > 0}

    def accounted(self, requests: Mapping[str, Quantity]) -> bool:
        """Whether kube-scheduler counts the pod's bandwidth: it requests a resource of this mode."""
        return any(name in requests for name in self.resources)

    def advertised(self, capacity: int, unaccounted_in: int, unaccounted_out: int) -> dict[str, int]:
        """What a node advertises per resource (capacity = allocatable): its capacity less what its unaccounted
        pods use, floored at 0 (see the module docstring)."""
        if self is Accounting.COMBINED:
            return {keys.COMBINED_BANDWIDTH_RESOURCE: max(0, capacity - unaccounted_in - unaccounted_out)}
        return {
            keys.INGRESS_BANDWIDTH_RESOURCE: max(0, capacity - unaccounted_in),
            keys.EGRESS_BANDWIDTH_RESOURCE: max(0, capacity - unaccounted_out),
        }

    def overcommit(self, capacity: Any, used_in: Any, used_out: Any) -> Any:
        """By how much the used bandwidth exceeds the capacity (<= 0: it does not)."""
        if self is Accounting.COMBINED:
            return used_in + used_out - capacity
        return np.maximum(used_in, used_out) - capacity


@dataclass(frozen=True)
class Capacity:
    """A node's capacity and where it came from (an annotation key, ``system-config`` or ``default``)."""

    quantity: Quantity  # as written at its source
    source: str

    @property
    def bits(self) -> int:
        return self.quantity.value()


RESOURCES = (keys.INGRESS_BANDWIDTH_RESOURCE, keys.EGRESS_BANDWIDTH_RESOURCE, keys.COMBINED_BANDWIDTH_RESOURCE)
_NO_REQUESTS: Mapping[str, Quantity] = {}


def pod_demand(annotations: Mapping[str, str], requests: Mapping[str, Quantity] = _NO_REQUESTS) -> tuple[int, int]:
    """(ingress, egress) bits/s a pod needs (see the module docstring); ``FieldError`` when unreadable.
    ``requests``: the pod's effective requests (:attr:`operators.engine.cluster.objects.Pod.requests`)."""
    ingress_resource = requests.get(keys.INGRESS_BANDWIDTH_RESOURCE)
    egress_resource = requests.get(keys.EGRESS_BANDWIDTH_RESOURCE)
    if ingress_resource is not None or egress_resource is not None:
        return (
            ingress_resource.value() if ingress_resource is not None else 0,
            egress_resource.value() if egress_resource is not None else 0,
        )
    combined = requests.get(keys.COMBINED_BANDWIDTH_RESOURCE)
    if combined is not None:
        total = combined.value()
        try:
            split: tuple[int, int] | None = annotation_demand(annotations)
        except FieldError:
            split = None
        return split if split is not None and sum(split) == total else (0, total)
    return annotation_demand(annotations)


def annotation_demand(annotations: Mapping[str, str]) -> tuple[int, int]:
    """(ingress, egress) bits/s the pod's annotations ask for (what the webhook turns into resources)."""
    result = []
    qos: Mapping[str, Any] | None = None
    for direction in DIRECTIONS:
        for key in (f"kubernetes.io/{direction}-request", f"kubernetes.io/{direction}-bandwidth"):
            if key in annotations:
                result.append(parse_bandwidth(annotations[key], f"metadata.annotations[{key}]").value())
                break
        else:
            qos = koordinator_qos(annotations) if qos is None else qos
            for name in (f"{direction}Request", f"{direction}Limit"):
                if qos.get(name) is not None:
                    where = f"metadata.annotations[{keys.KOORDINATOR_NETWORK_QOS}].{name}"
                    result.append(parse_bandwidth(qos[name], where).value())
                    break
            else:
                result.append(0)
    return result[0], result[1]


def koordinator_qos(annotations: Mapping[str, str]) -> Mapping[str, Any]:
    """The pod's ``koordinator.sh/networkQOS`` JSON object ({} when absent); ``FieldError`` when not an object."""
    text = annotations.get(keys.KOORDINATOR_NETWORK_QOS)
    if text is None:
        return {}
    where = f"metadata.annotations[{keys.KOORDINATOR_NETWORK_QOS}]"
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as error:
        raise FieldError(where, text, f"not valid JSON: {getattr(error, 'msg', error)}") from None
    if not isinstance(document, dict):
        raise FieldError(
            where, text, "expected a JSON object with ingressLimit, egressLimit, ingressRequest, egressRequest"
        )
    return document


def node_capacity(node: Node, slo_total: Any, default: Quantity | None) -> Capacity | None:
    """The node's capacity (see the module docstring); None: unknown; ``FieldError`` naming an unreadable source.

    ``slo_total`` is the NodeSLO's (or system-config's) ``totalNetworkBandwidth``: a quantity or its text.
    """
    for annotation in CAPACITY_ANNOTATIONS:
        if annotation in node.annotations:
            value = parse_bandwidth(node.annotations[annotation], f"metadata.annotations[{annotation}]")
            return Capacity(value, annotation)
    if slo_total is not None:
        total = parse_bandwidth(slo_total, f"NodeSLO {node.name} spec.systemStrategy.totalNetworkBandwidth")
        if total:
            return Capacity(total, SYSTEM_CONFIG)
    return Capacity(default, DEFAULT) if default is not None else None


def capacity_or_problem(node: Node, slo_total: Any, default: Quantity | None) -> tuple[int | None, str]:
    """(capacity bits/s or None, "" or why it is unreadable): :func:`node_capacity` without raising; kept per
    node name and the values it reads (every table of the nodes reads them, and they rarely change)."""
    key = (node.name, *(node.annotations.get(annotation) for annotation in CAPACITY_ANNOTATIONS), slo_total, default)
    held = _CAPACITIES.get(key)
    if held is None:
        try:
            found = node_capacity(node, slo_total, default)
            held = (found.bits if found is not None else None), ""
        except FieldError as error:
            held = None, f"node {node.name} bandwidth capacity unreadable: {error}"
        remember(_CAPACITIES, key, held, _CAPACITIES_KEPT)
    return held


_CAPACITIES: dict[tuple[Any, ...], tuple[int | None, str]] = {}
_CAPACITIES_KEPT = 20_000


def slo_network_total(slo: NodeSLO) -> Quantity | None:
    """The NodeSLO's ``systemStrategy.totalNetworkBandwidth``, where set."""
    system = slo.spec.system_strategy
    return system.total_network_bandwidth if system is not None else None


def slo_network_totals(snapshot: Snapshot) -> dict[str, Quantity]:
    """node -> ``systemStrategy.totalNetworkBandwidth`` of its NodeSLO, where set."""
    return {slo.metadata.name: total for slo in snapshot.node_slos if (total := slo_network_total(slo)) is not None}


def headroom_score(total: Any, after: Any) -> Any:
    """NetworkBandwidth's raw score ``(total - used_after) * 100 // total`` (elementwise), floored at 0, and 0
    where the capacity is unknown (``total`` <= 0). Floored before the multiplication: with bandwidths <= 1P
    and used bandwidth <= 2**60 nothing overflows int64."""
    total, after = np.asarray(total), np.asarray(after)
    safe = np.where(total > 0, total, 1)
    return np.where(total > 0, np.maximum(0, total - after) * 100 // safe, 0)
