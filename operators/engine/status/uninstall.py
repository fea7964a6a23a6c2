"""What an uninstall leaves to undo (pure): netaware's marks on objects that are not its own, once its components
are gone (``netaware cleanup``, the chart's post-delete Job).

1. **Pods that can no longer schedule** — pending (not bound, not finished, not being deleted) and naming the
   removed second scheduler (``scheduler_name``), or requesting one of netaware's bandwidth resources (nothing
   advertises them any more) — are deleted when a controller owns them (``reschedule``): the controller creates
   them again, admitted without netaware. Any other such pod is reported, never deleted: it is the user's.
2. **Gates**: every other pod still held by netaware's scheduling gate (``netaware.io/topology-order``) is released
   (the gate alone is removed; foreign gates stay).
3. **Node resources**: netaware's bandwidth resources are removed from a node's capacity and allocatable when no
   pod on it (bound, not finished) requests them; a node that still runs such a pod keeps them, reported (the
   kubelet admits its pods again when it restarts, against what the node advertises).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from operators.api import keys
from operators.engine.cluster.bandwidth import RESOURCES
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.status.node_bandwidth import Advertisement, status_patch


@dataclass(frozen=True)
class PodAction:
    pod: Pod
    reason: str


@dataclass(frozen=True)
class NodeAction:
    node: Node
    patch: dict[str, object]  # the merge patch of nodes/<name>/status (empty: kept, see ``reason``)
    reason: str


@dataclass(frozen=True)
class Undo:
    """What :func:`what_to_undo` found: pods to delete, pods to release, pods left as they are, nodes to clean."""

    delete: tuple[PodAction, ...]
    release: tuple[PodAction, ...]
    left: tuple[PodAction, ...]
    nodes: tuple[NodeAction, ...]

    @property
    def empty(self) -> bool:
        return not (self.delete or self.release or any(action.patch for action in self.nodes))

    def summary(self) -> dict[str, object]:
        """The report ``netaware cleanup`` prints (``-o json``)."""

        def pods(actions: Iterable[PodAction]) -> list[dict[str, str]]:
            return [{"pod": action.pod.key, "reason": action.reason} for action in actions]

        return {
            "deleted": pods(self.delete),
            "released": pods(self.release),
            "left": pods(self.left),
            "nodes": [
                {"node": action.node.name, "cleaned" if action.patch else "kept": action.reason}
                for action in self.nodes
            ],
        }


def what_to_undo(cluster: Snapshot, scheduler_name: str = "", reschedule: bool = False) -> Undo:
    """See the module docstring."""
    delete: list[PodAction] = []
    release: list[PodAction] = []
    left: list[PodAction] = []
    requesting: dict[str, list[str]] = {}  # node -> its pods that request netaware's resources
    for pod in sorted(cluster.pods, key=lambda pod: pod.key):
        if pod.is_terminal or pod.is_terminating:
            continue
        asked = sorted(name for name in RESOURCES if name in pod.requests)
        if pod.node_name:
            if asked:
                requesting.setdefault(pod.node_name, []).append(pod.key)
            continue
        stuck = _why_stuck(pod, scheduler_name, asked)
        if stuck and reschedule and controller_of(pod):
            delete.append(PodAction(pod, f"{stuck}; {controller_of(pod)} creates it again"))
        elif stuck:
            why = "no controller creates it again" if reschedule else "deleting it was not asked for"
            left.append(PodAction(pod, f"{stuck}; {why}: delete it and create it again"))
        elif keys.TOPOLOGY_ORDER_GATE in pod.scheduling_gates:
            release.append(PodAction(pod, f"held by the gate {keys.TOPOLOGY_ORDER_GATE}"))
    nodes = []
    for node in sorted(cluster.nodes, key=lambda node: node.name):
        held = [name for name in RESOURCES if name in node.capacity or name in node.allocatable]
        if not held:
            continue
        users = requesting.get(node.name, [])
        if users:
            shown = ", ".join(users[:3]) + (f" and {len(users) - 3} more" if len(users) > 3 else "")
            nodes.append(
                NodeAction(node, {}, f"keeps {', '.join(held)}: {len(users)} running pod(s) request them ({shown})")
            )
            continue
        patch = status_patch(node, Advertisement(dict.fromkeys(held)))
        nodes.append(NodeAction(node, patch or {}, f"removed {', '.join(held)}"))
    return Undo(tuple(delete), tuple(release), tuple(left), tuple(nodes))


def _why_stuck(pod: Pod, scheduler_name: str, asked: list[str]) -> str:
    """Why a pending ``pod`` can no longer schedule once netaware is gone ("" when it can)."""
    named = str((pod.raw.get("spec") or {}).get("schedulerName") or "")
    if scheduler_name and named == scheduler_name:
        return f"names the removed scheduler {scheduler_name}"
    if asked:
        return f"requests {', '.join(asked)}, which no node advertises any more"
    return ""


def controller_of(pod: Pod) -> str:
    """``Kind/name`` of the controller that owns ``pod`` ("" when none does)."""
    for owner in (pod.raw.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(owner, dict) and owner.get("controller") is True:
            return f"{owner.get('kind')}/{owner.get('name')}"
    return ""
