"""What the node agent makes true in the kernel, as a pure function of the node, its NodeSLO and its pods (SPEC
§4.11): the plan `netaware agent` renders into tc/nftables and prints with ``--dry-run``.

1. **Total**: the node's capacity by the one bandwidth model (annotations, the NodeSLO's
   ``totalNetworkBandwidth``, the default); unknown: no plan (nothing is shaped), with the reason.
2. **Classes**, per direction, by the same rule as the NodeSLO status (:func:`operators.engine.status.nodeslo.
   class_bandwidth`, so a NodeSLO written by Koordinator's slo-controller gives the same numbers): ``system``,
   ``lsr``, ``ls``, ``be`` under a root at the total, each with rate = its request and ceil = its limit, and HTB
   priorities in that order (the guaranteed classes borrow the excess first, as the netqos design's table).
   HTB needs a positive rate: a class that requests nothing gets :data:`MIN_RATE`. A ceil below the rate is
   raised to it (HTB's own rule).
3. **Pods** are sorted into classes by ``koordinator.sh/qosClass`` (SYSTEM; LSE and LSR → lsr; LS; BE); an
   unlabelled pod by its Kubernetes QoS class, as Koordinator reads it (BestEffort → be, Guaranteed and
   Burstable → ls). Only running pods with a pod IP of their own are classified (a hostNetwork pod shares the
   node's address: it stays in the default class, reported).
4. **Leaves**: a pod with ``kubernetes.io/<dir>-bandwidth`` gets its own leaf under its class in that direction,
   ceil = that limit, rate = its ``kubernetes.io/<dir>-request`` (else the limit), capped by the ceil.
5. **Class ids** are stable: the classes have fixed minors; a pod's leaf keeps the minor it had (``previous``,
   read back from the kernel), a new leaf takes the lowest free one, so one pod's change is one leaf.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from operators.api.errors import FieldError
from operators.api.nodeslo import NodeSLO
from operators.api.quantity import Quantity, parse_bandwidth
from operators.engine.cluster.objects import Node, Pod
from operators.engine.status.nodeslo import class_bandwidth, node_total

QOS_LABEL = "koordinator.sh/qosClass"
DIRECTIONS = ("egress", "ingress")
MIN_RATE = 8_000  # bits/s: HTB's rate must be positive; a class that requests nothing still gets 1 kB/s
# class name -> (minor id, HTB priority); the root is 1:1, the classes its children, the leaves from FIRST_LEAF on
CLASSES: Mapping[str, tuple[int, int]] = {"system": (0x10, 0), "lsr": (0x20, 1), "ls": (0x30, 2), "be": (0x40, 3)}
ROOT_MINOR = 0x1
FIRST_LEAF, LAST_LEAF = 0x100, 0xFFFE
DEFAULT_CLASS = "be"  # where unclassified traffic goes (the HTB root's default)
_LABELS = {"SYSTEM": "system", "LSE": "lsr", "LSR": "lsr", "LS": "ls", "BE": "be"}


@dataclass(frozen=True)
class TrafficClass:
    name: str
    minor: int
    priority: int
    rate: int  # bits/s
    ceil: int


@dataclass(frozen=True)
class PodTraffic:
    """One pod in one direction: its class, and its own leaf when it has a limit (minor None: no leaf)."""

    key: str
    ip: str
    qos_class: str
    minor: int | None = None
    rate: int = 0
    ceil: int = 0


@dataclass(frozen=True)
class DirectionPlan:
    total: int
    classes: tuple[TrafficClass, ...]
    pods: tuple[PodTraffic, ...]


@dataclass(frozen=True)
class NodePlan:
    node: str
    directions: Mapping[str, DirectionPlan]  # empty: nothing to shape (see ``problems``)
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The ``--dry-run`` document: classes, rates and members per direction, bits/s."""
        return {
            "node": self.node,
            "problems": list(self.problems),
            **{
                direction: {
                    "total": plan.total,
                    "classes": [vars(c) for c in plan.classes],
                    "pods": [{k: v for k, v in vars(p).items() if v is not None} for p in plan.pods],
                }
                for direction, plan in self.directions.items()
            },
        }


def qos_class(pod: Pod) -> str:
    """The pod's network QoS class (rule 3)."""
    labelled = _LABELS.get(pod.labels.get(QOS_LABEL, "").upper())
    if labelled is not None:
        return labelled
    kubernetes = str(((pod.raw.get("status") or {}).get("qosClass")) or "")
    if not kubernetes:  # not reported yet: BestEffort asks for neither cpu nor memory
        kubernetes = "Burstable" if {"cpu", "memory"} & set(pod.requests) else "BestEffort"
    return "be" if kubernetes == "BestEffort" else "ls"


def pod_ip(pod: Pod) -> str:
    """The pod's own IP ("" when it has none, or shares the node's)."""
    spec, status = pod.raw.get("spec") or {}, pod.raw.get("status") or {}
    if spec.get("hostNetwork"):
        return ""
    return str(status.get("podIP") or "")


def node_plan(
    node: Node,
    slo: NodeSLO | None,
    pods: Sequence[Pod],
    default_total: Quantity | None = None,
    previous: Mapping[str, Mapping[str, int]] | None = None,
) -> NodePlan:
    """The plan for ``node`` (see the module docstring); ``previous``: direction -> pod key -> leaf minor now in
    the kernel."""
    spec = slo.spec.model_dump(mode="json", by_alias=True, exclude_none=True) if slo is not None else {}
    system = spec.get("systemStrategy") or {}
    total, _, problem = node_total(node, system, default_total)
    if total is None:
        return NodePlan(node.name, {}, (f"nothing shaped: {problem}",))
    bandwidth = class_bandwidth(spec.get("resourceQOSStrategy") or {}, total)
    problems: list[str] = []
    members: list[tuple[Pod, str, str]] = []
    for pod in sorted(pods, key=lambda p: p.key):
        if pod.node_name != node.name or pod.is_terminal:
            continue
        ip = pod_ip(pod)
        if not ip:
            problems.append(f"pod {pod.key} has no IP of its own: its traffic stays in class {DEFAULT_CLASS}")
            continue
        members.append((pod, ip, qos_class(pod)))
    directions = {}
    for direction in DIRECTIONS:
        classes = tuple(
            TrafficClass(name, minor, priority, *_rate_ceil(bandwidth, name, direction))
            for name, (minor, priority) in CLASSES.items()
        )
        pods_here, leaves = [], {}
        for pod, ip, klass in members:
            limit = _pod_bandwidth(pod, f"kubernetes.io/{direction}-bandwidth", problems)
            if limit is None:
                pods_here.append(PodTraffic(pod.key, ip, klass))
                continue
            request = _pod_bandwidth(pod, f"kubernetes.io/{direction}-request", problems)
            rate = max(MIN_RATE, min(request if request is not None else limit, limit))
            leaves[pod.key] = (ip, klass, rate, max(limit, rate))
        minors = _leaf_minors(sorted(leaves), (previous or {}).get(direction, {}))
        for key, (ip, klass, rate, ceil) in leaves.items():
            pods_here.append(PodTraffic(key, ip, klass, minors[key], rate, ceil))
        directions[direction] = DirectionPlan(total.value(), classes, tuple(sorted(pods_here, key=lambda p: p.key)))
    return NodePlan(node.name, directions, tuple(problems))


def _rate_ceil(bandwidth: Any, name: str, direction: str) -> tuple[int, int]:
    found = getattr(bandwidth, name)
    rate = max(MIN_RATE, getattr(found, f"{direction}_request").value())
    return rate, max(rate, getattr(found, f"{direction}_limit").value())


def _pod_bandwidth(pod: Pod, key: str, problems: list[str]) -> int | None:
    text = pod.annotations.get(key)
    if text is None:
        return None
    try:
        value = parse_bandwidth(text, f"metadata.annotations[{key}]").value()
    except FieldError as error:
        problems.append(f"pod {pod.key}: {error}; not limited")
        return None
    return value or None  # 0: no limit asked (the CNI plugin reads it so too)


def _leaf_minors(keys_wanted: Sequence[str], held: Mapping[str, int]) -> dict[str, int]:
    """Rule 5: the minors held are kept, new leaves take the lowest free ones."""
    minors = {key: held[key] for key in keys_wanted if key in held and FIRST_LEAF <= held[key] <= LAST_LEAF}
    taken = set(minors.values())
    free = (minor for minor in range(FIRST_LEAF, LAST_LEAF + 1) if minor not in taken)
    for key in keys_wanted:
        if key not in minors:
            minors[key] = next(free)
    return minors
