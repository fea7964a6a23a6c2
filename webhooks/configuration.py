"""The MutatingWebhookConfiguration for the webhook, as the Helm chart renders it.

Safe defaults for a webhook on every pod: ``failurePolicy: Ignore`` (a webhook outage never blocks
pod creation), a 2 s timeout, no side effects, ``reinvocationPolicy: IfNeeded``, and a
``namespaceSelector`` that leaves out ``kube-system`` and netaware's own namespace (a webhook that
mutates its own pods can deadlock the cluster).

With the bandwidth guarantee, the pods that ask for bandwidth (:func:`asks_for_bandwidth`, the CEL
:data:`ASKS_FOR_BANDWIDTH`: one rule, one key list) go through two entries, and the webhook marks what it admits of
them (``netaware.io/admitted``): the first entry ignores a failure; the second is called only for a pod the first
did not admit (:data:`NOT_ADMITTED`: its replica was lost or stopping) and fails closed by default. kube-apiserver
never retries a webhook call, so a replica lost with its node would otherwise refuse (or let through unmutated)
every pod it was sent until its endpoint is removed; the second entry is that retry, on another connection (and so,
most often, another replica). Every other pod goes through one entry that ignores failures. Every entry calls the
one path :data:`PATH`, which every release serves: during an upgrade the new configuration reaches old replicas
too (a replica that does not mark only makes the retry entry call again, and a second admission changes nothing).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from operators.api import keys

PATH = "/mutate-pods"

# A pod that asks for bandwidth: a bandwidth annotation, Koordinator's networkQOS, or an AppGroup workload label.
BANDWIDTH_ANNOTATIONS = (
    keys.INGRESS_BANDWIDTH,
    keys.EGRESS_BANDWIDTH,
    keys.INGRESS_REQUEST,
    keys.EGRESS_REQUEST,
    keys.KOORDINATOR_NETWORK_QOS,
)
ASKS_FOR_BANDWIDTH = (
    "(has(object.metadata.annotations) && ["
    + ", ".join(f"'{key}'" for key in BANDWIDTH_ANNOTATIONS)
    + "].exists(k, k in object.metadata.annotations)) || "
    f"(has(object.metadata.labels) && '{keys.APPGROUP_LABEL}' in object.metadata.labels)"
)
# ... and was not admitted by the first entry (matchConditions see the object as earlier webhooks left it)
NOT_ADMITTED = f"!(has(object.metadata.annotations) && '{keys.ADMITTED}' in object.metadata.annotations)"


def asks_for_bandwidth(annotations: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """:data:`ASKS_FOR_BANDWIDTH`, in Python: the webhook marks the pods this entry admits."""
    return any(key in annotations for key in BANDWIDTH_ANNOTATIONS) or keys.APPGROUP_LABEL in labels


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
    """The configuration; with ``bandwidth_failure_policy`` (the bandwidth guarantee on), three entries: the pods that
    ask for bandwidth, then their retry with that policy, then every other pod with ``failure_policy``."""

    def entry(entry_name: str, policy: str, *conditions: tuple[str, str]) -> dict[str, Any]:
        client_config: dict[str, Any] = {
            "service": {"name": service, "namespace": namespace, "path": PATH, "port": port}
        }
        if ca_bundle:
            client_config["caBundle"] = ca_bundle
        rendered: dict[str, Any] = {
            "name": entry_name,
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
            "failurePolicy": policy,
            "matchPolicy": "Equivalent",
            "sideEffects": "None",
            "timeoutSeconds": timeout_seconds,
            "reinvocationPolicy": "IfNeeded",
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", namespace]}
                ]
            },
        }
        if conditions:
            rendered["matchConditions"] = [{"name": key, "expression": text} for key, text in conditions]
        return rendered

    if bandwidth_failure_policy is None:
        entries = [entry("pod-bandwidth.netaware.io", failure_policy)]
    else:
        asking = ("asks-for-bandwidth", ASKS_FOR_BANDWIDTH)
        entries = [
            entry("pod-bandwidth.netaware.io", "Ignore", asking),
            entry(
                "pod-bandwidth-retry.netaware.io", bandwidth_failure_policy, asking, ("not-admitted-yet", NOT_ADMITTED)
            ),
            entry("pod.netaware.io", failure_policy, ("asks-for-no-bandwidth", f"!({ASKS_FOR_BANDWIDTH})")),
        ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "netaware"}},
        "webhooks": entries,
    }
