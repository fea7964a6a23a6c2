"""kube-scheduler's default profile's filters for one pod, in its order (pure): the one rule every decision uses —
``netaware schedule`` and ``explain``, the planner (each pod of a plan, its own pods counted as it places them), the
stranded-pod check, the rebalancer's "where would it land" and LowNodeLoad's "does it fit elsewhere".

:func:`prefilter` runs every plugin's PreFilter once for the pod (:class:`Cycle`); :func:`failure` answers for one
node in O(terms) with the first plugin that rejects it and that plugin's reasons, in kube-scheduler's words, as its
framework records a node's status (a FailedScheduling message counts exactly these reasons):

=====================  ==================================================================================
plugin                 reasons
=====================  ==================================================================================
NodeUnschedulable      node(s) were unschedulable
TaintToleration        node(s) had untolerated taint(s)
NodeAffinity           node(s) didn't match Pod's node affinity/selector
NodePorts              node(s) didn't have free ports for the requested pod ports
NodeResourcesFit       Too many pods, Insufficient <resource> (each one that is short)
VolumeRestrictions,    the volume filters' reasons (:mod:`.volumes`): when the cluster view holds the storage
NodeVolumeLimits,      objects (PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes); a PreFilter
VolumeBinding,         rejection (a claim not found, ...) refuses every node with its message, and kube-scheduler's
VolumeZone             message then names it alone (:func:`unavailable`)
PodTopologySpread      node(s) didn't match pod topology spread constraints [(missing required label)]
InterPodAffinity       node(s) didn't match pod affinity rules / ... anti-affinity rules /
                       node(s) didn't satisfy existing pods anti-affinity rules
=====================  ==================================================================================

:func:`add_pod` counts a pod placed on a node into every plugin's state (requests, ports, spread, affinity), so a
plan's own pods constrain the next ones as bound pods would.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from operators.api.config.scheduler import IN_TREE_FILTERS, SchedulerConfig
from operators.api.errors import FieldError
from operators.api.selectors import EVERYTHING
from operators.engine.cluster.fit import amount, insufficient, placement_allows, tolerates, tolerates_unschedulable
from operators.engine.cluster.kube import interpod, ports, spread, volumes
from operators.engine.cluster.kube.terms import (
    HONOR,
    IGNORE,
    HostPort,
    SchedulingSpec,
    SpreadConstraint,
    scheduling_spec,
)
from operators.engine.cluster.kube.view import PlacedPods
from operators.engine.cluster.objects import Node, Pod

NODE_UNSCHEDULABLE, TAINT_TOLERATION, NODE_AFFINITY = "NodeUnschedulable", "TaintToleration", "NodeAffinity"
NODE_PORTS, RESOURCES_FIT = ports.NAME, "NodeResourcesFit"
TOPOLOGY_SPREAD, INTER_POD_AFFINITY = spread.NAME, interpod.NAME
UNSCHEDULABLE = "node(s) were unschedulable"
UNTOLERATED = "node(s) had untolerated taint(s)"
NODE_AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
UNREADABLE = "spec unreadable"
DEFAULT_FILTERS = IN_TREE_FILTERS  # kube-scheduler's default profile's filters netaware models, in its order

Requested = Callable[[str], tuple[Mapping[str, int], int]]  # node -> what its pods request, and how many they are


def spread_defaults(config: SchedulerConfig) -> tuple[SpreadConstraint, ...] | None:
    """The configuration's default topology spread constraints (None: kube-scheduler's system defaults); their
    selector is each pod's own default selector."""
    if config.default_spread is None:
        return None
    return tuple(SpreadConstraint(c.max_skew, c.topology_key, EVERYTHING, 1, HONOR, IGNORE, c.when_unsatisfiable)
                 for c in config.default_spread)  # fmt: skip


def allows(pod: Pod, node: Node) -> tuple[bool, bool]:
    """Whether ``node`` passes ``pod``'s nodeSelector and required node affinity, and its NoSchedule/NoExecute
    taints (PodTopologySpread's node inclusion policies)."""
    return placement_allows(pod, node), tolerates(pod, node)


@dataclass
class Cycle:
    """One pod's PreFilter results (see the module docstring); ``problem``: why the pod's spec cannot be read (every
    node then fails with it)."""

    pod: Pod
    spec: SchedulingSpec | None
    placed: PlacedPods
    requested: Requested
    interpod: interpod.InterPodState | None = None
    spread: spread.SpreadState | None = None
    problem: str = ""
    # what pods placed on top of the cluster (a plan's own) add per node: requests, their count, host ports
    added: dict[str, Counter[str]] = field(default_factory=dict)
    added_pods: Counter[str] = field(default_factory=Counter)
    added_ports: dict[str, list[tuple[HostPort, ...]]] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)  # placed pods taken off their node (their keys)
    volumes: volumes.VolumeState | None = None


def prefilter(pod: Pod, placed: PlacedPods, requested: Requested,
              defaults: Sequence[SpreadConstraint] | None = None) -> Cycle:  # fmt: skip
    """Every default plugin's PreFilter for ``pod`` (``defaults``: the configuration's default spread constraints,
    :func:`spread_defaults`; None: the system's)."""
    try:
        spec = scheduling_spec(pod)
    except FieldError as error:
        return Cycle(pod, None, placed, requested, problem=f"{UNREADABLE}: {error}")
    return Cycle(
        pod,
        spec,
        placed,
        requested,
        interpod=interpod.prefilter(pod, spec, placed),
        spread=spread.prefilter(pod, spec, placed, allows, defaults),
        volumes=volumes.prefilter(pod, storage)
        if volumes.concerns(pod) and (storage := placed.storage()) is not None
        else None,
    )


def failure(cycle: Cycle, node: Node, enabled: Collection[str] = DEFAULT_FILTERS) -> tuple[str, tuple[str, ...]]:
    """The first default filter (of ``enabled``) that rejects ``node`` for the cycle's pod, and its reasons;
    ("", ()) when every one passes."""
    pod = cycle.pod
    if cycle.problem:
        return ("", (cycle.problem,))
    early = cycle.volumes
    if early is not None and early.problem and early.problem_plugin in enabled:
        return (early.problem_plugin, (early.problem,))  # a PreFilter's rejection: before any node's Filter
    if NODE_UNSCHEDULABLE in enabled and node.unschedulable and not tolerates_unschedulable(pod):
        return (NODE_UNSCHEDULABLE, (UNSCHEDULABLE,))
    if TAINT_TOLERATION in enabled and not tolerates(pod, node):
        return (TAINT_TOLERATION, (UNTOLERATED,))
    if NODE_AFFINITY in enabled and not placement_allows(pod, node):
        return (NODE_AFFINITY, (NODE_AFFINITY_MISMATCH,))
    spec = cycle.spec
    assert spec is not None
    if NODE_PORTS in enabled and spec.host_ports:
        used = [*cycle.placed.ports_on(node.name, cycle.removed), *cycle.added_ports.get(node.name, ())]
        if ports.conflicts(spec.host_ports, used):
            return (NODE_PORTS, (ports.CONFLICT,))
    if RESOURCES_FIT in enabled:
        requested, count = cycle.requested(node.name)
        extra = cycle.added.get(node.name)
        if extra:
            requested = {name: requested.get(name, 0) + extra.get(name, 0) for name in {*requested, *extra}}
        short = insufficient(pod.requests, node, requested, count + cycle.added_pods.get(node.name, 0))
        if short:
            return (RESOURCES_FIT, tuple(short))
    if cycle.volumes is not None:
        plugin, reasons = volumes.failure(cycle.volumes, node)
        if reasons and plugin in enabled:
            return (plugin, reasons)
    if TOPOLOGY_SPREAD in enabled and (reason := spread.check(cycle.spread, node)):
        return (TOPOLOGY_SPREAD, (reason,))
    if INTER_POD_AFFINITY in enabled and (reason := interpod.check(cycle.interpod, node)):
        return (INTER_POD_AFFINITY, (reason,))
    return ("", ())


def unavailable(nodes: int, reasons: Mapping[str, int]) -> str:
    """kube-scheduler's FailedScheduling message for a pod no node of ``nodes`` fits: ``0/N nodes are available:``
    and ``count reason`` per reason (each node counted once per reason of the first filter that rejected it),
    sorted as strings, as kube-scheduler sorts them — or, when a volume PreFilter rejected the pod, its message
    alone (upstream's ``PreFilterMsg``)."""
    early = [reason for reason, count in reasons.items() if count and volumes.rejected_early(reason)]
    if early:
        return f"0/{nodes} nodes are available: {early[0]}."
    found = sorted(f"{count} {reason}" for reason, count in reasons.items() if count)
    return f"0/{nodes} nodes are available: " + ", ".join(found) + "."


def add_pod(cycle: Cycle, other: Pod, node: Node, sign: int = 1) -> None:
    """Count ``other`` placed on ``node`` (``sign`` -1: taken off again) in every plugin of the cycle."""
    added = cycle.added.setdefault(node.name, Counter())
    for name, quantity in other.requests.items():
        added[name] += sign * amount(name, quantity)
    cycle.added_pods[node.name] += sign
    try:
        other_ports = scheduling_spec(other).host_ports
    except FieldError:
        other_ports = ()
    if other_ports:
        held = cycle.added_ports.setdefault(node.name, [])
        if sign > 0:
            held.append(other_ports)
        elif other_ports in held:
            held.remove(other_ports)
        elif other.node_name == node.name:  # a placed pod taken off its node
            cycle.removed.add(other.key)
    if cycle.spread is not None:
        spread.add_pod(cycle.spread, other, node, sign)
    if cycle.interpod is not None:
        interpod.add_pod(cycle.interpod, other, node, sign)
    elif sign > 0 and cycle.spec is not None:
        # a placed pod may bring the first anti-affinity term that concerns this pod: the PreFilter skipped it
        state = interpod.InterPodState(cycle.pod, cycle.spec, cycle.placed)
        interpod.add_pod(state, other, node, sign)
        if state.existing_anti or state.affinity or state.anti:
            cycle.interpod = state
