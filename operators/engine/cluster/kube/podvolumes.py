"""The volumes of pods as kube-scheduler's volume plugins read them (pure): claims, generic ephemeral volumes (their
claim is named ``<pod>-<volume>``) and the inline disks VolumeRestrictions compares (GCE PD, AWS EBS, iSCSI, RBD),
parsed once per pod object; the pods a node holds and the claims they use."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from operators.api.errors import FieldError
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.memo import per_object

CLAIM, EPHEMERAL, DISK = "claim", "ephemeral", "disk"


@dataclass(frozen=True)
class PodVolume:
    """One volume of a pod as the plugins read it: a claim (``claim``: its name), a generic ephemeral volume (its
    claim is ``<pod>-<volume>``), an inline disk (``disk``: what identifies it, whether read-only) or another."""

    name: str
    kind: str  # claim | ephemeral | disk | "" (any other)
    claim: str = ""
    disk: tuple[Any, ...] = ()  # (source, identity..., read_only)


def pod_volumes(pod: Pod) -> tuple[PodVolume, ...]:
    """The pod's volumes (kept per pod object). Raises ``FieldError``."""
    return per_object(_VOLUMES, pod.raw, _VOLUMES_KEPT, _parse, pod)


_VOLUMES: dict[int, tuple[object, tuple[PodVolume, ...]]] = {}
_VOLUMES_KEPT = 50_000


def _parse(pod: Pod) -> tuple[PodVolume, ...]:
    raw = (pod.raw.get("spec") or {}).get("volumes")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise FieldError("spec.volumes", raw, "expected a list")
    found = []
    for index, volume in enumerate(raw):
        at = f"spec.volumes[{index}]"
        if not isinstance(volume, Mapping):
            raise FieldError(at, volume, "expected an object")
        name = str(volume.get("name") or "")
        if volume.get("persistentVolumeClaim") is not None:
            claim = _source(volume, "persistentVolumeClaim", at).get("claimName")
            if not isinstance(claim, str | None):
                raise FieldError(f"{at}.persistentVolumeClaim.claimName", claim, "expected a string")
            found.append(PodVolume(name, CLAIM, claim or ""))
        elif volume.get("ephemeral") is not None:
            found.append(PodVolume(name, EPHEMERAL, f"{pod.name}-{name}"))
        else:
            disk = _disk(volume, at)
            found.append(PodVolume(name, DISK if disk else "", disk=disk))
    return tuple(found)


def _source(volume: Mapping[str, Any], source: str, at: str) -> Mapping[str, Any]:
    value = volume[source]
    if not isinstance(value, Mapping):
        raise FieldError(f"{at}.{source}", value, "expected an object")
    return value


def _disk(volume: Mapping[str, Any], at: str) -> tuple[Any, ...]:
    """What VolumeRestrictions compares of an inline disk: (source, identity..., read_only)."""
    for source, parts in (("gcePersistentDisk", ("pdName",)), ("awsElasticBlockStore", ("volumeID",)),
                          ("iscsi", ("iqn",)), ("rbd", ("pool", "image"))):  # fmt: skip
        if volume.get(source) is None:
            continue
        disk = _source(volume, source, at)
        identity: tuple[Any, ...] = tuple(str(disk.get(part) or ("rbd" if part == "pool" else "")) for part in parts)
        if source == "rbd":
            identity += (frozenset(str(monitor) for monitor in disk.get("monitors") or ()),)
        return (source, *identity, bool(disk.get("readOnly")))
    return ()


def conflict(disk: tuple[Any, ...], other: tuple[Any, ...]) -> bool:
    """Upstream's ``isVolumeConflict`` for one pair of inline disks."""
    if disk[0] != other[0]:
        return False
    both_read_only = disk[-1] and other[-1]
    if disk[0] == "awsElasticBlockStore":
        return bool(disk[1] == other[1])
    if disk[0] == "rbd":  # a monitor in common, the same pool and image
        return bool(disk[3] & other[3]) and disk[1:3] == other[1:3] and not both_read_only
    return bool(disk[1] == other[1]) and not both_read_only


def placed_on(snapshot: Snapshot, node: str) -> Iterable[Pod]:
    """The pods kube-scheduler's NodeInfo holds for ``node``: bound there, not finished."""
    return (pod for pod in snapshot.pods_by_node.get(node, ()) if not pod.is_terminal)


def volumes_of(pod: Pod) -> tuple[PodVolume, ...]:
    try:
        return pod_volumes(pod)
    except FieldError:  # a placed pod's volumes are the API server's to validate
        return ()


def used_claims(snapshot: Snapshot) -> Mapping[tuple[str, str], frozenset[str]]:
    """(namespace, claim) -> the keys of the placed pods that use it (kept per snapshot)."""
    return per_object(_USED, snapshot, 4, _used_claims, snapshot)


def _used_claims(snapshot: Snapshot) -> Mapping[tuple[str, str], frozenset[str]]:
    used: dict[tuple[str, str], set[str]] = {}
    for pods in snapshot.pods_by_node.values():
        for pod in pods:
            if not pod.is_terminal:
                for volume in volumes_of(pod):
                    if volume.kind == CLAIM:
                        used.setdefault((pod.namespace, volume.claim), set()).add(pod.key)
    return {claim: frozenset(keys) for claim, keys in used.items()}


_USED: dict[int, tuple[object, Mapping[tuple[str, str], frozenset[str]]]] = {}
