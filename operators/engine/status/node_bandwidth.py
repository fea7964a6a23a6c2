"""What each node advertises as netaware's bandwidth extended resources (pure): the rule the ``nodebandwidth``
controller writes into ``status.capacity`` and ``status.allocatable`` so that kube-scheduler's own
NodeResourcesFit accounts bandwidth — its assumed pods, preemption and ResourceQuotas included.

1. The node's capacity is the one bandwidth model's (:func:`operators.engine.cluster.bandwidth.node_capacity`:
   node annotations, the NodeSLO's ``totalNetworkBandwidth``, the configured default).
2. Per resource of the accounting mode, the node advertises that capacity less what its *unaccounted* pods use
   (:meth:`Accounting.advertised`): pods bound to it, not finished, that request none of the mode's resources
   (created before netaware's resources, or while the webhook was down). kube-scheduler counts only the
   resources, so ``requested resources <= advertised`` is exactly ``all pods' demand <= capacity``.
3. capacity = allocatable: kubelet sets every extended resource's allocatable to its capacity on its status
   updates, so a reduced allocatable alone would not survive a real node.
4. Resources netaware does not advertise in this mode (the other mode's) are removed; a node whose capacity is
   unknown or unreadable, or which carries an unaccounted pod whose bandwidth is unreadable, advertises 0 (no
   pod that asks for bandwidth fits there: its usage is unknown), with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from operators.api.quantity import Quantity
from operators.engine.cluster.bandwidth import RESOURCES, Accounting, capacity_or_problem
from operators.engine.cluster.objects import Node
from operators.engine.cluster.usage import PodUsage


@dataclass(frozen=True)
class Advertisement:
    """A node's wanted resources (name -> bits/s; None: remove it) and why it advertises 0, if it does."""

    resources: Mapping[str, int | None]
    problem: str = ""


def unaccounted_usage(accounting: Accounting) -> PodUsage:
    """The bandwidth of the pods kube-scheduler does not count (rule 2), per node, kept by delta over pod changes."""
    return PodUsage(selects=lambda pod: not accounting.accounted(pod.requests), keeps_members=False)


def advertisement(
    node: Node, slo_total: Any, default: Quantity | None, usage: PodUsage, accounting: Accounting
) -> Advertisement:
    """What ``node`` should advertise (see the module docstring); ``usage``: :func:`unaccounted_usage`'s."""
    removed: dict[str, int | None] = {name: None for name in RESOURCES if name not in accounting.resources}
    capacity, problem = capacity_or_problem(node, slo_total, default)
    if capacity is None and not problem:
        problem = f"node {node.name} bandwidth capacity unknown (no annotation, NodeSLO total or default)"
    problem = problem or usage.problem(node.name) or ""
    if problem:
        return Advertisement({**removed, **dict.fromkeys(accounting.resources, 0)}, problem)
    assert capacity is not None
    return Advertisement({**removed, **accounting.advertised(capacity, *usage.used(node.name))})


def status_patch(node: Node, wanted: Advertisement) -> dict[str, Any] | None:
    """The merge patch of ``nodes/<name>/status`` that makes ``node`` advertise ``wanted`` (rule 3); None when it
    already does."""
    sections: dict[str, dict[str, str | None]] = {}
    for section, held in (("capacity", node.capacity), ("allocatable", node.allocatable)):
        changes: dict[str, str | None] = {}
        for name, amount in wanted.resources.items():
            have = held.get(name)
            if amount is None:
                if have is not None:
                    changes[name] = None
            elif have is None or have.nanos != amount * 10**9:
                changes[name] = str(amount)
        if changes:
            sections[section] = changes
    return {"status": sections} if sections else None


def advertised(node: Node) -> dict[str, int]:
    """What ``node`` advertises now (allocatable, as kube-scheduler reads it) of netaware's resources."""
    return {name: node.allocatable[name].value() for name in RESOURCES if name in node.allocatable}
