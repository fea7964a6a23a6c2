"""Which namespaces an AppGroup's workloads live in (shared by status, admission and scheduling)."""

from __future__ import annotations

from operators.api.appgroup import AppGroup


def workload_namespaces(group: AppGroup) -> tuple[str, ...]:
    """The namespaces an AppGroup's pods may live in, sorted."""
    own = group.metadata.namespace
    return tuple(sorted({entry.workload.namespace or own for entry in group.spec.workloads} | {own}))
