"""What kube-scheduler checks of a pod on a node before any score (pure): its filters NodeUnschedulable,
TaintToleration (NoSchedule and NoExecute), NodeAffinity (nodeSelector and required node affinity) and
NodeResourcesFit (the pods limit and every requested resource against the node's allocatable less what its pods
request). Written once, for the descheduler's "is there another node for this pod", the offline ``schedule`` and
the placement planner.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from operators.api.quantity import Quantity
from operators.engine.cluster.objects import Node, Pod

DEFAULT_PODS = 110  # the kubelet's default maxPods, for a node that reports no allocatable pods


def tolerates(pod: Pod, node: Node) -> bool:
    """The pod tolerates every NoSchedule/NoExecute taint of the node."""
    taints = (node.raw.get("spec") or {}).get("taints") or []
    tolerations = (pod.raw.get("spec") or {}).get("tolerations") or []
    for taint in taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(toleration, taint) for toleration in tolerations):
            return False
    return True


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    key = toleration.get("key")
    if toleration.get("operator", "Equal") == "Exists":
        return not key or key == taint.get("key")
    return bool(key == taint.get("key") and toleration.get("value", "") == taint.get("value", ""))


def placement_allows(pod: Pod, node: Node) -> bool:
    """The pod's nodeSelector and required node affinity (any of its terms) accept the node, as upstream's
    NodeAffinity reads them: a term matches when all its expressions (on labels) and fields (``metadata.name``)
    do, and a term with neither matches no node; ``Gt``/``Lt`` compare integers."""
    spec = pod.raw.get("spec") or {}
    labels = node.labels
    if any(labels.get(key) != value for key, value in (spec.get("nodeSelector") or {}).items()):
        return False
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if affinity is None:
        return True
    fields = {"metadata.name": node.name}
    return any(
        bool(term.get("matchExpressions") or term.get("matchFields"))
        and all(_requirement(expression, labels) for expression in term.get("matchExpressions") or ())
        and all(_requirement(expression, fields) for expression in term.get("matchFields") or ())
        for term in affinity.get("nodeSelectorTerms") or ()
        if isinstance(term, dict)
    )


def _requirement(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One NodeSelectorRequirement (In, NotIn, Exists, DoesNotExist, Gt, Lt) against ``labels``."""
    key, operator, values = str(expression.get("key")), expression.get("operator"), expression.get("values") or []
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, bound = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def amount(resource: str, quantity: Quantity) -> int:
    """A resource amount in kube-scheduler's integer unit: millicores for cpu, the value (rounded up) otherwise."""
    return quantity.milli_value() if resource == "cpu" else quantity.value()


def requested_on_nodes(pods: Iterable[Pod]) -> dict[str, tuple[dict[str, int], int]]:
    """node -> (what its pods request, per resource, and how many pods it holds): the scheduled pods that are not
    terminal, as kube-scheduler's NodeInfo counts them."""
    found: dict[str, tuple[dict[str, int], int]] = {}
    for pod in pods:
        if not pod.node_name or pod.is_terminal:
            continue
        requested, count = found.get(pod.node_name, ({}, 0))
        for resource, quantity in pod.requests.items():
            requested[resource] = requested.get(resource, 0) + amount(resource, quantity)
        found[pod.node_name] = (requested, count + 1)
    return found


def insufficient(
    requests: Mapping[str, Quantity], node: Node, requested: Mapping[str, int], pods_on_node: int
) -> list[str]:
    """NodeResourcesFit's reasons (kube-scheduler's words) for a pod with ``requests`` on ``node``, whose pods
    already request ``requested`` and number ``pods_on_node``; empty when it fits. A resource the node does not
    advertise has an allocatable of 0; a request of 0 always fits."""
    reasons = []
    pods = node.allocatable.get("pods")
    if pods_on_node + 1 > (pods.value() if pods is not None else DEFAULT_PODS):
        reasons.append("Too many pods")
    for resource, quantity in sorted(requests.items()):
        want = amount(resource, quantity)
        if want <= 0:
            continue
        offered = node.allocatable.get(resource)
        have = amount(resource, offered) if offered is not None else 0
        if want > have - requested.get(resource, 0):
            reasons.append(f"Insufficient {resource}")
    return reasons


def placement_reasons(pod: Pod, node: Node) -> list[str]:
    """Why kube-scheduler's NodeUnschedulable, TaintToleration and NodeAffinity filters reject ``pod`` on ``node``
    (empty: they accept it)."""
    reasons = []
    if node.unschedulable and not tolerates_unschedulable(pod):
        reasons.append("node(s) were unschedulable")
    if not tolerates(pod, node):
        reasons.append("node(s) had untolerated taint(s)")
    if not placement_allows(pod, node):
        reasons.append("node(s) didn't match Pod's node affinity/selector")
    return reasons


def tolerates_unschedulable(pod: Pod) -> bool:
    """The pod tolerates the taint an unschedulable (cordoned) node carries."""
    taint: dict[str, Any] = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}
    return any(_tolerates(toleration, taint) for toleration in (pod.raw.get("spec") or {}).get("tolerations") or [])
