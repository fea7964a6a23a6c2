"""AppGroups' pods reach netaware's scheduler by themselves, on the real control plane: `netaware webhook
--scheduler-name` (what the chart passes with its second scheduler) in the API server's admission chain, a
kube-scheduler profile of that name calling `netaware extender`, each run with its chart ServiceAccount. A plain
Deployment labelled for an AppGroup — no schedulerName anywhere — is bound by that scheduler; a pod that names
another scheduler keeps it, with a warning to kubectl and a Warning Event on the AppGroup."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import member_appgroup, member_deployment
from tests.support.e2e import (
    EXAMPLES,
    bound_pods,
    create_namespace,
    delete_namespace,
    eventually,
    extender_scheduler,
    forbidden,
    gating_components,
    https_get,
    kubectl_json,
    running,
    wait_for_port,
)

pytestmark = pytest.mark.e2e

NAMESPACE = "schedname-e2e"
SCHEDULER = "netaware-schedname"
GRAPH = {"web": ["db"], "db": []}


def scheduled_by(cluster: ControlPlane) -> dict[str, str]:
    """Pod name -> the scheduler that reported binding it (its Scheduled Event's reporting component)."""
    events = kubectl_json(cluster, "get", "events", "-n", NAMESPACE, "--field-selector", "reason=Scheduled")
    return {
        e["involvedObject"]["name"]: e.get("reportingComponent") or e["source"]["component"] for e in events["items"]
    }


def test_a_plain_deployment_of_an_appgroup_is_bound_by_netaware_scheduler(
    cluster: ControlPlane, chart_rbac: dict[str, pathlib.Path], host_tls: dict[str, Any], tmp_path: pathlib.Path
) -> None:
    create_namespace(cluster, NAMESPACE)
    cluster.kubectl("apply", "-f", str(EXAMPLES / "networktopology.yaml"))  # NetworkOverhead's costs
    # the AppGroup first: the webhook's view holds it once ready, so no pod passes before it is known
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(member_appgroup(NAMESPACE, "shop", GRAPH, {})))
    hook_port, configuration, webhook, _ = gating_components(chart_rbac, host_tls, "netaware-schedname", NAMESPACE)
    webhook += ["--scheduler-name", SCHEDULER]
    port, extender = extender_scheduler(cluster, chart_rbac, host_tls, tmp_path, NAMESPACE, SCHEDULER)
    try:
        with running(webhook, tmp_path / "webhook.log") as hook, running(extender, tmp_path / "extender.log") as ext:
            wait_for_port(hook_port, process=hook)
            eventually(lambda: https_get(hook_port, "/readyz", host_tls["ca"])[0] == 200, 60, "webhook synced")
            wait_for_port(port, process=ext)
            eventually(lambda: https_get(port, "/readyz", host_tls["ca"])[0] == 200, 60, "extender synced")
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))
            deployments = [member_deployment(NAMESPACE, "shop", selector, 2, "100m") for selector in GRAPH]
            assert all("schedulerName" not in d["spec"]["template"]["spec"] for d in deployments)
            cluster.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(d) for d in deployments))
            placed = eventually(lambda: bound_pods(cluster, NAMESPACE, 4), 90, "every pod bound")
            assert {pod["spec"]["schedulerName"] for pod in placed} == {SCHEDULER}
            eventually(lambda: len(scheduled_by(cluster)) == 4, 30, "a Scheduled Event per pod")
            assert set(scheduled_by(cluster).values()) == {SCHEDULER}
            # a pod that names another scheduler keeps it: kubectl prints the warning, the AppGroup gets the Event
            other = member_deployment(NAMESPACE, "shop", "web", 1, "100m", scheduler="batch-scheduler")["spec"]
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "batch-web", "namespace": NAMESPACE,
                   "labels": other["template"]["metadata"]["labels"]}, "spec": other["template"]["spec"]}  # fmt: skip
            created = cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
            assert created.returncode == 0 and "spec.schedulerName 'batch-scheduler' kept" in created.stderr
            stored = kubectl_json(cluster, "get", "pod", "batch-web", "-n", NAMESPACE)
            assert stored["spec"]["schedulerName"] == "batch-scheduler"

            def warned() -> bool:
                events = kubectl_json(cluster, "get", "events", "-n", NAMESPACE, "--field-selector",
                                      "reason=SchedulerNotNetaware")["items"]  # fmt: skip
                return any(e["involvedObject"]["kind"] == "AppGroup" and e["involvedObject"]["name"] == "shop"
                           and e["type"] == "Warning" for e in events)  # fmt: skip

            eventually(warned, 30, "the SchedulerNotNetaware Event on the AppGroup")
        assert forbidden(cluster, "webhook") == [] and forbidden(cluster, "extender") == []
    finally:
        cluster.kubectl("delete", "mutatingwebhookconfiguration", configuration["metadata"]["name"], check=False)
        delete_namespace(cluster, NAMESPACE)
        cluster.stop_component(SCHEDULER)
