"""Builders for the uninstall cleanup's tests (engine/status/uninstall.py, ``netaware cleanup``): nodes that
advertise netaware's bandwidth resources, pods gated, sent to a scheduler, owned or not."""

from __future__ import annotations

from typing import Any

GATE = "netaware.io/topology-order"
SCHEDULER = "network-aware-scheduler"


def node(name: str, resources: dict[str, str] | None = None) -> dict[str, Any]:
    held = {"cpu": "8", "pods": "110", **(resources or {})}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"capacity": held, "allocatable": held}}  # fmt: skip


def pod(
    name: str,
    node_name: str = "",
    gates: tuple[str, ...] = (),
    scheduler: str = "default-scheduler",
    requests: dict[str, str] | None = None,
    owner: str = "",
    phase: str = "",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [{"name": "c", "resources": {
        "requests": {"cpu": "100m", **(requests or {})}}}]}  # fmt: skip
    if node_name:
        spec["nodeName"] = node_name
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    meta: dict[str, Any] = {"name": name, "namespace": "apps", "uid": f"uid-{name}"}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": "rs",
                                    "controller": True}]  # fmt: skip
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec,
            "status": {"phase": phase or ("Running" if node_name else "Pending")}}  # fmt: skip


EGRESS = {"netaware.io/egress-bandwidth": "100M"}
ADVERTISED = {"netaware.io/egress-bandwidth": "1G", "netaware.io/ingress-bandwidth": "1G"}
