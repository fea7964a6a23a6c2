"""The webhook called by the API server's own admission chain: a MutatingWebhookConfiguration pointing at
`netaware webhook` on 127.0.0.1 (URL + caBundle), running with the chart's ServiceAccount token."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from hack.control_plane.cluster import ControlPlane
from hack.control_plane.ports import free_port
from tests.support.e2e import (
    create_namespace,
    delete_namespace,
    eventually,
    example,
    forbidden,
    kubectl_json,
    running,
    wait_for_port,
)
from webhooks.configuration import mutating_webhook_configuration

pytestmark = pytest.mark.e2e

NAMESPACE = "webhook-e2e"


def pod(name: str, selector: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {"appgroup.diktyo.x-k8s.io": "a1", "appgroup.diktyo.x-k8s.io.workload": selector},
        },
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]},
    }


def admitted_with_warning(cluster: ControlPlane) -> bool:
    """A new pod in the namespace is created, and kubectl printed the webhook's warning (the view may lag)."""
    name = f"p3-{len(kubectl_json(cluster, 'get', 'pods', '-n', NAMESPACE)['items'])}"
    done = cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod(name, "p3")))
    return done.returncode == 0 and "netaware.io/default-ingress-bandwidth" in done.stderr


def test_pods_get_bandwidth_from_the_admission_chain_and_ignore_survives_an_outage(
    cluster: ControlPlane, chart_rbac: dict[str, pathlib.Path], host_tls: dict[str, Any], tmp_path: pathlib.Path
) -> None:
    create_namespace(cluster, NAMESPACE)
    group = example("appgroup-a1.yaml")[0]
    group["metadata"]["namespace"] = NAMESPACE
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(group))
    port = free_port()
    configuration = mutating_webhook_configuration("netaware-e2e", "unused", "netaware-system", host_tls["ca_b64"])
    hook = configuration["webhooks"][0]
    hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}/mutate-pods", "caBundle": host_tls["ca_b64"]}
    hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": NAMESPACE}}
    args = ["webhook", "--listen-address", "127.0.0.1", "--port", str(port), "--kubeconfig", str(chart_rbac["webhook"])]
    args += ["--tls-cert-file", str(host_tls["cert"]), "--tls-private-key-file", str(host_tls["key"])]
    try:
        with running(args, tmp_path / "webhook.log") as webhook:
            wait_for_port(port, process=webhook)
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))
            created = cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod("p1-x", "p1")))
            assert created.returncode == 0
            annotations = kubectl_json(cluster, "get", "pod", "-n", NAMESPACE, "p1-x")["metadata"]["annotations"]
            # p1 depends on p2 with minBandwidth 100Mi: egress request 100Mi; nothing points at p1
            assert annotations["kubernetes.io/egress-request"] == "100Mi"
            assert "kubernetes.io/ingress-request" not in annotations
            assert annotations["netaware.io/bandwidth-source"] == "kubernetes.io/egress-request=appgroup"
            denied = cluster.kubectl(
                "apply",
                "-f",
                "-",
                stdin=json.dumps(
                    {
                        **pod("bad", "p2"),
                        "metadata": {
                            **pod("bad", "p2")["metadata"],
                            "annotations": {"kubernetes.io/ingress-bandwidth": "1e99999999"},
                        },
                    }
                ),
                check=False,
            )
            assert denied.returncode != 0
            assert "metadata.annotations[kubernetes.io/ingress-bandwidth]: out of range" in denied.stderr
            # a broken namespace default: the pod is admitted (with a warning kubectl prints), an Event is posted
            cluster.kubectl("annotate", "namespace", NAMESPACE, "netaware.io/default-ingress-bandwidth=lots")
            eventually(lambda: admitted_with_warning(cluster), 30, "a pod admitted with the namespace warning")
            eventually(
                lambda: any(
                    e["reason"] == "InvalidDefaultBandwidth" and e["involvedObject"]["name"] == NAMESPACE
                    for e in kubectl_json(cluster, "get", "events", "-n", "default")["items"]
                ),
                30,
                "the Warning Event on the Namespace",
            )
        assert forbidden(cluster, "webhook") == []
        # the webhook is down: failurePolicy Ignore lets the pod through, unmutated
        created = cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod("p1-y", "p1")))
        assert created.returncode == 0
        annotations = kubectl_json(cluster, "get", "pod", "-n", NAMESPACE, "p1-y")["metadata"].get("annotations") or {}
        assert "kubernetes.io/egress-request" not in annotations
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", "netaware-e2e", "--ignore-not-found")
        delete_namespace(cluster, NAMESPACE)
