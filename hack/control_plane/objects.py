"""Objects the tests and the benchmarks create on the control plane, written once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def member_deployment(
    namespace: str,
    group: str,
    selector: str,
    replicas: int,
    cpu: str | None = None,
    scheduler: str | None = None,
    gates: Sequence[str] = (),
) -> dict[str, Any]:
    """A Deployment of pause pods labelled as AppGroup ``group``'s workload ``selector``: each asking ``cpu`` (when
    given), for ``scheduler`` (when given), created behind the scheduling ``gates``."""
    labels = {"appgroup.diktyo.x-k8s.io": group, "appgroup.diktyo.x-k8s.io.workload": selector}
    container: dict[str, Any] = {"name": "app", "image": PAUSE_IMAGE}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu}}
    spec: dict[str, Any] = {"containers": [container]}
    if scheduler is not None:
        spec = {"schedulerName": scheduler, **spec}
    if gates:
        spec["schedulingGates"] = [{"name": gate} for gate in gates]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": selector, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def member_appgroup(
    namespace: str, name: str, graph: dict[str, list[str]], annotations: dict[str, str], max_cost: int = 5
) -> dict[str, Any]:
    """AppGroup ``name`` of Deployments named by their selectors, ``graph`` its dependencies (each with
    ``maxNetworkCost``), with ``annotations``."""

    def workload(selector: str) -> dict[str, str]:
        return {"kind": "Deployment", "name": selector, "selector": selector, "apiVersion": "apps/v1"}

    return {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "numMembers": len(graph),
            "topologySortingAlgorithm": "KahnSort",
            "workloads": [
                {
                    "workload": workload(selector),
                    "dependencies": [{"workload": workload(d), "maxNetworkCost": max_cost} for d in children],
                }
                for selector, children in graph.items()
            ],
        },
    }


def extender_entry(port: int, ca_data: str | None, weight: int, ignorable: bool, timeout: str) -> dict[str, Any]:
    """A KubeSchedulerConfiguration's extender entry for `netaware extender` on loopback ``port`` over TLS (CA
    bundle ``ca_data``, base64; None: the system's), ``nodeCacheCapable``, with its weight, ``ignorable`` and
    ``httpTimeout``."""
    entry: dict[str, Any] = {
        "urlPrefix": f"https://127.0.0.1:{port}",
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": weight,
        "enableHTTPS": True,
        "nodeCacheCapable": True,
        "ignorable": ignorable,
        "httpTimeout": timeout,
    }
    if ca_data is not None:
        entry["tlsConfig"] = {"caData": ca_data}
    return entry


def zonal_volume(namespace: str, claim: str, volume: str, zone: str, size: str = "1Gi") -> list[dict[str, Any]]:
    """A PersistentVolume ``volume`` in ``zone`` (its ``topology.kubernetes.io/zone`` label, read by kube-scheduler's
    VolumeZone, and a required node affinity on that zone, read by VolumeBinding) pre-bound to the claim ``claim``
    of ``namespace``, and that PersistentVolumeClaim (no StorageClass: the PV controller binds the two at once)."""
    zone_key = "topology.kubernetes.io/zone"
    term = {"matchExpressions": [{"key": zone_key, "operator": "In", "values": [zone]}]}
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume, "labels": {zone_key: zone}},
            "spec": {
                "capacity": {"storage": size},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "local": {"path": f"/mnt/disks/{volume}"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": namespace,
                    "name": claim,
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "",
                "volumeName": volume,
                "resources": {"requests": {"storage": size}},
            },
        },
    ]


def placement_webhook(port: int, ca_data: str, namespaces: Sequence[str]) -> dict[str, Any]:
    """The extender's placement webhook (``netaware extender --place-at-admission``) on loopback ``port`` for the
    AppGroup members of ``namespaces`` (named after netaware's main webhook: the API server calls configurations in
    name order)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "netaware-placement"},
        "webhooks": [{
            "name": "placement.netaware.io",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "timeoutSeconds": 5,
            "reinvocationPolicy": "Never",
            "clientConfig": {"url": f"https://127.0.0.1:{port}/place-pods", "caBundle": ca_data},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}],
            "namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(namespaces)}]},
            "objectSelector": {"matchExpressions": [{"key": "appgroup.diktyo.x-k8s.io", "operator": "Exists"}]},
        }],
    }  # fmt: skip
