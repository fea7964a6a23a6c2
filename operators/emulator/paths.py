"""Kubernetes API paths (``/api/v1/namespaces/ns/pods/name/eviction`` -> its parts) and requests."""

from __future__ import annotations

import json
from dataclasses import dataclass

import aiohttp.web
import kmock
from kmock._internal import enums, rendering

# Go's strconv.ParseBool, as the API server reads ?watch= (kubernetes-asyncio sends "True").
WATCH_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})


@dataclass(frozen=True)
class ApiPath:
    group: str
    version: str
    plural: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


def parse_path(path: str) -> ApiPath | None:
    """The parts of an API path, or None for a path that is not under /api or /apis.

    ``/api/v1/namespaces`` and ``/api/v1/namespaces/<name>[/status|/finalize]`` address the
    cluster-scoped Namespace resource; any longer ``/namespaces/<ns>/...`` path is namespaced.
    """
    parts = [part for part in path.split("/") if part]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    elif parts[:1] in (["api"], ["apis"]):
        return ApiPath(parts[1] if len(parts) > 1 else "", "")
    else:
        return None
    if not rest:
        return ApiPath(group, version)
    namespace = None
    if rest[0] == "namespaces":
        if len(rest) == 1 or (len(rest) == 3 and rest[2] in ("status", "finalize")) or len(rest) == 2:
            return ApiPath(
                group,
                version,
                "namespaces",
                None,
                rest[1] if len(rest) > 1 else None,
                rest[2] if len(rest) > 2 else None,
            )
        namespace, rest = rest[1], rest[2:]
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = "/".join(rest[2:]) or None
    return ApiPath(group, version, plural, namespace, name, subresource)


async def parse_request(raw: aiohttp.web.BaseRequest, request_id: int) -> rendering.Request:
    """kmock's own path parser cannot read /api/v1/namespaces[/name]: the request as kmock's handlers take it."""
    body = await raw.read()
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    parsed = parse_path(raw.path)
    resource = (
        None if parsed is None else kmock.resource(group=parsed.group, version=parsed.version, plural=parsed.plural)
    )
    method = enums.method(raw.method)
    action: enums.action | None = None
    query = dict(raw.query)
    if parsed is not None and parsed.plural is not None:
        if method == enums.method.GET and query.get("watch") in WATCH_TRUE:
            action = enums.action.WATCH
        elif parsed.name is None:
            action = {enums.method.GET: enums.action.LIST, enums.method.POST: enums.action.CREATE}.get(method)
        else:
            action = {
                enums.method.GET: enums.action.FETCH,
                enums.method.PATCH: enums.action.UPDATE,
                enums.method.DELETE: enums.action.DELETE,
            }.get(method)
    return rendering.Request(
        id=request_id,
        raw_request=raw,
        url=raw.url,
        method=raw.method,
        params=query,
        headers=dict(raw.headers),
        cookies=dict(raw.cookies),
        data=data,
        body=body,
        text=text,
        action=action,
        resource=resource,
        namespace=parsed.namespace if parsed else None,
        name=parsed.name if parsed else None,
        subresource=parsed.subresource if parsed else None,
    )
