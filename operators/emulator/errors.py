"""The ``Status`` answers the emulator gives, shaped as the API server writes them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp.web
import kmock


def status_error(
    code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> kmock.KubernetesError:
    return kmock.KubernetesError(status=code, reason=reason, message=message, details=dict(details or {}))


def not_found(name: str, plural: str, group: str) -> kmock.KubernetesError:
    return status_error(
        404,
        "NotFound",
        f'{plural}{"." + group if group else ""} "{name}" not found',
        {"name": name, "kind": plural, "group": group},
    )


def bad_request(message: str) -> kmock.KubernetesError:
    return status_error(400, "BadRequest", message)


def watch_error(message: str, code: int) -> dict[str, Any]:
    """A watch stream's ERROR event: 410 Expired (the version was compacted away) or 400."""
    return {
        "type": "ERROR",
        "object": {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": "Expired" if code == 410 else "BadRequest",
            "code": code,
        },
    }


def render_error(exc: Exception) -> aiohttp.web.Response:
    # A Status as the API server writes it: no Python traceback in ``details`` (kmock adds one).
    status, reason, message, details = 500, "InternalError", f"internal error: {exc!r}", None
    if isinstance(exc, kmock.KubernetesError):
        status, reason, message = exc.status or 500, exc.reason or "InternalError", exc.message or repr(exc)
        details = exc.details or None
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Status",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": status,
    }
    if details:
        body["details"] = details
    return aiohttp.web.json_response(body, status=status)
