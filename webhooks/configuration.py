"""The MutatingWebhookConfiguration for the webhook, as the Helm chart renders it.

Safe defaults for a webhook on every pod: ``failurePolicy: Ignore`` (a webhook outage never blocks
pod creation), a 2 s timeout, no side effects, ``reinvocationPolicy: IfNeeded``, and a
``namespaceSelector`` that leaves out ``kube-system`` and netaware's own namespace (a webhook that
mutates its own pods can deadlock the cluster).
"""

from __future__ import annotations

from typing import Any

PATH = "/mutate-pods"

# A pod that asks for bandwidth: a bandwidth annotation, Koordinator's networkQOS, or an AppGroup workload label.
# With the bandwidth guarantee these pods have a webhook entry of their own, failing closed (``Fail``): during an
# outage they are refused at creation rather than created without the resources kube-scheduler accounts.
ASKS_FOR_BANDWIDTH = (
    "(has(object.metadata.annotations) && ['kubernetes.io/ingress-bandwidth', 'kubernetes.io/egress-bandwidth', "
    "'kubernetes.io/ingress-request', 'kubernetes.io/egress-request', 'koordinator.sh/networkQOS']"
    ".exists(k, k in object.metadata.annotations)) || "
    "(has(object.metadata.labels) && 'appgroup.diktyo.x-k8s.io' in object.metadata.labels)"
)


def mutating_webhook_configuration(
    name: str,
    service: str,
    namespace: str,
    ca_bundle: str = "",
    failure_policy: str = "Ignore",
    timeout_seconds: int = 2,
    port: int = 443,
    bandwidth_failure_policy: str | None = None,
) -> dict[str, Any]:
    """The configuration; with ``bandwidth_failure_policy`` (the bandwidth guarantee on), two entries: the pods
    that ask for bandwidth (:data:`ASKS_FOR_BANDWIDTH`) with that policy, every other pod with ``failure_policy``."""
    client_config: dict[str, Any] = {"service": {"name": service, "namespace": namespace, "path": PATH, "port": port}}
    if ca_bundle:
        client_config["caBundle"] = ca_bundle
    entry: dict[str, Any] = {
        "name": "pod-bandwidth.netaware.io",
        "admissionReviewVersions": ["v1"],
        "clientConfig": client_config,
        "rules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["pods"],
                "scope": "Namespaced",
            }
        ],
        "failurePolicy": failure_policy,
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": timeout_seconds,
        "reinvocationPolicy": "IfNeeded",
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", namespace],
                }
            ]
        },
    }
    entries = [entry]
    if bandwidth_failure_policy is not None:
        asking = {"name": "asks-for-bandwidth", "expression": ASKS_FOR_BANDWIDTH}
        rest = {"name": "asks-for-no-bandwidth", "expression": f"!({ASKS_FOR_BANDWIDTH})"}
        entries = [
            {**entry, "failurePolicy": bandwidth_failure_policy, "matchConditions": [asking]},
            {**entry, "name": "pod.netaware.io", "matchConditions": [rest]},
        ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "netaware"}},
        "webhooks": entries,
    }
