"""Writes as the API server applies them (pure): JSON patch, merge patch (strategic merge patch read as one),
and what each endpoint may change — the main resource keeps the status, ``/status`` changes only the status,
the server keeps the metadata it owns, and ``generation`` moves on spec changes only."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonpatch

from operators.emulator.errors import bad_request, status_error

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
SERVER_OWNED = ("uid", "creationTimestamp", "name", "namespace", "generation", "resourceVersion")


def apply_patch(current: dict[str, Any], body: Any, content_type: str) -> dict[str, Any]:
    kind = content_type.split(";", maxsplit=1)[0].strip()
    if kind == APPLY_PATCH:
        raise status_error(415, "UnsupportedMediaType", "server-side apply is not supported by the emulator")
    if kind == JSON_PATCH:
        if not isinstance(body, list):
            raise bad_request("a JSON patch must be a list of operations")
        try:
            result: dict[str, Any] = jsonpatch.apply_patch(current, body)
        except jsonpatch.JsonPatchTestFailed as error:
            raise status_error(422, "Invalid", f"the JSON patch test failed: {error}") from None
        except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
            raise status_error(422, "Invalid", f"the JSON patch could not be applied: {error}") from None
        return result
    if kind not in (MERGE_PATCH, STRATEGIC_PATCH, "application/json"):
        raise status_error(415, "UnsupportedMediaType", f"the patch type {kind!r} is not supported")
    if not isinstance(body, dict):
        raise bad_request("a merge patch must be a JSON object")
    merged: dict[str, Any] = merge_patch(current, body)
    return merged


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def allowed_change(
    current: dict[str, Any], patched: dict[str, Any], has_status: bool, status_only: bool
) -> dict[str, Any]:
    """Apply only what the endpoint may change, keep what the server owns."""
    if status_only:
        result = copy.deepcopy(current)
        if "status" in patched:
            result["status"] = copy.deepcopy(patched["status"])
        else:
            result.pop("status", None)
        return result
    result = copy.deepcopy(patched)
    if has_status:
        if "status" in current:
            result["status"] = copy.deepcopy(current["status"])
        else:
            result.pop("status", None)
    meta = result.setdefault("metadata", {})
    old_meta = current["metadata"]
    for owned in SERVER_OWNED:
        if owned in old_meta:
            meta[owned] = old_meta[owned]
        else:
            meta.pop(owned, None)
    if old_meta.get("deletionTimestamp"):
        meta["deletionTimestamp"] = old_meta["deletionTimestamp"]
    else:
        meta.pop("deletionTimestamp", None)
    result["apiVersion"] = current.get("apiVersion")
    result["kind"] = current.get("kind")
    if _spec_of(result) != _spec_of(current):
        meta["generation"] = int(old_meta.get("generation", 1)) + 1
    return result


def _spec_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key not in ("metadata", "status")}
