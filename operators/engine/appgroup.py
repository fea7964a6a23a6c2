"""AppGroup status as a pure function of the AppGroup, the snapshot and the clock.

Foundation scope: ``runningWorkloads`` (pods labelled ``appgroup.diktyo.x-k8s.io=<name>``
in phase Running, in the namespaces the workloads name, default the AppGroup's own —
upstream counts cluster-wide) and ``observedGeneration``. The topology order, placements
and conditions arrive with the AppGroup controller issue.
"""

from __future__ import annotations

import datetime

from operators.api.appgroup import AppGroup, AppGroupStatus
from operators.engine.snapshot import Pod, Snapshot


def workload_namespaces(group: AppGroup) -> tuple[str, ...]:
    """The namespaces an AppGroup's pods may live in, sorted."""
    own = group.metadata.namespace or "default"
    return tuple(sorted({entry.workload.namespace or own for entry in group.spec.workloads} | {own}))


def member_pods(group: AppGroup, snapshot: Snapshot) -> tuple[Pod, ...]:
    """Pods labelled with this AppGroup's name in the namespaces it covers."""
    pods: list[Pod] = []
    for namespace in workload_namespaces(group):
        pods.extend(snapshot.appgroup_pods(namespace, group.metadata.name))
    return tuple(pods)


def appgroup_status(group: AppGroup, snapshot: Snapshot, now: datetime.datetime) -> AppGroupStatus:
    """The status the controller writes for ``group``."""
    del now
    previous = group.status or AppGroupStatus()
    running = sum(1 for pod in member_pods(group, snapshot) if pod.phase == "Running")
    return previous.model_copy(
        update={
            "running_workloads": running,
            "observed_generation": group.metadata.generation,
        }
    )
