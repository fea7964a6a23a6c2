"""The pods a watch has told us about, kept exact across adds, updates and deletes.

A watch delivers ADDED / MODIFIED / DELETED events; the ledger keeps the latest version of
every live pod by uid (namespace/name when there is none), so anything computed from it equals
a recomputation from a fresh list, whatever the sequence of events. (Upstream's
networktopology-controller instead adds a pod's bandwidth again on every update.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.engine.cluster.objects import Pod


class PodLedger:
    def __init__(self) -> None:
        self._pods: dict[str, Pod] = {}

    @staticmethod
    def _key(raw: Mapping[str, Any]) -> str:
        meta = raw.get("metadata") or {}
        return str(meta.get("uid") or f"{meta.get('namespace', 'default')}/{meta.get('name')}")

    def apply(self, event_type: str, raw: Mapping[str, Any]) -> None:
        """Record one watch event (``ADDED``, ``MODIFIED``, ``DELETED``, or None for a listing)."""
        key = self._key(raw)
        if event_type == "DELETED":
            self._pods.pop(key, None)
        else:
            self._pods[key] = Pod.parse(dict(raw))

    def pods(self) -> tuple[Pod, ...]:
        return tuple(self._pods[key] for key in sorted(self._pods))

    def __len__(self) -> int:
        return len(self._pods)
