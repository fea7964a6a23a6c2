"""kube-scheduler's ``DefaultSelector`` (pure, ``plugins/helper/spread.go``): what selects a pod for the default
topology spread constraints.

1. The Services of the pod's namespace whose selector matches its labels (a Service without a selector selects
   nothing): their selectors merged into one set of labels (``labels.Merge``: a later key replaces an earlier one;
   the selectors match the same pod, so they agree).
2. The pod's controller (its first owner reference with ``controller: true``), found by name in its namespace by
   apiVersion and kind: a ``v1`` ReplicationController's selector map is merged into that set (its keys replace the
   Services'); an ``apps/v1`` ReplicaSet's or StatefulSet's label selector adds its requirements to the set's
   (both kept for a key they share; a controller without a selector adds nothing). A controller that is not in the
   snapshot, or of another kind, adds nothing.

The result's requirements are sorted by key, as upstream's selectors are; an empty one selects every pod (the
spread plugin then adds no default constraint).
"""

from __future__ import annotations

from collections.abc import Mapping

from operators.api.selectors import Requirement, Selector
from operators.engine.cluster.objects import Pod, ReplicationController, Service
from operators.engine.cluster.snapshot import Snapshot

# the (apiVersion, kind) of the controllers upstream reads
_CONTROLLERS = frozenset({("v1", "ReplicationController"), ("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")})


def controller_of(pod: Pod) -> tuple[str, str, str] | None:
    """(apiVersion, kind, name) of the pod's first owner reference with ``controller: true`` (upstream's
    ``GetControllerOf``); None without one."""
    owners = (pod.raw.get("metadata") or {}).get("ownerReferences") or ()
    for owner in owners if isinstance(owners, list) else ():
        if isinstance(owner, Mapping) and owner.get("controller") is True:
            return (str(owner.get("apiVersion") or ""), str(owner.get("kind") or ""), str(owner.get("name") or ""))
    return None


def services_of(pod: Pod, snapshot: Snapshot) -> tuple[Service, ...]:
    """The Services of the pod's namespace that select it (upstream's ``GetPodServices``)."""
    return tuple(
        service
        for service in snapshot.services_by_namespace.get(pod.namespace, ())
        if service.selector is not None and all(pod.labels.get(key) == value for key, value in service.selector.items())
    )


def default_selector(pod: Pod, snapshot: Snapshot) -> Selector:
    """The union of what selects ``pod`` (see the module docstring)."""
    merged: dict[str, str] = {}
    for service in services_of(pod, snapshot):
        merged.update(service.selector or {})
    added: tuple[Requirement, ...] = ()
    owner = controller_of(pod)
    if owner is not None and (owner[0], owner[1]) in _CONTROLLERS:
        controller = snapshot.controller_by_key.get((owner[1], pod.namespace, owner[2]))
        if isinstance(controller, ReplicationController):
            merged.update(controller.selector)
        elif controller is not None:  # a selector that matches nothing has no requirements: it adds none
            added = controller.selector.requirements
    requirements = [Requirement(key, "In", frozenset({value})) for key, value in merged.items()]
    return Selector(tuple(sorted([*requirements, *added], key=lambda requirement: requirement.key)))
