"""The topology-order scheduling gate at admission: whether a pod being created gets it (pure).

A pod is gated when all of these hold:

1. It is labelled as a workload of an AppGroup (``appgroup.diktyo.x-k8s.io`` and ``...workload``) and that
   AppGroup exists for its namespace (:func:`~operators.engine.cluster.appgroups.pod_appgroup`).
2. The AppGroup opted in: annotation ``netaware.io/ordered-scheduling: "true"`` (released dependencies first)
   or ``"plan"`` (released by a whole-group plan), or the webhook gates by default
   (``--ordered-scheduling-default``) and the annotation is neither ``"false"`` nor ``"plan-ungated"`` (planned
   by the extender when kube-scheduler asks about the pod: never gated).
3. The AppGroup is Ready and its ``status.topologyOrder`` has the pod's workload (an order the controller has
   computed; a new or invalid AppGroup gates nobody).
4. The pod is not bound already (``spec.nodeName``: the API server refuses gates on a bound pod) and does not
   carry the gate yet (reinvocation adds nothing).

Pods outside AppGroups are never gated; excluded namespaces never reach the webhook.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.engine.cluster.appgroups import ordered_scheduling, pod_appgroup

GATE = keys.TOPOLOGY_ORDER_GATE


def opted_in(group: AppGroup, gate_by_default: bool) -> bool:
    value = ordered_scheduling(group)
    return value in ("true", "plan") or (gate_by_default and value not in ("false", keys.UNGATED_PLAN))


def _ready_with(group: AppGroup, selector: str) -> bool:
    status = group.status
    if status is None:
        return False
    ready = next((c for c in status.conditions or () if c.type == keys.CONDITION_READY), None)
    ordered = {entry.workload.selector for entry in status.topology_order or ()}
    return ready is not None and ready.status == "True" and selector in ordered


def _gate_names(spec: Mapping[str, Any]) -> list[str]:
    gates = spec.get("schedulingGates")
    if not isinstance(gates, list):
        return []
    return [str(gate["name"]) for gate in gates if isinstance(gate, dict) and isinstance(gate.get("name"), str)]


def needs_gate(pod: Mapping[str, Any], namespace: str, app_groups: Iterable[AppGroup], gate_by_default: bool) -> bool:
    """Whether the pod being created in ``namespace`` gets the gate (see the module docstring)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec")
    labels: Mapping[str, str] = meta.get("labels") or {}
    name, selector = labels.get(keys.APPGROUP_LABEL), labels.get(keys.APPGROUP_WORKLOAD_LABEL)
    if not name or not selector or not isinstance(spec, dict) or spec.get("nodeName"):
        return False
    if GATE in _gate_names(spec):
        return False
    group = pod_appgroup(name, namespace, app_groups)
    return group is not None and opted_in(group, gate_by_default) and _ready_with(group, selector)


def gate_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """RFC 6902 operations adding the gate after any the pod has (the list created when absent)."""
    spec = pod.get("spec") or {}
    if isinstance(spec.get("schedulingGates"), list):
        return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": GATE}}]
    return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]
