"""The AdmissionReview answer every mutating webhook of netaware sends (admission/v1): allowed or refused with why,
with a JSON patch and warnings."""

from __future__ import annotations

import base64
from typing import Any

import orjson


def review_response(
    uid: str,
    allowed: bool,
    patch: list[dict[str, Any]] | None = None,
    message: str = "",
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    response: dict[str, Any] = {"uid": uid, "allowed": allowed}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(patch)).decode()
    if not allowed:
        response["status"] = {"code": 400, "reason": "BadRequest", "message": message}
    if warnings:
        response["warnings"] = warnings
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
