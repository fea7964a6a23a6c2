"""Which pods a descheduler may evict, where they may go, and in what order they are taken (pure).

Never a candidate (the descheduler's DefaultEvictor protections): DaemonSet pods, mirror and
static pods, ``system-cluster-critical``/``system-node-critical`` pods (or priority at or above
2,000,000,000), bare pods (no owner: nothing would recreate them), pods with local storage
(``emptyDir``/``hostPath``) unless allowed, terminating and finished pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.api import keys
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.resources import kubernetes_qos_class

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
CRITICAL_CLASSES = ("system-cluster-critical", "system-node-critical")


def protection(pod: Pod, allow_local_storage: bool = False) -> str:
    """Why ``pod`` may never be evicted, or "" when it may."""
    spec: Mapping[str, Any] = pod.raw.get("spec") or {}
    if pod.is_terminating:
        return "terminating"
    if pod.is_terminal:
        return f"finished ({pod.phase})"
    if keys.MIRROR_POD_ANNOTATION in pod.annotations:
        return "mirror pod"
    if pod.annotations.get(keys.POD_SOURCE_ANNOTATION, "api") != "api":
        return "static pod"
    if "DaemonSet" in pod.owner_kinds:
        return "DaemonSet pod"
    if spec.get("priorityClassName") in CRITICAL_CLASSES or pod.priority >= SYSTEM_CRITICAL_PRIORITY:
        return "system-critical pod"
    if not pod.owner_kinds:
        return "bare pod (no controller would recreate it)"
    if not allow_local_storage:
        for volume in spec.get("volumes") or []:
            if isinstance(volume, Mapping) and ("emptyDir" in volume or "hostPath" in volume):
                return f"local storage (volume {volume.get('name', '?')})"
    return ""


# --- candidate order (Koordinator's PodSorter; ascending, the first differing key decides) ------------

_KOORD_CLASS_RANK = {"koord-free": 0, "koord-batch": 1, "koord-mid": 2, "koord-prod": 3}
_KOORD_CLASS_RANGES = ((3000, 3999, 0), (5000, 5999, 1), (7000, 7999, 2), (9000, 9999, 3))
_K8S_QOS_RANK = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}
_KOORD_QOS_RANK = {"BE": 0, "LS": 1, "LSR": 2, "LSE": 3, "SYSTEM": 3}


def koord_priority_rank(pod: Pod) -> int:
    """free < batch < mid < prod < none: from the label, else the priority range."""
    label = pod.labels.get(keys.KOORD_PRIORITY_CLASS_LABEL)
    if label in _KOORD_CLASS_RANK:
        return _KOORD_CLASS_RANK[label]
    for low, high, rank in _KOORD_CLASS_RANGES:
        if low <= pod.priority <= high:
            return rank
    return 4


def _cost(pod: Pod, annotation: str) -> int:
    try:
        return int(pod.annotations.get(annotation, "0"))
    except ValueError:
        return 0


def order_key(pod: Pod, usage_score: float) -> tuple[Any, ...]:
    """Koordinator's order: priority class, priority, QoS, Koordinator QoS, deletion cost, eviction cost,
    usage score (descending), creation time (newest first); the pod's key last, for a total order."""
    return (
        koord_priority_rank(pod),
        pod.priority,
        _K8S_QOS_RANK[kubernetes_qos_class(pod)],
        _KOORD_QOS_RANK.get(pod.labels.get(keys.KOORD_QOS_CLASS_LABEL, ""), 4),
        _cost(pod, keys.POD_DELETION_COST),
        _cost(pod, keys.KOORD_EVICTION_COST),
        -usage_score,
        -_created(pod),
        pod.key,
    )


def _created(pod: Pod) -> float:
    return pod.created or 0.0


def usage_score(pod_usage: Mapping[str, int], excess: Mapping[str, int], weights: Mapping[str, int]) -> float:
    """How well a pod's usage matches the node's excess over high (weighted mean; pods about the size of
    the excess score highest): per resource ``r = used/excess``, ``r`` below 1 else ``1/r + 1``."""
    total = weight_sum = 0.0
    for resource, over in excess.items():
        if over <= 0:
            continue
        ratio = pod_usage.get(resource, 0) / over
        total += weights.get(resource, 1) * (ratio if ratio < 1 else 1 / ratio + 1)
        weight_sum += weights.get(resource, 1)
    return total / weight_sum if weight_sum else 0.0


# --- where a pod may go (nodeFit) ----------------------------------------------------------------------
