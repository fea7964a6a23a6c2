"""The rebalancer's layout of an AppGroup, as the plan's release follows it (pure).

The descheduler's rebalancer moves an AppGroup's pods toward a target layout and writes the layout its cycle's
moves make (per workload, how many pods on each node), with the moves, on the AppGroup (annotation
``netaware.io/rebalance``) before it evicts; it evicts once its own cluster cache holds that annotation, which the
release reads. Until the layout's ``until``, a pending pod of a workload with fewer pods on some layout node than
the layout says (a *deficit*: one per move, the move's node) is planned on those nodes only — so an evicted pod's
replacement lands where the move said. A replacement whose deficit nodes are all still held by terminating pods (a
swap: the pod moved away from there has not gone yet) waits for them (:func:`held_by_leaving`). Pods beyond the
deficits (a scale-up) and pods after ``until`` are planned as usual. An unreadable annotation is ignored (the plan
then decides alone) and reported by ``explain appgroup``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.meta import format_time, parse_time
from operators.engine.cluster.fit import insufficient, requested_on_nodes
from operators.engine.cluster.objects import Pod
from operators.engine.scheduling.index import ClusterIndex

Layout = Mapping[str, Mapping[str, int]]  # workload selector -> node -> pods
N = TypeVar("N", str, int)  # a node, by name or by position


@dataclass(frozen=True)
class Rebalancing:
    """What the annotation holds: the layout, until when it holds (seconds since the epoch), the moves made."""

    layout: Layout
    until: float
    moves: tuple[Mapping[str, Any], ...] = ()

    def to_annotation(self) -> str:
        until = format_time(datetime.datetime.fromtimestamp(self.until, datetime.UTC))
        layout = {workload: dict(sorted(nodes.items())) for workload, nodes in sorted(self.layout.items())}
        return json.dumps({"until": until, "layout": layout, "moves": list(self.moves)}, separators=(",", ":"))


def rebalancing_of(group: AppGroup) -> Rebalancing | None:
    """The annotation read (None when absent or unreadable)."""
    text = (group.metadata.annotations or {}).get(keys.REBALANCE)
    if not text:
        return None
    try:
        document = json.loads(text)
        until = parse_time(document["until"]).timestamp()
        layout = {
            str(workload): {str(node): int(count) for node, count in nodes.items()}
            for workload, nodes in document["layout"].items()
        }
        moves = tuple(move for move in document.get("moves") or () if isinstance(move, dict))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return Rebalancing(layout, until, moves)


def layout_at(group: AppGroup, now: float) -> Layout | None:
    """The layout the release follows at ``now``: the annotation's, until its time."""
    found = rebalancing_of(group)
    return found.layout if found is not None and now < found.until else None


def deficits(wanted: Mapping[N, int], here: Mapping[N, int]) -> dict[N, int]:
    """One workload's deficit nodes under its layout (``wanted``: node -> pods) with ``here`` (node -> its pods
    there): node -> how many pods the layout still misses there (nodes by name or by position alike)."""
    return {node: count - here.get(node, 0) for node, count in wanted.items() if count > here.get(node, 0)}


def held_by_leaving(
    layout: Layout, members: Iterable[Pod], waiting: Iterable[Pod], index: ClusterIndex
) -> dict[str, str]:
    """The ``waiting`` (gated) members that fit none of their workload's deficit nodes now but would fit one once
    the terminating pods there are gone (pod key -> that node): a rebalancer's replacement whose room is still
    held by the pod a swap moved away. Released now, it would be planned elsewhere and its move missed; it waits
    instead (:func:`~operators.engine.planning.release.release_by_plan`, until the layout's ``until``) — an evicted
    pod always goes, so no wait is for ever. Counts requests and pods, as NodeResourcesFit does."""
    bound: dict[str, dict[str, int]] = {}
    for pod in members:
        if pod.node_name and not pod.is_terminating and not pod.is_terminal:
            workload = bound.setdefault(pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL, ""), {})
            workload[pod.node_name] = workload.get(pod.node_name, 0) + 1
    missing = {workload: list(deficits(nodes, bound.get(workload, {}))) for workload, nodes in layout.items()}
    pending = [(pod, missing.get(pod.labels.get(keys.APPGROUP_WORKLOAD_LABEL, ""), [])) for pod in waiting]
    pending = [(pod, nodes) for pod, nodes in pending if nodes]
    if not pending:
        return {}
    wanted = {node for _, nodes in pending for node in nodes}
    leaving = requested_on_nodes(
        pod for pods in index.usage.placed.values() for pod in pods.values()
        if pod.is_terminating and pod.node_name in wanted
    )  # fmt: skip
    held: dict[str, str] = {}
    for pod, nodes in pending:
        fits_now, waits_for = False, ""
        for name in nodes:
            node = index.node_by_name.get(name)
            if node is None:
                continue
            requested, count = index.requested(name)
            if not insufficient(pod.requests, node, requested, count):
                fits_now = True
                break
            freed, gone = leaving.get(name, ({}, 0))
            after = {resource: value - freed.get(resource, 0) for resource, value in requested.items()}
            if not waits_for and not insufficient(pod.requests, node, after, count - gone):
                waits_for = name
        if not fits_now and waits_for:
            held[pod.key] = waits_for
    return held
