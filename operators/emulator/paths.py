"""Kubernetes API paths: ``/api/v1/namespaces/ns/pods/name/eviction`` -> its parts."""

from __future__ import annotations

from dataclasses import dataclass


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
