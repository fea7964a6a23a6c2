"""Topology-ordered scheduling: which pods carrying netaware's scheduling gate to release now (pure).

A pod of an AppGroup that opted in is created with the gate ``netaware.io/topology-order`` (the webhook adds
it); kube-scheduler leaves a gated pod alone. :func:`gate_plan` decides, for the members of one AppGroup, which
gated pods to release (the controller then removes exactly that gate):

1. **An invalid AppGroup** (unknown algorithm, duplicate selector, unknown dependency, a cycle): every gated pod
   is released at once — an order that cannot be computed must never hold pods. **No AppGroup**: a gated pod is
   released once it is ``grace`` seconds old. The AppGroup and its pods come on watches of their own, and a
   ``kubectl apply`` of both, or a burst of them, can show the pods first: released at once, they lost their
   order (and their plan) to a watch that was a second late (measured: 14 pods of 2,080 in a burst of 250
   AppGroups on the emulator).
2. **A workload not in the spec** (the pod's workload label names no workload): released.
3. **Dependencies first.** A pod is released once no workload it depends on — directly or through others —
   has a pod that is neither bound to a node nor terminated, and not before it is ``grace`` seconds old
   (default 3) when it depends on anything: the Deployments of one ``kubectl apply`` create their pods over a
   second or two, in any order, and a ReplicaSet in batches (1, 2, 4, ...); a dependency with one replica
   bound and the next not created yet is not a dependency placed. A workload without any pod after that
   holds no one.
   NetworkOverhead scores a pod against the placed pods of its workload's dependencies, so this is the order
   in which every pod is scored with its dependencies already placed. (``status.topologyOrder`` lists a
   workload *before* the workloads it depends on — upstream's TopologicalSort pops the frontend first, when
   none of its dependencies is placed; read as a release order it would make NetworkOverhead score every
   pod equally. ``netaware simulate --scenario boutique`` measures both.) The rule depends on the spec only,
   so an order that changes with the spec changes who waits at the next evaluation, never strands a pod.
4. **Timeout.** A pod still waiting ``timeout`` seconds after its creation is released whatever the order
   (annotation ``netaware.io/ordered-scheduling-timeout`` on the AppGroup, in seconds or as ``90s``, ``2m``,
   ``1h``; else the controller's default). A pod that never schedules cannot hold its dependents forever.

Pods released in one evaluation are not bound yet: their dependents wait for the next, so an AppGroup is
released in waves, dependencies first. Other gates on a pod are never this module's business.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.engine.cluster.objects import Pod
from operators.engine.status.dependencies import dependency_graph, validate

GATE = keys.TOPOLOGY_ORDER_GATE
DEFAULT_TIMEOUT_SECONDS = 60.0
GRACE_SECONDS = 3.0  # a pod with dependencies is not released in order younger than this
MAX_TIMEOUT_SECONDS = 86_400.0

# Why a pod was released (the controller's Event reason and metric label).
IN_ORDER = "InOrder"
TIMEOUT = "Timeout"
NO_APPGROUP = "AppGroupNotFound"
INVALID_APPGROUP = "AppGroupInvalid"
NOT_A_WORKLOAD = "NotAWorkload"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
_UNIT = {None: 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


@dataclass(frozen=True)
class Release:
    """A gated pod to release, why, and how long it waited (seconds since its creation; 0 when unknown)."""

    pod: Pod
    reason: str
    waited: float


@dataclass(frozen=True)
class Waiting:
    """The gated pods of one workload still held, and the workloads they wait for (selectors, sorted)."""

    selector: str
    pods: int
    waiting_for: tuple[str, ...]


@dataclass(frozen=True)
class GatePlan:
    release: tuple[Release, ...] = ()
    waiting: tuple[Waiting, ...] = ()  # in spec order
    next_deadline: float | None = None  # when the first held pod times out (seconds since the epoch)


def is_gated(pod: Pod) -> bool:
    return GATE in pod.scheduling_gates


def timeout_of(group: AppGroup | None, default: float) -> tuple[float, str | None]:
    """(the AppGroup's timeout in seconds, a problem with its annotation or None). An unreadable annotation
    falls back to ``default``, and the problem names it."""
    annotations = (group.metadata.annotations or {}) if group is not None else {}
    text = annotations.get(keys.ORDERED_SCHEDULING_TIMEOUT)
    if text is None:
        return default, None
    match = _DURATION.match(text)
    seconds = float(match.group(1)) * _UNIT[match.group(2)] if match else -1.0
    if not 0 < seconds <= MAX_TIMEOUT_SECONDS:
        return default, (
            f'metadata.annotations[{keys.ORDERED_SCHEDULING_TIMEOUT}] "{text[:64]}" is not a duration between 0 '
            f"and {MAX_TIMEOUT_SECONDS:.0f}s (e.g. 90, 90s, 2m); {default:g}s is used"
        )
    return seconds, None


def blocking_dependencies(graph: Mapping[str, list[str]]) -> dict[str, frozenset[str]]:
    """selector -> every selector it depends on, directly or through others (the graph is acyclic)."""
    closure: dict[str, frozenset[str]] = {}

    def visit(selector: str) -> frozenset[str]:
        held = closure.get(selector)
        if held is None:
            found: set[str] = set()
            for child in graph.get(selector, ()):
                found.add(child)
                found |= visit(child)
            held = closure[selector] = frozenset(found)
        return held

    for selector in graph:
        visit(selector)
    return closure


def without_order(
    group: AppGroup | None, gated: Iterable[Pod], now: float | None, grace: float = GRACE_SECONDS
) -> tuple[str, list[Pod], float | None] | None:
    """Rule 1: None when ``group`` gives an order; else why not, the gated pods to release at ``now`` (None: all),
    and when the others are due (the first of them to be ``grace`` seconds old)."""
    if group is not None:
        return (INVALID_APPGROUP, list(gated), None) if validate(group.spec) else None
    released, deadline = [], None
    for pod in gated:
        if now is None or pod.created is None or now - pod.created >= grace:
            released.append(pod)
        else:
            due = pod.created + grace
            deadline = due if deadline is None else min(deadline, due)
    return NO_APPGROUP, released, deadline


def gate_plan(
    group: AppGroup | None,
    members: Iterable[Pod],
    now: float | None,
    default_timeout: float = DEFAULT_TIMEOUT_SECONDS,
    grace: float = GRACE_SECONDS,
) -> GatePlan:
    """Which of ``members`` (the pods labelled for ``group``, gated or not) to release at ``now`` (seconds since
    the epoch; None: timeouts and the grace for absent workloads are not applied), and who stays gated and why;
    see the module docstring."""
    pods = list(members)
    gated = sorted((pod for pod in pods if is_gated(pod)), key=lambda pod: (pod.namespace, pod.name))
    if not gated:
        return GatePlan()

    def waited(pod: Pod) -> float:
        created = pod.created
        return max(now - created, 0.0) if created is not None and now is not None else 0.0

    if (unordered := without_order(group, gated, now, grace)) is not None:
        reason, now_released, due_next = unordered
        return GatePlan(tuple(Release(pod, reason, waited(pod)) for pod in now_released), (), due_next)
    assert group is not None
    graph = dependency_graph(group.spec)
    closure = blocking_dependencies(graph)
    unplaced = {
        selector
        for pod in pods
        if not pod.node_name and not pod.is_terminal
        for selector in (pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL),)
        if selector is not None
    }
    absent = set(graph) - {pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL) for pod in pods}
    timeout, _ = timeout_of(group, default_timeout)
    released: list[Release] = []
    held: dict[str, list[Pod]] = {}
    blockers: dict[str, tuple[str, ...]] = {}
    deadline: float | None = None
    for pod in gated:
        selector = pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL)
        if selector is None or selector not in graph:
            released.append(Release(pod, NOT_A_WORKLOAD, waited(pod)))
            continue
        young = now is not None and pod.created is not None and now - pod.created < grace
        waiting_for = tuple(sorted(closure[selector] & unplaced))
        if young and closure[selector] and not waiting_for:  # settling: its dependencies' pods may still come
            waiting_for = tuple(sorted(closure[selector] & absent)) or tuple(sorted(closure[selector]))
        if not waiting_for:
            released.append(Release(pod, IN_ORDER, waited(pod)))
        elif now is not None and (pod.created is None or now - pod.created >= timeout):
            released.append(Release(pod, TIMEOUT, waited(pod)))
        else:
            held.setdefault(selector, []).append(pod)
            blockers[selector] = waiting_for
            if pod.created is not None:
                due = pod.created + (grace if young else timeout)  # a grace that ends is worth a look
                deadline = due if deadline is None else min(deadline, due)
    waiting = (Waiting(selector, len(held[selector]), blockers[selector]) for selector in graph if selector in held)
    return GatePlan(tuple(released), tuple(waiting), deadline)


def release_patch(pod: Pod) -> list[dict[str, object]]:
    """The JSON patch removing netaware's gate from ``pod`` and nothing else: a ``test`` of the gates as last
    seen (a concurrent change makes the patch fail, and the pod is looked at again), then the gates without
    ours."""
    current = [{"name": name} for name in pod.scheduling_gates]
    kept = [gate for gate in current if gate["name"] != GATE]
    return [
        {"op": "test", "path": "/spec/schedulingGates", "value": current},
        {"op": "replace", "path": "/spec/schedulingGates", "value": kept},
    ]
