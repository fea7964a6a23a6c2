"""What the rebalancer may move, and what it remembers between cycles (pure).

1. **Workloads**: a pod belongs to its controller (a ReplicaSet's pods to its Deployment, by the
   ``pod-template-hash`` suffix); a workload is never moved during its rollout (its pods of two revisions, or one
   of them unbound, unready or terminating), nor again within ``cooldown`` of its last move.
2. **Pods**: never one the descheduler's evictability rules protect (DaemonSet, mirror, static, critical, bare,
   local storage unless allowed, terminating), never outside ``evictableNamespaces``.
3. **In flight**: a move is in flight from its eviction until the evicted pod is gone and the workload has as
   many pods as before, all bound; the rebalancer proposes nothing while any move is in flight (a cycle never
   builds on moves whose effect it has not seen). A move then *landed* when the workload has more pods on the
   move's target than when it was made; otherwise it is *missed*: reported once, and never proposed again (same
   workload, same target).
   A move in flight longer than the layout's lifetime is missed.
4. **Budgets**: ``maxMovesPerCycle``, ``maxMovesPerHour`` (the moves of the last hour), and the policy's
   per-node, per-namespace and total eviction limits, shared with LowNodeLoad.
5. **LowNodeLoad**: the pods of a moved workload on its move's target are LowNodeLoad's to leave within the
   cooldown (:meth:`History.protects`), so it never undoes a move.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from operators.api.config.descheduler import RebalanceArgs
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.descheduling.evictability import protection

HOUR = 3600.0
REVISION_LABELS = ("pod-template-hash", "controller-revision-hash")


def workload_of(pod: Pod) -> str:
    """``namespace/Kind/name`` of the pod's controller (a ReplicaSet's Deployment); "" without one."""
    owners = (pod.raw.get("metadata") or {}).get("ownerReferences") or []
    owner: Mapping[str, Any] | None = next(
        (o for o in owners if isinstance(o, dict) and o.get("controller")), owners[0] if owners else None
    )
    if not isinstance(owner, Mapping):
        return ""
    kind, name = str(owner.get("kind") or ""), str(owner.get("name") or "")
    suffix = pod.labels.get("pod-template-hash")
    if kind == "ReplicaSet" and suffix and name.endswith(f"-{suffix}"):
        kind, name = "Deployment", name[: -len(suffix) - 1]
    return f"{pod.namespace}/{kind}/{name}"


def by_workload(pods: Iterable[Pod]) -> dict[str, list[Pod]]:
    """The non-terminal ``pods`` by their workload (:func:`workload_of`; "" for pods without a controller)."""
    found: dict[str, list[Pod]] = {}
    for pod in pods:
        if not pod.is_terminal:
            found.setdefault(workload_of(pod), []).append(pod)
    return found


def in_rollout(pods: Iterable[Pod]) -> str:
    """Why a workload's ``pods`` are changing now (rule 1), or "" when they are settled."""
    revisions: set[tuple[str, str]] = set()
    for pod in pods:
        if pod.is_terminating:
            return f"{pod.key} is terminating"
        if not pod.node_name:
            return f"{pod.key} is not bound yet"
        if pod.phase != "Running":
            return f"{pod.key} is {pod.phase}"
        revisions |= {(label, pod.labels[label]) for label in REVISION_LABELS if label in pod.labels}
    if len({label for label, _ in revisions}) < len(revisions):
        return "pods of two revisions (a rollout)"
    return ""


@dataclass(frozen=True)
class MoveRecord:
    """A move made: what the history needs to tell whether it landed."""

    pod: str  # namespace/name of the evicted pod
    workload: str
    namespace: str
    source: str
    target: str
    at: float
    target_count: int  # the workload's pods on the target when the move was made
    replicas: int = 1  # the workload's pods when the move was made: the replacement has come when it has as many


@dataclass
class History:
    """What the rebalancer carries between cycles (rules 1, 3, 4, 5)."""

    in_flight: list[MoveRecord] = field(default_factory=list)
    moved: dict[str, float] = field(default_factory=dict)  # workload -> when last moved
    evicted: dict[str, float] = field(default_factory=dict)  # pod key -> when evicted
    recent: list[float] = field(default_factory=list)  # when each move of the last hour was made
    missed: set[tuple[str, str]] = field(default_factory=set)  # (workload, target) that did not land
    targets: dict[tuple[str, str], float] = field(default_factory=dict)  # (workload, target node) -> when moved

    def record(self, record: MoveRecord) -> None:
        self.in_flight.append(record)
        self.moved[record.workload] = record.at
        self.evicted[record.pod] = record.at
        self.recent.append(record.at)
        self.targets[(record.workload, record.target)] = record.at

    def settle(self, snapshot: Snapshot, now: float, lifetime: float) -> tuple[list[MoveRecord], list[MoveRecord]]:
        """Rule 3 on ``snapshot``: the moves that landed and those that missed since the last call; the rest stay
        in flight."""
        present = {pod.key for pod in snapshot.pods}
        owned = by_workload(snapshot.pods)
        landed: list[MoveRecord] = []
        missed: list[MoveRecord] = []
        waiting: list[MoveRecord] = []
        for move in self.in_flight:
            pods = owned.get(move.workload, [])
            if move.pod in present or any(not pod.node_name for pod in pods) or len(pods) < move.replicas:
                if now - move.at > lifetime:
                    missed.append(move)
                else:
                    waiting.append(move)
                continue
            on_target = sum(pod.node_name == move.target for pod in pods)
            (landed if on_target > move.target_count else missed).append(move)
        for move in missed:
            self.missed.add((move.workload, move.target))
        self.in_flight = waiting
        self.recent = [at for at in self.recent if now - at < HOUR]
        self._forget_gone(snapshot, present, set(owned) | {move.workload for move in waiting})
        return landed, missed

    def _forget_gone(self, snapshot: Snapshot, present: set[str], workloads: set[str]) -> None:
        """What is kept of pods, workloads and nodes the cluster no longer has goes (bounded by the cluster)."""
        nodes = snapshot.node_by_name
        self.evicted = {key: at for key, at in self.evicted.items() if key in present}
        self.moved = {workload: at for workload, at in self.moved.items() if workload in workloads}
        self.targets = {key: at for key, at in self.targets.items() if key[0] in workloads and key[1] in nodes}
        self.missed = {key for key in self.missed if key[0] in workloads and key[1] in nodes}

    def refusal(self, pod: Pod, workload: str, args: RebalanceArgs, now: float) -> str:
        """Why ``pod`` may not be moved now (rules 1, 2), or ""."""
        if not workload:
            return "no controller would recreate it"
        why = protection(pod, args.evict_local_storage_pods)
        if why:
            return why
        if not args.evictable_namespaces.allows(pod.namespace):
            return f"namespace {pod.namespace} is not evictable"
        last = self.moved.get(workload)
        if last is not None and now - last < args.cooldown_seconds:
            return f"{workload} moved {now - last:.0f}s ago (cooldown {args.cooldown_seconds:g}s)"
        if pod.key in self.evicted:
            return "evicted once already"
        return ""

    def hourly_left(self, args: RebalanceArgs, now: float) -> int:
        return max(args.max_moves_per_hour - sum(now - at < HOUR for at in self.recent), 0)

    def protects(self, pod: Pod, cooldown: float, now: float) -> bool:
        """Rule 5: a pod of a moved workload on its move's target, within the cooldown."""
        at = self.targets.get((workload_of(pod), pod.node_name))
        return at is not None and now - at < cooldown
