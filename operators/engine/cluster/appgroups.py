"""Which namespaces an AppGroup's workloads live in, and which AppGroup a pod belongs to (shared by status,
admission and scheduling)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from operators.api import keys
from operators.api.appgroup import AppGroup


def ordered_scheduling(group: AppGroup | None) -> str:
    """``group``'s ``netaware.io/ordered-scheduling`` annotation, trimmed and lower-cased ("" when absent)."""
    annotations = (group.metadata.annotations or {}) if group is not None else {}
    return annotations.get(keys.ORDERED_SCHEDULING, "").strip().lower()


def plans_by_whole_group(group: AppGroup | None) -> bool:
    """Whether ``group`` asked for releases by plan (``netaware.io/ordered-scheduling: plan``)."""
    return ordered_scheduling(group) == keys.GATED_PLAN


def plans_ungated(group: AppGroup | None) -> bool:
    """Whether ``group`` asked for plans made at scheduling time (``netaware.io/ordered-scheduling: plan-ungated``)."""
    return ordered_scheduling(group) == keys.UNGATED_PLAN


def workload_namespaces(group: AppGroup) -> tuple[str, ...]:
    """The namespaces an AppGroup's pods may live in, sorted."""
    own = group.metadata.namespace
    return tuple(sorted({entry.workload.namespace or own for entry in group.spec.workloads} | {own}))


def by_name(app_groups: Iterable[AppGroup]) -> Mapping[str, tuple[AppGroup, ...]]:
    """``app_groups`` by name, every namespace's: what a pod's AppGroup label names."""
    index: dict[str, list[AppGroup]] = defaultdict(list)
    for group in app_groups:
        index[group.metadata.name].append(group)
    return MappingProxyType({name: tuple(groups) for name, groups in index.items()})


def pod_appgroup(name: str, pod_namespace: str, app_groups: Iterable[AppGroup]) -> AppGroup | None:
    """The AppGroup ``name`` that covers ``pod_namespace``: one in the pod's own namespace wins over one elsewhere
    whose workloads name this namespace (then the first namespace in order)."""
    candidates = [
        group for group in app_groups if group.metadata.name == name and pod_namespace in workload_namespaces(group)
    ]
    if not candidates:
        return None
    return min(candidates, key=lambda group: (group.metadata.namespace != pod_namespace, group.metadata.namespace))
