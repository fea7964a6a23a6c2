"""AppGroup status as a pure function of the AppGroup, the snapshot and the clock.

``appgroup_status`` computes, in order:

1. **Validation.** An unknown algorithm, two workloads sharing a selector, a dependency on
   a selector that is not a workload, a dependency cycle, or ``numMembers`` below the number
   of workloads make ``Ready=False`` with a reason and a message naming the workloads. The
   previous valid ``topologyOrder`` is kept; no default order is made up (upstream falls back
   to the spec order).
2. **Topology order.** Computed from the selectors (upstream keys its graph by workload *name*
   and then looks it up by *selector*, so any name != selector silently falls back), only when
   the spec changed (``metadata.generation`` differs from ``status.observedGeneration``), not on
   a 24 h timer. Every workload appears, including those without edges. The list is stored
   sorted by selector, as upstream, because the TopologicalSort plugin binary-searches it.
   ``topologyCalculationTime`` moves only when the order changes.
3. **Running workloads.** Pods labelled ``appgroup.diktyo.x-k8s.io=<name>`` in phase Running,
   in the namespaces the workloads name (default: the AppGroup's own). Upstream counts
   cluster-wide, so same-named AppGroups in two namespaces count each other's pods.
4. **Placements** (ours): per workload, its pods with node, zone, region and phase. **Gated pods** (ours):
   per workload, how many pods the topology-order gate holds and which workloads they wait for
   (:mod:`operators.engine.status.gates`; timeouts are the controller's business, not the status's).
   ``plan``: for members released by a whole-group plan (annotation ``netaware.io/planned-node``), per workload
   and planned node the pods planned there and bound there, and how many are on the plan, off it, pending.
5. **Size.** etcd refuses objects above 1.5 MiB, and a status that cannot be written would be
   recomputed and refused forever. A status that would take the whole object past ``OBJECT_BUDGET``
   keeps only pod counts in its placements; if that is still too large, the topology order is left
   out, then the placements (only a spec with thousands of workloads gets there). Condition ``StatusComplete=False``
   says what was left out; ``True`` otherwise.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence

import orjson

from operators.api import keys
from operators.api.appgroup import (
    AppGroup,
    AppGroupSpec,
    AppGroupStatus,
    GatedWorkload,
    PlannedNode,
    PlannedWorkload,
    PlanStatus,
    PodPlacement,
    TopologyOrderEntry,
    WorkloadPlacement,
)
from operators.engine.cluster.appgroups import workload_namespaces
from operators.engine.cluster.conditions import condition
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.status.dependencies import dependency_graph, validate
from operators.engine.status.gates import gate_plan
from operators.engine.status.toposort import topology_order

READY_REASON = "TopologyComputed"
STATUS_COMPLETE = "StatusComplete"
# Bytes of JSON for the whole object: etcd's limit is 1.5 MiB, less room for managedFields and annotations.
OBJECT_BUDGET = 1_300_000


def ordered_entries(spec: AppGroupSpec) -> list[TopologyOrderEntry]:
    """The topology order of a valid spec, 1-based, stored sorted by selector."""
    order = topology_order(dependency_graph(spec), spec.topology_sorting_algorithm)
    info_by_selector = {entry.workload.selector: entry.workload for entry in spec.workloads}
    entries = [
        TopologyOrderEntry(workload=info_by_selector[selector], index=position)
        for position, selector in enumerate(order, start=1)
    ]
    return sorted(entries, key=lambda entry: entry.workload.selector)


def member_pods(group: AppGroup, snapshot: Snapshot) -> tuple[Pod, ...]:
    """Pods labelled with this AppGroup's name in the namespaces it covers."""
    pods: list[Pod] = []
    for namespace in workload_namespaces(group):
        pods.extend(snapshot.appgroup_pods(namespace, group.metadata.name))
    return tuple(pods)


def placements(group: AppGroup, pods: tuple[Pod, ...], snapshot: Snapshot) -> list[WorkloadPlacement]:
    """Per workload (spec order), its pods (by namespace and name) with node, zone, region and phase."""
    by_selector: dict[str, list[PodPlacement]] = {}
    for pod in sorted(pods, key=lambda member: (member.namespace, member.name)):
        selector = pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL)
        if selector is None:
            continue
        node = snapshot.node_by_name.get(pod.node_name) if pod.node_name else None
        by_selector.setdefault(selector, []).append(
            PodPlacement(
                name=pod.name,
                namespace=pod.namespace,
                phase=pod.phase,
                node=pod.node_name or None,
                zone=(node.zone or None) if node else None,
                region=(node.region or None) if node else None,
            )
        )
    seen: set[str] = set()
    result: list[WorkloadPlacement] = []
    for entry in group.spec.workloads:
        selector = entry.workload.selector
        if selector not in seen:
            seen.add(selector)
            result.append(WorkloadPlacement(selector=selector, pods=by_selector.get(selector, [])))
    return result


def gated_workloads(group: AppGroup, pods: tuple[Pod, ...]) -> list[GatedWorkload]:
    """Per workload, the pods held by the topology-order gate and what they wait for. Empty, not absent, when
    none is held: the status is written as a merge patch, where an absent field keeps its old value."""
    held = gate_plan(group, pods, None).waiting
    return [GatedWorkload(selector=w.selector, pods=w.pods, waiting_for=list(w.waiting_for)) for w in held]


def _order_is_current(group: AppGroup, previous: AppGroupStatus) -> bool:
    generation = group.metadata.generation
    ready = next((c for c in previous.conditions or () if c.type == keys.CONDITION_READY), None)
    return (
        generation is not None
        and previous.observed_generation == generation
        and previous.topology_order is not None
        and ready is not None
        and ready.status == "True"
    )


def appgroup_status(group: AppGroup, snapshot: Snapshot, now: datetime.datetime) -> AppGroupStatus:
    """The status the controller writes for ``group`` (see the module docstring)."""
    previous = group.status or AppGroupStatus()
    generation = group.metadata.generation
    pods = member_pods(group, snapshot)
    order = previous.topology_order
    calculated = previous.topology_calculation_time
    problems = validate(group.spec)
    if problems:
        ready = condition(
            previous.conditions,
            keys.CONDITION_READY,
            False,
            problems[0].reason,
            "; ".join(problem.message for problem in problems),
            now,
            generation,
        )
    else:
        if not _order_is_current(group, previous):
            computed = ordered_entries(group.spec)
            if computed != order:
                order, calculated = computed, now
            calculated = calculated or now
        workloads = len(group.spec.workloads)
        ready = condition(
            previous.conditions,
            keys.CONDITION_READY,
            True,
            READY_REASON,
            f"{workloads} workload{'s' if workloads != 1 else ''} ordered by {group.spec.topology_sorting_algorithm}",
            now,
            generation,
        )
    other_conditions = [c for c in previous.conditions or () if c.type not in (keys.CONDITION_READY, STATUS_COMPLETE)]
    status = previous.model_copy(
        update={
            "running_workloads": sum(1 for pod in pods if pod.phase == "Running"),
            "topology_order": order,
            "topology_calculation_time": calculated,
            "placements": placements(group, pods, snapshot),
            "gated_pods": gated_workloads(group, pods) if not problems else [],
            "plan": plan_status(group, pods),
            "conditions": [ready, *other_conditions],
            "observed_generation": generation,
        }
    )
    rest = len(orjson.dumps(group.model_dump(mode="json", by_alias=True, exclude={"status"})))
    return bounded(status, previous, now, generation, OBJECT_BUDGET - rest)


def plan_status(group: AppGroup, pods: Sequence[Pod]) -> PlanStatus | None:
    """``status.plan``: per workload of the spec and planned node, the members planned there and how many are
    bound there; the totals on the plan, off it (bound elsewhere) and pending. None when no member was planned."""
    planned = [pod for pod in pods if pod.annotations.get(keys.PLANNED_NODE) and not pod.is_terminal]
    if not planned:
        return None
    counts: dict[str, dict[str, list[int]]] = {}
    on = off = 0
    for pod in planned:
        node = pod.annotations[keys.PLANNED_NODE]
        cell = counts.setdefault(pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL, ""), {}).setdefault(node, [0, 0])
        cell[0] += 1
        if pod.node_name == node:
            cell[1] += 1
            on += 1
        elif pod.node_name:
            off += 1
    workloads = [
        PlannedWorkload(
            selector=entry.workload.selector,
            nodes=[
                PlannedNode(node=node, planned=n, bound=b)
                for node, (n, b) in sorted(counts[entry.workload.selector].items())
            ],
        )
        for entry in group.spec.workloads
        if entry.workload.selector in counts
    ]
    return PlanStatus(
        workloads=workloads, planned=len(planned), on_plan=on, off_plan=off, pending=len(planned) - on - off
    )


def _size(status: AppGroupStatus) -> int:
    """Bytes as stored (compact UTF-8 JSON)."""
    return len(orjson.dumps(status.to_wire()))


def bounded(
    status: AppGroupStatus, previous: AppGroupStatus, now: datetime.datetime, generation: int | None, budget: int
) -> AppGroupStatus:
    """``status`` within ``budget`` bytes of JSON (rule 5), with its ``StatusComplete`` condition."""
    left_out: list[str] = []
    if _size(status) > budget:
        counted = [
            WorkloadPlacement(selector=entry.selector, pods=[], pod_count=len(entry.pods))
            for entry in status.placements or ()
        ]
        pod_total = sum(len(entry.pods) for entry in status.placements or ())
        status = status.model_copy(update={"placements": counted})
        left_out.append(f"the {pod_total} pods of status.placements (counts kept per workload)")
    if _size(status) > budget:
        order = status.topology_order or []
        status = status.model_copy(update={"topology_order": None})
        left_out.append(f"status.topologyOrder of {len(order)} workloads")
    if _size(status) > budget:
        status = status.model_copy(update={"placements": None})
        left_out.append("status.placements")
    complete = condition(
        previous.conditions,
        STATUS_COMPLETE,
        not left_out,
        "TooLarge" if left_out else "Complete",
        f"left out to keep the object within {OBJECT_BUDGET // 1000} kB: {'; '.join(left_out)}"
        if left_out
        else "everything fits",
        now,
        generation,
    )
    return status.model_copy(update={"conditions": [*(status.conditions or []), complete]})
