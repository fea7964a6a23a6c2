"""Which scheduler an AppGroup's pod is sent to at admission (pure): the webhook's third rule.

netaware's scheduler (the chart's second scheduler: kube-scheduler with netaware's extender — NetworkOverhead,
the bandwidth fit, plan-ungated plans) places only the pods that name it in ``spec.schedulerName``; an
application's Deployments name no scheduler, and a pod that names none is the default scheduler's. So, for a pod
of an AppGroup:

1. The scheduler wanted is the AppGroup's annotation ``netaware.io/scheduler-name`` when it has one (``""``:
   none, the AppGroup opts out), else the webhook's ``--scheduler-name`` (the chart sets it to the second
   scheduler's name when that is enabled; empty: the rule is off).
2. A pod that names no scheduler or the default one (``default-scheduler``: the API server fills it in before
   admission) gets the wanted one.
3. A pod that names another scheduler is left alone — someone chose it — and the answer says so
   (:attr:`SchedulerChoice.conflict`: a warning to the client, an Event on the AppGroup), because none of
   netaware's scheduling applies to it.
4. With ``plans_keep_scheduler`` (the webhook's ``--plan-pods-keep-scheduler``), a pod of an AppGroup released by
   plan (``ordered-scheduling: plan``) whose AppGroup names no scheduler in its annotation keeps the one it names:
   the cluster's kube-scheduler binds it. Each such pod is released with a required node affinity for its planned
   node, so the scheduler only checks that node, and with its own filters: netaware's scheduler would also call
   the extender for it, a round trip per pod in kube-scheduler's one scheduling loop that, for the 33 pods of
   Online Boutique released together, made up the whole gap between the plans' pace and the webhook's bound
   (measured: 0.85x of the bound with netaware's scheduler, 1.03x without its extender). The chart sets it
   unless only the extender would check bandwidth (``bandwidth.guarantee: extender``) or keep the plan
   (``operator.planAffinity: preferred``). A pod the plan releases without a place (a timeout, a pod no node
   holds) is then placed by that scheduler without netaware's network scores.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.engine.cluster.appgroups import plans_by_whole_group


@dataclass(frozen=True)
class SchedulerChoice:
    patch: list[dict[str, Any]] = field(default_factory=list)  # JSON patch operations on the pod
    conflict: str = ""  # why a pod of the AppGroup keeps a scheduler that is not netaware's


def wanted_scheduler(group: AppGroup, default: str) -> str:
    """The scheduler ``group``'s pods are sent to ("" : none) — rule 1."""
    annotations = group.metadata.annotations or {}
    return annotations[keys.SCHEDULER_NAME].strip() if keys.SCHEDULER_NAME in annotations else default


def scheduler_choice(
    pod: dict[str, Any], group: AppGroup | None, default: str, plans_keep_scheduler: bool = False
) -> SchedulerChoice:
    """Rules 2 to 4 for ``pod`` (as admitted) of ``group`` (None: not an AppGroup's pod, nothing to do)."""
    if group is None or not (wanted := wanted_scheduler(group, default)):
        return SchedulerChoice()
    named = keys.SCHEDULER_NAME in (group.metadata.annotations or {})
    if plans_keep_scheduler and plans_by_whole_group(group) and not named:
        return SchedulerChoice()
    spec = pod.get("spec")
    current = spec.get("schedulerName") if isinstance(spec, dict) else None
    if current in (None, "", keys.DEFAULT_SCHEDULER):
        return SchedulerChoice([{"op": "add", "path": "/spec/schedulerName", "value": wanted}])
    if current == wanted:
        return SchedulerChoice()
    group_name = f"{group.metadata.namespace}/{group.metadata.name}"
    return SchedulerChoice(conflict=(
        f"spec.schedulerName {current!r} kept: this pod of AppGroup {group_name} is not placed by netaware's "
        f"scheduler {wanted!r} (no NetworkOverhead, bandwidth fit or plan-ungated for it)"
    ))  # fmt: skip
