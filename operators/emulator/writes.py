"""Create, update (PUT, patches, ``/status``) and delete as the API server does them: 201 on create,
``generateName``, 404 in a namespace that does not exist, 409 on a name taken or a stale
``resourceVersion``, no-op writes change nothing, ``dryRun=All`` stores nothing, finalizers hold a
deleted object with its ``deletionTimestamp``."""

from __future__ import annotations

import copy
import uuid
from typing import Any

import kmock
from kmock._internal import rendering

from operators.emulator.errors import bad_request, not_found, status_error
from operators.emulator.patching import MERGE_PATCH, allowed_change, apply_patch
from operators.emulator.store import ObjectKey, ObjectStore, check_size, now, resource_key

VOLATILE = ("uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp")


def dry_run(request: rendering.Request) -> bool:
    return request.params.get("dryRun") == "All"


def api_version(resource: kmock.resource) -> str:
    return f"{resource.group}/{resource.version}" if resource.group else str(resource.version)


def key_of(request: rendering.Request, info: kmock.ResourceInfo) -> ObjectKey:
    assert request.resource is not None
    return resource_key(request.resource), request.namespace if info.namespaced else None, request.name or ""


async def create(store: ObjectStore, request: rendering.Request, info: kmock.ResourceInfo) -> dict[str, Any]:
    assert request.resource is not None
    if not isinstance(request.data, dict):
        raise bad_request("the request body must be a JSON object")
    obj = copy.deepcopy(request.data)
    meta = obj.setdefault("metadata", {})
    if not meta.get("name"):
        if not meta.get("generateName"):
            raise status_error(
                422,
                "Invalid",
                f"{info.kind} is invalid: metadata.name: Required value",
                {"kind": info.kind, "causes": [{"field": "metadata.name", "reason": "FieldValueRequired"}]},
            )
        meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
    namespace = None
    if info.namespaced:
        namespace = request.namespace or meta.get("namespace") or "default"
        if meta.get("namespace") not in (None, namespace):
            raise bad_request("the namespace of the object does not match the namespace of the request")
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    obj.setdefault("apiVersion", api_version(request.resource))
    obj.setdefault("kind", info.kind)
    for volatile in VOLATILE:
        meta.pop(volatile, None)
    if "status" in info.subresources and info.kind != "Node":
        obj.pop("status", None)  # the status subresource is written through /status only (a Node's
        # status is kept on create, as the API server does for a kubelet's registration)
    if namespace is not None and request.resource.plural != "namespaces" and not namespace_exists(store, namespace):
        raise status_error(
            404, "NotFound", f'namespaces "{namespace}" not found', {"name": namespace, "kind": "namespaces"}
        )
    key = (resource_key(request.resource), namespace, meta["name"])
    if key in store.objects:
        raise status_error(
            409,
            "AlreadyExists",
            f'{request.resource.plural} "{meta["name"]}" already exists',
            {"name": meta["name"], "kind": request.resource.plural},
        )
    check_size(obj)
    if dry_run(request):
        return obj
    store.stamp_new(obj)
    store.put(request.resource, key, obj, "ADDED")
    await store.notify()
    return copy.deepcopy(obj)


def namespace_exists(store: ObjectStore, namespace: str) -> bool:
    return ("/v1/namespaces", None, namespace) in store.objects


def existing(store: ObjectStore, request: rendering.Request, info: kmock.ResourceInfo) -> dict[str, Any]:
    assert request.resource is not None and request.name is not None
    obj = store.objects.get(key_of(request, info))
    if obj is None:
        raise not_found(request.name, request.resource.plural or "", request.resource.group or "")
    return obj


async def update(
    store: ObjectStore, request: rendering.Request, info: kmock.ResourceInfo, replace: bool
) -> dict[str, Any]:
    assert request.resource is not None
    current = existing(store, request, info)
    body = request.data
    if replace:
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        patched = copy.deepcopy(body)
    else:
        patched = apply_patch(current, body, request.headers.get("Content-Type", MERGE_PATCH))
    sent_rv = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
    if sent_rv and sent_rv != current["metadata"]["resourceVersion"]:
        raise status_error(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on {request.resource.plural} "{request.name}": the object has been '
            "modified; please apply your changes to the latest version and try again",
            {"name": request.name, "kind": request.resource.plural},
        )
    result = allowed_change(current, patched, "status" in info.subresources, request.subresource == "status")
    if request.resource.plural == "pods":
        check_scheduling_gates(current, result, request.name or "")
        check_placement(current, result, request.name or "")
    if result == current:
        return copy.deepcopy(current)
    check_size(result)
    if dry_run(request):
        return result
    result["metadata"]["resourceVersion"] = store.next_rv()
    meta = result["metadata"]
    if meta.get("deletionTimestamp") and not meta.get("finalizers"):
        store.delete(request.resource, key_of(request, info), result)
    else:
        store.put(request.resource, key_of(request, info), result, "MODIFIED", request.subresource)
    await store.notify()
    return copy.deepcopy(result)


def _gate_names(pod: dict[str, Any]) -> list[Any]:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return [gate.get("name") if isinstance(gate, dict) else gate for gate in gates]


def check_scheduling_gates(current: dict[str, Any], result: dict[str, Any], name: str) -> None:
    """As the API server: a pod's scheduling gates can only be removed, never added (422 Invalid)."""
    before = _gate_names(current)
    for gate in _gate_names(result):
        if gate not in before:
            raise status_error(
                422,
                "Invalid",
                f'Pod "{name}" is invalid: spec.schedulingGates: Forbidden: only deletion is allowed, but found new '
                f"scheduling gate '{gate}'",
            )


def check_placement(current: dict[str, Any], result: dict[str, Any], name: str) -> None:
    """As the API server (KEP-3838): a pod's nodeSelector and node affinity are immutable, except while it is gated,
    when nodeSelector and required affinity may be narrowed — keys added, required affinity set when it had none
    or each of its terms given more requirements — and preferred affinity changed freely (422 Invalid otherwise)."""
    before, after = current.get("spec") or {}, result.get("spec") or {}
    old_selector, new_selector = before.get("nodeSelector") or {}, after.get("nodeSelector") or {}
    old_required = ((before.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    new_required = ((after.get("affinity") or {}).get("nodeAffinity") or {}).get(REQUIRED)
    old_preferred = ((before.get("affinity") or {}).get("nodeAffinity") or {}).get(PREFERRED)
    new_preferred = ((after.get("affinity") or {}).get("nodeAffinity") or {}).get(PREFERRED)
    gated = bool(before.get("schedulingGates"))
    if old_preferred != new_preferred and not gated:  # any change while gated; none after
        message = "pod updates may not change fields other than those allowed; preferred node affinity allows none"
        raise status_error(422, "Invalid", f'Pod "{name}" is invalid: spec: Forbidden: {message}')
    if old_selector == new_selector and old_required == new_required:
        return
    narrowed = all(new_selector.get(key) == value for key, value in old_selector.items()) and _narrowed(
        old_required, new_required
    )
    if not (gated and narrowed):
        what = "only additions" if gated else "no changes"
        raise status_error(
            422,
            "Invalid",
            f'Pod "{name}" is invalid: spec: Forbidden: pod updates may not change fields other than those '
            f"allowed; nodeSelector and required node affinity allow {what} here",
        )


REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _narrowed(old: Any, new: Any) -> bool:
    """Whether required node affinity ``new`` only adds to ``old``: anything when there was none; else as many
    terms, each keeping its requirements in order and possibly adding some."""
    if not old or not (old.get("nodeSelectorTerms") or []):
        return True
    old_terms, new_terms = old.get("nodeSelectorTerms") or [], (new or {}).get("nodeSelectorTerms") or []
    if len(old_terms) != len(new_terms):
        return False
    for was, becomes in zip(old_terms, new_terms, strict=True):
        for field in ("matchExpressions", "matchFields"):
            kept = was.get(field) or []
            if (becomes.get(field) or [])[: len(kept)] != kept:
                return False
    return True


async def delete(store: ObjectStore, request: rendering.Request, info: kmock.ResourceInfo) -> dict[str, Any]:
    assert request.resource is not None
    current = existing(store, request, info)
    preconditions = (request.data or {}).get("preconditions") if isinstance(request.data, dict) else None
    for field_name in ("uid", "resourceVersion"):
        wanted = (preconditions or {}).get(field_name)
        if wanted and wanted != current["metadata"].get(field_name):
            raise status_error(
                409,
                "Conflict",
                f"Precondition failed: {field_name} in precondition: {wanted}, "
                f"in object meta: {current['metadata'].get(field_name)}",
            )
    if dry_run(request):
        return copy.deepcopy(current)
    return await remove(store, request.resource, key_of(request, info))


async def remove(store: ObjectStore, resource: kmock.resource, key: ObjectKey) -> dict[str, Any]:
    """Delete, or with finalizers mark for deletion (once) and keep."""
    current = store.objects[key]
    meta = current["metadata"]
    if meta.get("finalizers"):
        if not meta.get("deletionTimestamp"):
            updated = copy.deepcopy(current)
            updated["metadata"]["deletionTimestamp"] = now()
            updated["metadata"]["deletionGracePeriodSeconds"] = 0
            updated["metadata"]["resourceVersion"] = store.next_rv()
            store.put(resource, key, updated, "MODIFIED")
            await store.notify()
        return copy.deepcopy(store.objects[key])
    gone = copy.deepcopy(current)
    gone["metadata"]["resourceVersion"] = store.next_rv()
    store.delete(resource, key, gone)
    await store.notify()
    return gone
