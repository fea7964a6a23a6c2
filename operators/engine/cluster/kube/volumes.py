"""kube-scheduler's volume filters (pure), as 1.37 runs them, in its default order: VolumeRestrictions,
NodeVolumeLimits, VolumeBinding, VolumeZone. They read the snapshot's PersistentVolumeClaims, PersistentVolumes,
StorageClasses and CSINodes (:mod:`operators.engine.cluster.storage`) and the pods placed on each node.

:func:`prefilter` runs the four PreFilters once for a pod, in that order (None: the pod uses no claim, no generic
ephemeral volume and no inline disk, so none has anything to check); the first that rejects the pod rejects it on
every node (:func:`prefilter_problem`; upstream's ``UnschedulableAndUnresolvable``, which ends the PreFilter phase).
:func:`failure` answers for one node with the first of the four Filters that rejects it and its reasons, in
upstream's words:

==================  ===================================================================================
plugin              reasons
==================  ===================================================================================
VolumeRestrictions  node(s) had no available disk (an inline GCE PD, AWS EBS, iSCSI or RBD disk mounted by a
                    pod on the node, unless both read-only); node(s) unavailable due to PersistentVolumeClaim
                    with ReadWriteOncePod access mode already in-use by another pod
NodeVolumeLimits    node(s) exceed max volume count (CSI volumes per driver against the CSINode's allocatable)
VolumeBinding       node(s) didn't match PersistentVolume's node affinity; node(s) didn't find available
                    persistent volumes to bind; node(s) unavailable due to one or more pvc(s) bound to
                    non-existent pv(s) (:mod:`.binding`)
VolumeZone          node(s) had no available volume zone
==================  ===================================================================================

Left out (the snapshot does not hold what they read): VolumeAttachments (counted by NodeVolumeLimits), CSIDrivers
(``preventPodSchedulingIfMissing``; storage capacity tracking: every provisioner has room) and the in-tree to CSI
translation of PersistentVolumes and inline volumes (an in-tree volume is not counted against CSI limits; a
provisioner named after an in-tree plugin is counted as its CSI driver, as upstream does).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from operators.api.errors import FieldError
from operators.engine.cluster.kube import binding
from operators.engine.cluster.kube.binding import not_found, not_owner, owned_by
from operators.engine.cluster.kube.podvolumes import (
    CLAIM,
    DISK,
    EPHEMERAL,
    PodVolume,
    conflict,
    placed_on,
    pod_volumes,
    used_claims,
    volumes_of,
)
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.cluster.storage import (
    READ_WRITE_ONCE_POD,
    WAIT_FOR_FIRST_CONSUMER,
    CSINode,
    PersistentVolumeClaim,
)

VOLUME_RESTRICTIONS, NODE_VOLUME_LIMITS = "VolumeRestrictions", "NodeVolumeLimits"
VOLUME_BINDING, VOLUME_ZONE = binding.NAME, "VolumeZone"
VOLUME_FILTERS = (VOLUME_RESTRICTIONS, NODE_VOLUME_LIMITS, VOLUME_BINDING, VOLUME_ZONE)
DISK_CONFLICT = "node(s) had no available disk"
READ_WRITE_ONCE_POD_CONFLICT = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
                                "already in-use by another pod")  # fmt: skip
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
ZONE_CONFLICT = "node(s) had no available volume zone"
UNREADABLE = "spec unreadable"
# VolumeZone's labels, in its order, and the GA label a beta one is also looked up as on the node
TOPOLOGY_LABELS = ("failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
                   "topology.kubernetes.io/zone", "topology.kubernetes.io/region")  # fmt: skip
_GA = {TOPOLOGY_LABELS[0]: TOPOLOGY_LABELS[2], TOPOLOGY_LABELS[1]: TOPOLOGY_LABELS[3]}
# in-tree provisioners and the CSI drivers they migrated to, as NodeVolumeLimits counts a class's claims; the
# other migratable ones (azure-file, vsphere-volume) are not counted
MIGRATED = {"kubernetes.io/aws-ebs": "ebs.csi.aws.com", "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
            "kubernetes.io/cinder": "cinder.csi.openstack.org", "kubernetes.io/azure-disk": "disk.csi.azure.com",
            "kubernetes.io/portworx-volume": "pxd.portworx.com"}  # fmt: skip
NOT_COUNTED = frozenset({"kubernetes.io/azure-file", "kubernetes.io/vsphere-volume"})


@dataclass
class VolumeState:
    """One pod's PreFilter results (see the module docstring); ``problem``: why every node rejects the pod, said by
    ``problem_plugin`` ("" for a spec that does not parse)."""

    pod: Pod
    snapshot: Snapshot
    volumes: tuple[PodVolume, ...]
    problem: str = ""
    problem_plugin: str = ""
    skipped: set[str] = field(default_factory=set)  # plugins whose PreFilter said Skip: their Filter does not run
    conflicting_claims: int = 0  # ReadWriteOncePod claims of the pod already used by placed pods
    bound: tuple[PersistentVolumeClaim, ...] = ()  # VolumeBinding: the claims bound, and those waiting for a node
    delayed: tuple[PersistentVolumeClaim, ...] = ()
    topologies: tuple[tuple[str, str, frozenset[str]], ...] = ()  # VolumeZone: (volume, label, zones)

    def claim(self, name: str, namespace: str | None = None) -> PersistentVolumeClaim | None:
        return self.snapshot.claim_by_key.get((namespace or self.pod.namespace, name))


def concerns(pod: Pod) -> bool:
    """Whether a volume plugin has anything to check for ``pod`` (a volume of a kind they read, or volumes that do
    not parse): :func:`prefilter` is None otherwise, whatever the snapshot."""
    try:
        return any(volume.kind for volume in pod_volumes(pod))
    except FieldError:
        return True


def new_state(pod: Pod, snapshot: Snapshot) -> VolumeState | None:
    """The state before any PreFilter (None: no volume plugin has anything to check)."""
    try:
        volumes = pod_volumes(pod)
    except FieldError as error:
        return VolumeState(pod, snapshot, (), problem=f"{UNREADABLE}: {error}")
    if not any(volume.kind for volume in volumes):
        return None
    return VolumeState(pod, snapshot, volumes)


def prefilter(pod: Pod, snapshot: Snapshot) -> VolumeState | None:
    """The four PreFilters for ``pod`` in kube-scheduler's order; the first rejection stops them."""
    state = new_state(pod, snapshot)
    if state is None or state.problem:
        return state
    for name, run in PREFILTERS:
        problem = run(state)
        if problem:
            state.problem, state.problem_plugin = problem, name
            break
    return state


# the words only the PreFilters' rejections use (a lister's NotFound, a claim being deleted or not the pod's, ...)
_EARLY_WORDS = (
    " not found",
    " is being deleted",
    "(pod is not owner)",
    binding.UNBOUND_IMMEDIATE,
    "PersistentVolumeClaim had no",
    "PersistentVolume had no name",
    "waiting for ephemeral volume",
)


def rejected_early(reason: str) -> bool:
    """Whether ``reason`` is a volume PreFilter's rejection of the pod (kube-scheduler's message then names it alone)
    rather than a Filter's verdict on a node."""
    return not reason.startswith("looking up PVC") and any(words in reason for words in _EARLY_WORDS)


def prefilter_problem(state: VolumeState | None) -> str:
    """Why the pod is rejected before any node is looked at ("" when it is not)."""
    return state.problem if state is not None else ""


def failure(state: VolumeState | None, node: Node) -> tuple[str, tuple[str, ...]]:
    """The first volume filter that rejects ``node`` and its reasons; ("", ()) when all pass."""
    if state is None:
        return ("", ())
    if state.problem:
        return (state.problem_plugin, (state.problem,))
    for name, check in FILTERS:
        if name not in state.skipped:
            reasons = check(state, node)
            if reasons:
                return (name, reasons)
    return ("", ())


# -- VolumeRestrictions --------------------------------------------------------------------------------------------


def restrictions_prefilter(state: VolumeState) -> str:
    """Looks up the pod's claims (a missing one rejects the pod) and counts those with the ReadWriteOncePod access
    mode that a placed pod uses already; Skip without such a conflict nor an inline disk."""
    once: set[str] = set()
    for volume in state.volumes:
        if volume.kind == CLAIM:
            claim = state.claim(volume.claim)
            if claim is None:
                return not_found("persistentvolumeclaim", volume.claim)
            if READ_WRITE_ONCE_POD in claim.access_modes:
                once.add(claim.name)
    if once:
        used = used_claims(state.snapshot)
        own = state.pod.key  # a bound pod explained again is not "another pod" using its own claim
        state.conflicting_claims = sum(1 for name in once if used.get((state.pod.namespace, name), frozenset()) - {own})
    if state.conflicting_claims == 0 and not any(volume.kind == DISK for volume in state.volumes):
        state.skipped.add(VOLUME_RESTRICTIONS)
    return ""


def restrictions_filter(state: VolumeState, node: Node) -> tuple[str, ...]:
    disks = [volume.disk for volume in state.volumes if volume.kind == DISK]
    if disks:
        for other in placed_on(state.snapshot, node.name):
            for volume in volumes_of(other):
                if volume.kind == DISK and any(conflict(disk, volume.disk) for disk in disks):
                    return (DISK_CONFLICT,)
    return (READ_WRITE_ONCE_POD_CONFLICT,) if state.conflicting_claims > 0 else ()


# -- NodeVolumeLimits ----------------------------------------------------------------------------------------------


def limits_prefilter(state: VolumeState) -> str:
    """Skip unless the pod uses a claim or a generic ephemeral volume."""
    if not any(volume.kind in (CLAIM, EPHEMERAL) for volume in state.volumes):
        state.skipped.add(NODE_VOLUME_LIMITS)
    return ""


def limits_filter(state: VolumeState, node: Node) -> tuple[str, ...]:
    """The pod's CSI volumes not attached to the node already, per driver, added to those of the node's pods, must
    not exceed the driver's allocatable count in the node's CSINode (no CSINode, no count: no limit)."""
    csi_node = state.snapshot.csi_node_by_name.get(node.name)
    new: dict[tuple[str, str, bool], str] = {}
    problem = _attachable(state, state.pod, csi_node, new, new_pod=True)
    if problem:
        return (problem,)
    limits = csi_node.limits if csi_node is not None else {}
    if not new or not limits:
        return ()
    attached: dict[tuple[str, str, bool], str] = {}
    for other in placed_on(state.snapshot, node.name):
        problem = _attachable(state, other, csi_node, attached, new_pod=False)
        if problem:
            return (problem,)
    used: Counter[str] = Counter()
    for volume, driver in attached.items():
        new.pop(volume, None)  # a volume the node has attached already counts once
        used[driver] += 1
    for driver, count in Counter(new.values()).items():
        if driver in limits and used[driver] + count > limits[driver]:
            return (MAX_VOLUME_COUNT,)
    return ()


def _attachable(state: VolumeState, pod: Pod, csi_node: CSINode | None, into: dict[tuple[str, str, bool], str],
                new_pod: bool) -> str:  # fmt: skip
    """Adds the pod's CSI volumes to ``into`` (unique volume -> driver); a message when the Filter fails."""
    for volume in volumes_of(pod):
        if volume.kind not in (CLAIM, EPHEMERAL):
            continue
        if not volume.claim:
            return "PersistentVolumeClaim had no name"
        claim = state.claim(volume.claim, pod.namespace)
        if claim is None:
            if new_pod:
                return f"looking up PVC {pod.namespace}/{volume.claim}: " + not_found("persistentvolumeclaim",
                                                                                       volume.claim)  # fmt: skip
            continue
        if volume.kind == EPHEMERAL and not owned_by(claim, pod):
            return not_owner(claim, pod)
        found = _csi_volume(state.snapshot, claim, csi_node)
        if found is not None:
            into[found[1]] = found[0]
    return ""


def _csi_volume(snapshot: Snapshot, claim: PersistentVolumeClaim,
                csi_node: CSINode | None) -> tuple[str, tuple[str, str, bool]] | None:  # fmt: skip
    """(driver, unique volume) of a claim: its volume's CSI driver and handle; for a claim not bound (or bound to a
    volume that is gone) its class's provisioner and the claim itself; None when it is not counted."""
    volume = snapshot.volume_by_name.get(claim.volume_name) if claim.volume_name else None
    if volume is not None:
        if volume.csi is None:  # an in-tree volume (its translation to CSI is not modelled)
            return None
        return (volume.csi[0], (volume.csi[0], volume.csi[1], False))
    storage_class = snapshot.storage_class_by_name.get(claim.storage_class) if claim.storage_class else None
    if storage_class is None or storage_class.provisioner in NOT_COUNTED:
        return None
    driver = storage_class.provisioner
    if driver in MIGRATED:
        if csi_node is None:
            return None
        driver = MIGRATED[driver]
    return (driver, (driver, f"{claim.namespace}/{claim.name}", True))


# -- VolumeZone ----------------------------------------------------------------------------------------------------


def zone_prefilter(state: VolumeState) -> str:
    """The zone and region labels of the volumes bound to the pod's claims (a claim waiting for its first consumer
    is skipped); Skip when there are none."""
    topologies: list[tuple[str, str, frozenset[str]]] = []
    for volume in state.volumes:
        if volume.kind != CLAIM:
            continue
        if not volume.claim:
            return "PersistentVolumeClaim had no name"
        claim = state.claim(volume.claim)
        if claim is None:
            return not_found("persistentvolumeclaim", volume.claim)
        if not claim.volume_name:
            if not claim.storage_class:
                return "PersistentVolumeClaim had no pv name and storageClass name"
            storage_class = state.snapshot.storage_class_by_name.get(claim.storage_class)
            if storage_class is None:
                return not_found("storageclass.storage.k8s.io", claim.storage_class)
            if storage_class.binding_mode == WAIT_FOR_FIRST_CONSUMER:
                continue
            return "PersistentVolume had no name"
        found = state.snapshot.volume_by_name.get(claim.volume_name)
        if found is None:
            return not_found("persistentvolume", claim.volume_name)
        for key in TOPOLOGY_LABELS:
            if key in found.labels:
                zones = [zone.strip() for zone in found.labels[key].split("__")]
                if all(zones):  # a value with an empty zone is ignored
                    topologies.append((found.name, key, frozenset(zones)))
    state.topologies = tuple(topologies)
    if not topologies:
        state.skipped.add(VOLUME_ZONE)
    return ""


def zone_filter(state: VolumeState, node: Node) -> tuple[str, ...]:
    """Each volume label's zones must hold the node's value of that label (of its GA name for a beta one); a node
    without any of the four labels passes."""
    labels = node.labels
    if not any(key in labels for key in TOPOLOGY_LABELS):
        return ()
    for _, key, zones in state.topologies:
        value = labels.get(key, labels.get(_GA.get(key, key)))
        if value is None or value not in zones:
            return (ZONE_CONFLICT,)
    return ()


def _binding_prefilter(state: VolumeState) -> str:
    found = binding.prefilter(state.pod, state.snapshot, [(v.claim, v.kind == EPHEMERAL) for v in state.volumes
                                                          if v.kind in (CLAIM, EPHEMERAL)])  # fmt: skip
    if found is None:
        state.skipped.add(VOLUME_BINDING)
        return ""
    if isinstance(found, str):
        return found
    state.bound, state.delayed = found
    return ""


def _binding_filter(state: VolumeState, node: Node) -> tuple[str, ...]:
    return binding.check(state.snapshot, state.bound, state.delayed, node)


PREFILTERS: tuple[tuple[str, Callable[[VolumeState], str]], ...] = (
    (VOLUME_RESTRICTIONS, restrictions_prefilter),
    (NODE_VOLUME_LIMITS, limits_prefilter),
    (VOLUME_BINDING, _binding_prefilter),
    (VOLUME_ZONE, zone_prefilter),
)
FILTERS: tuple[tuple[str, Callable[[VolumeState, Node], tuple[str, ...]]], ...] = (
    (VOLUME_RESTRICTIONS, restrictions_filter),
    (NODE_VOLUME_LIMITS, limits_filter),
    (VOLUME_BINDING, _binding_filter),
    (VOLUME_ZONE, zone_filter),
)
