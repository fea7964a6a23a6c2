"""Builders for LowNodeLoad's tests: nodes of a bandwidth, pods of a number of 100Mi units, a hot cluster."""

from __future__ import annotations

import datetime
from typing import Any

NOW = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=datetime.UTC)


def node(name: str, bandwidth: str = "1Gi", cpu: str = "32", memory: str = "128Gi", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, **extra.pop("labels", {})},
            "annotations": {"node.koordinator.sh/network-bandwidth": bandwidth},
        },
        "spec": extra.pop("spec", {}),
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


def pod(
    name: str,
    on: str,
    units: int = 1,
    namespace: str = "default",
    owner: str | None = "ReplicaSet",
    cpu: str = "100m",
    memory: str = "128Mi",
    **extra: Any,
) -> dict[str, Any]:
    bandwidth = str(UNIT * units)
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": extra.pop("labels", {"app": name.rstrip("0123456789-")}),
        "annotations": {
            "kubernetes.io/ingress-bandwidth": bandwidth,
            "kubernetes.io/egress-bandwidth": bandwidth,
            **extra.pop("annotations", {}),
        },
        "creationTimestamp": "2026-11-01T00:00:00Z",
    }
    if owner:
        metadata["ownerReferences"] = [{"kind": owner, "name": "x", "apiVersion": "apps/v1", "uid": "u"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "nodeName": on,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
            **extra.pop("spec", {}),
        },
        "status": {"phase": "Running"},
    }


def hot_cluster() -> list[dict[str, Any]]:
    """Like the table, with evictable load only: hot nodes carry 9 one-unit pods (87.9 %)."""
    objects = [node(f"n{i}") for i in range(10)]
    for hot in ("n0", "n1", "n2"):
        objects += [pod(f"{hot}-app-{k}", hot, 1) for k in range(9)]
        objects.append(pod(f"{hot}-daemon", hot, 0, owner="DaemonSet"))  # never picked, even at no cost
    for middle in ("n3", "n4", "n5"):
        objects += [pod(f"{middle}-app-{k}", middle, 1) for k in range(5)]
    objects += [pod("n6-app-1", "n6", 1), pod("n7-app-1", "n7", 1)]
    return objects


UNIT = 50 * 1024**2  # 50Mi in + 50Mi out = 100Mi per pod, 9.77 % of a 1Gi node in combined accounting
