"""The MutatingWebhookConfiguration for the webhook, as the Helm chart renders it.

Safe defaults for a webhook on every pod: ``failurePolicy: Ignore`` (a webhook outage never blocks
pod creation), a 2 s timeout, no side effects, ``reinvocationPolicy: IfNeeded``, and a
``namespaceSelector`` that leaves out ``kube-system`` and netaware's own namespace (a webhook that
mutates its own pods can deadlock the cluster).
"""

from __future__ import annotations

from typing import Any

PATH = "/mutate-pods"


def mutating_webhook_configuration(
    name: str,
    service: str,
    namespace: str,
    ca_bundle: str = "",
    failure_policy: str = "Ignore",
    timeout_seconds: int = 2,
    port: int = 443,
) -> dict[str, Any]:
    client_config: dict[str, Any] = {"service": {"name": service, "namespace": namespace, "path": PATH, "port": port}}
    if ca_bundle:
        client_config["caBundle"] = ca_bundle
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "netaware"}},
        "webhooks": [
            {
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
        ],
    }
