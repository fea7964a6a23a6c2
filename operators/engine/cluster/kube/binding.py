"""kube-scheduler's VolumeBinding filter (pure), as 1.37 runs it (``volume_binding.go``, ``binder.go`` and
component-helpers' ``FindMatchingVolume``), without its capacity tracking (every provisioner has room).

PreFilter (:func:`prefilter`): each claim of the pod must exist (a generic ephemeral volume's claim must be the
pod's), not be lost nor being deleted; a claim is *bound* when it names its volume and carries the bind-completed
annotation, *delayed* when it is not bound, names no volume and its class waits for the first consumer, and
*immediate* otherwise — an immediate claim rejects the pod ("pod has unbound immediate PersistentVolumeClaims").

Filter (:func:`check`), per node, in upstream's order of reasons:

1. every bound claim's volume must exist ("node(s) unavailable due to one or more pvc(s) bound to non-existent
   pv(s)") and its node affinity accept the node ("node(s) didn't match PersistentVolume's node affinity"); the
   first claim that fails ends this check;
2. a delayed claim with a selected node (``volume.kubernetes.io/selected-node``) fails every other node; the others,
   smallest request first, each take the smallest available volume of their class that fits (capacity, volume
   mode, attributes class, not being deleted, phase Available, the claim's selector, the node affinity, the access
   modes; a volume pre-bound to the claim is taken whatever its size); the claims left, and those with a selected
   node, must be provisionable: a provisioner (not ``kubernetes.io/no-provisioner``) whose class's
   ``allowedTopologies`` accept the node ("node(s) didn't find available persistent volumes to bind").
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from operators.api.quantity import Quantity
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.cluster.storage import WAIT_FOR_FIRST_CONSUMER, PersistentVolume, PersistentVolumeClaim

NAME = "VolumeBinding"
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
_ZERO = Quantity(0)


def not_found(resource: str, name: str) -> str:
    """A lister's NotFound message, as upstream's plugins pass it on (``persistentvolumeclaim "x" not found``)."""
    return f"{resource} {json.dumps(name, ensure_ascii=False)} not found"


def owned_by(claim: PersistentVolumeClaim, pod: Pod) -> bool:
    """A generic ephemeral volume's claim is the pod's: in its namespace, the pod its controller."""
    return claim.namespace == pod.namespace and claim.controller_uid == pod.uid


def not_owner(claim: PersistentVolumeClaim, pod: Pod) -> str:
    return f"PVC {claim.namespace}/{claim.name} was not created for pod {pod.namespace}/{pod.name} (pod is not owner)"


Claims = tuple[tuple[PersistentVolumeClaim, ...], tuple[PersistentVolumeClaim, ...]]  # (bound, delayed)


def prefilter(pod: Pod, snapshot: Snapshot, claims: Sequence[tuple[str, bool]]) -> Claims | str | None:
    """The pod's ``claims`` ((name, of a generic ephemeral volume), in the order of its volumes) as bound and delayed
    ones; a message when the pod is rejected; None when it has none (upstream's Skip)."""
    if not claims:
        return None
    found: list[PersistentVolumeClaim] = []
    for name, ephemeral in claims:
        claim = snapshot.claim_by_key.get((pod.namespace, name))
        if claim is None:
            if ephemeral:
                return f"waiting for ephemeral volume controller to create the persistentvolumeclaim {json.dumps(name)}"
            return not_found("persistentvolumeclaim", name)
        if claim.phase == "Lost":
            return (f"persistentvolumeclaim {json.dumps(claim.name)} bound to non-existent persistentvolume "
                    f"{json.dumps(claim.volume_name)}")  # fmt: skip
        if claim.deleting:
            return f"persistentvolumeclaim {json.dumps(claim.name)} is being deleted"
        if ephemeral and not owned_by(claim, pod):
            return not_owner(claim, pod)
        found.append(claim)
    bound, delayed = [], []
    for claim in found:
        if claim.fully_bound:
            bound.append(claim)
        elif not claim.volume_name and delay_binding(snapshot, claim):
            delayed.append(claim)
        else:  # not bound and not to be bound by the scheduler (a pre-bound claim is one too)
            return UNBOUND_IMMEDIATE
    return (tuple(bound), tuple(delayed))


def delay_binding(snapshot: Snapshot, claim: PersistentVolumeClaim) -> bool:
    """The claim's class exists and waits for the first consumer (upstream's ``IsDelayBindingMode``)."""
    storage_class = snapshot.storage_class_by_name.get(claim.storage_class) if claim.storage_class else None
    return storage_class is not None and storage_class.binding_mode == WAIT_FOR_FIRST_CONSUMER


def check(snapshot: Snapshot, bound: Iterable[PersistentVolumeClaim], delayed: Sequence[PersistentVolumeClaim],
          node: Node) -> tuple[str, ...]:  # fmt: skip
    """VolumeBinding's reasons for ``node`` (empty: it passes)."""
    affinity_ok, volumes_found, unbound_ok = True, True, True
    for claim in bound:
        volume = snapshot.volume_by_name.get(claim.volume_name)
        if volume is None:
            volumes_found = False
            break
        if not volume.allows(node.labels):
            affinity_ok = False
            break
    if delayed:
        to_match = [claim for claim in delayed if claim.selected_node is None]
        to_provision = [claim for claim in delayed if claim.selected_node is not None]
        if any(claim.selected_node != node.name for claim in to_provision):
            unbound_ok = False
        else:
            if to_match:
                unmatched = _match(snapshot, to_match, node)
                unbound_ok = not unmatched
                to_provision += unmatched
            if to_provision:
                unbound_ok = all(_provisionable(snapshot, claim, node) for claim in to_provision)
    reasons = []
    if not affinity_ok:
        reasons.append(NODE_CONFLICT)
    if not unbound_ok:
        reasons.append(BIND_CONFLICT)
    if not volumes_found:
        reasons.append(PV_NOT_EXIST)
    return tuple(reasons)


def _provisionable(snapshot: Snapshot, claim: PersistentVolumeClaim, node: Node) -> bool:
    storage_class = snapshot.storage_class_by_name.get(claim.storage_class)
    if storage_class is None or storage_class.provisioner in ("", NO_PROVISIONER):
        return False
    return storage_class.allows(node.labels)


def _match(snapshot: Snapshot, claims: Sequence[PersistentVolumeClaim], node: Node) -> list[PersistentVolumeClaim]:
    """Each claim, smallest request first, takes a volume (none twice); the claims that found none."""
    chosen: set[str] = set()
    unmatched = []
    for claim in sorted(claims, key=lambda claim: claim.request or _ZERO):
        volume = find_volume(claim, (v for v in snapshot.persistent_volumes if v.storage_class == claim.storage_class),
                             node, chosen)  # fmt: skip
        if volume is None:
            unmatched.append(claim)
        else:
            chosen.add(volume.name)
    return unmatched


def bound_to(volume: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """The volume is pre-bound or bound to the claim (upstream's ``IsVolumeBoundToClaim``)."""
    if volume.claim_ref is None:
        return False
    namespace, name, uid = volume.claim_ref
    return (namespace, name) == (claim.namespace, claim.name) and (not uid or uid == claim.uid)


def find_volume(claim: PersistentVolumeClaim, volumes: Iterable[PersistentVolume], node: Node,
                excluded: set[str]) -> PersistentVolume | None:  # fmt: skip
    """Upstream's ``FindMatchingVolume`` on the scheduler's path: the volume pre-bound to the claim (None when its
    node affinity rejects the node), else the smallest available one that fits."""
    requested = claim.request or _ZERO
    best: PersistentVolume | None = None
    for volume in volumes:
        if volume.name in excluded or (volume.claim_ref is not None and not bound_to(volume, claim)):
            continue
        capacity = volume.capacity or _ZERO
        if capacity < requested or volume.volume_mode != claim.volume_mode:
            continue
        if volume.attributes_class != claim.attributes_class or volume.deleting:
            continue
        allowed = volume.allows(node.labels)
        if bound_to(volume, claim):
            return volume if allowed else None
        if volume.phase != "Available" or (claim.selector is not None and not claim.selector.matches(volume.labels)):
            continue
        if volume.storage_class != claim.storage_class or not allowed:
            continue
        if not set(claim.access_modes) <= set(volume.access_modes):
            continue
        if best is None or (best.capacity or _ZERO) > capacity:
            best = volume
    return best
