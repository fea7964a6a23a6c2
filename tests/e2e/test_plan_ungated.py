"""Plans made by the extender on the real control plane (``netaware.io/ordered-scheduling: plan-ungated``): no
gate and no write — the real kube-scheduler asks `netaware extender` (the chart's ServiceAccount) about each pod,
the extender plans the AppGroup's pending pods as a whole and answers with the planned node; every pod binds
there, and a replica added by a scale-up is planned against the placed ones. With nominations (on clusters of
``--nominate-from-nodes`` nodes), the pods planned and not asked about yet carry their planned node as
``status.nominatedNodeName``, and kube-scheduler binds each there. Placed at admission (``--place-at-admission``), each
pod is pinned to its planned node by the extender's webhook as the API server creates it, and binds there; or by
netaware's webhook asking the extender (``--placement-url``), in the one call the API server makes for the pod."""

from __future__ import annotations

import contextlib
import json
import pathlib
import re
from collections.abc import Iterator
from typing import Any

import pytest

from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import member_appgroup, member_deployment, placement_webhook
from tests.support.e2e import (
    EXAMPLES,
    Process,
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

NAMESPACE = "ungated-e2e"
SCHEDULER = "netaware-ungated"
GRAPH = {"web": ["api"], "api": ["db"], "db": []}
REPLICAS = {"web": 2, "api": 2, "db": 1}


@pytest.fixture
def ungated_namespace(cluster: ControlPlane) -> Iterator[str]:
    create_namespace(cluster, NAMESPACE)
    try:
        yield NAMESPACE
    finally:
        delete_namespace(cluster, NAMESPACE)


def by_result(port: int, ca_file: pathlib.Path, metric: str) -> dict[str, float]:
    """The extender's counter ``metric`` by its ``result`` label."""
    text = https_get(port, "/metrics", ca_file)[1]
    found = re.finditer(metric + r'\{result="([\w-]+)"\} ([\d.]+)', text)
    return {match.group(1): float(match.group(2)) for match in found}


def on_plan(port: int, ca_file: pathlib.Path) -> float:
    """Pods the extender answered with their planned node."""
    return by_result(port, ca_file, "netaware_extender_planned_pods_total").get("on-plan", 0.0)


@contextlib.contextmanager
def extender_synced(
    cluster: ControlPlane, chart_rbac: dict[str, pathlib.Path], host_tls: dict[str, Any], folder: pathlib.Path,
    *flags: str,
) -> Iterator[tuple[int, Process]]:  # fmt: skip
    """The example's NetworkTopology (its zone and region costs), a kube-scheduler calling `netaware extender`
    (with ``flags``) and that extender synced: its port and process. The scheduler is stopped after."""
    cluster.kubectl("apply", "-f", str(EXAMPLES / "networktopology.yaml"))
    port, args = extender_scheduler(cluster, chart_rbac, host_tls, folder, NAMESPACE, SCHEDULER)
    try:
        with running([*args, *flags], folder / "extender.log") as process:
            wait_for_port(port, process=process)
            eventually(lambda: https_get(port, "/readyz", host_tls["ca"])[0] == 200, 60, "extender synced")
            yield port, process
    finally:
        cluster.stop_component(SCHEDULER)


def apply_shop(cluster: ControlPlane, gates: tuple[str, ...] = ()) -> int:
    """The plan-ungated AppGroup and its Deployments of 1-cpu pods for the extender's scheduler, created behind
    ``gates``; how many pods."""
    group = member_appgroup(NAMESPACE, "shop", GRAPH, {"netaware.io/ordered-scheduling": "plan-ungated"})
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(group))
    manifests = [member_deployment(NAMESPACE, "shop", s, REPLICAS[s], "1", SCHEDULER, gates=gates) for s in GRAPH]
    cluster.kubectl("apply", "-f", "-", stdin="\n---\n".join(json.dumps(m) for m in manifests))
    return sum(REPLICAS.values())


def test_an_appgroup_planned_by_the_extender_binds_where_planned_without_a_gate(
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    ungated_namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    with extender_synced(cluster, chart_rbac, host_tls, tmp_path) as (port, process):
        every = apply_shop(cluster)
        placed = eventually(lambda: bound_pods(cluster, NAMESPACE, every), 90, "every pod bound")
        # 5 pods of 1 cpu on nodes of 8. The extender plans the pods pending when one is asked about, against
        # those placed: the layout depends on how the apply's pods arrive (and on the suite's other pods), so
        # what is checked is that every pod was answered with its planned node (an answer otherwise counts
        # off-plan) and bound there
        assert on_plan(port, host_tls["ca"]) == every
        assert not any(pod["spec"].get("schedulingGates") for pod in placed)
        # a scale-up: the new replica is planned against the placed pods and bound where planned
        cluster.kubectl("scale", "deployment", "web", "-n", NAMESPACE, "--replicas", "3")
        eventually(lambda: bound_pods(cluster, NAMESPACE, every + 1), 60, "the new replica bound")
        assert on_plan(port, host_tls["ca"]) == every + 1
        assert "no longer passes" not in process.text()
    assert forbidden(cluster, "extender") == []


HOLD = "e2e.netaware.io/hold"  # the test's own gate: the pods wait behind it until the test lets each go


def test_an_appgroup_planned_ahead_is_nominated_and_bound_on_its_nominated_nodes(
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    ungated_namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    # The 5 pods wait behind the test's gate (--nominate-from-nodes 1: on this small cluster too). The extender
    # plans them once they stop arriving, before kube-scheduler asks about any, and nominates each to its planned
    # node. Let go, each binds on its nominated node (read before: the API server clears it on binding), every
    # answer from that one plan.
    with extender_synced(cluster, chart_rbac, host_tls, tmp_path, "--nominate-from-nodes", "1") as (port, process):
        every = apply_shop(cluster, gates=(HOLD,))

        def nominated() -> dict[str, str] | None:
            pods = kubectl_json(cluster, "get", "pods", "-n", NAMESPACE)["items"]
            found = {p["metadata"]["name"]: p["status"].get("nominatedNodeName") for p in pods}
            return found if len(found) == every and all(found.values()) else None

        planned = eventually(nominated, 60, "every pod nominated to its planned node")
        assert by_result(port, host_tls["ca"], "netaware_extender_nominations_total") == {"written": every}
        for name in planned:
            let_go(cluster, name)
        placed = eventually(lambda: bound_pods(cluster, NAMESPACE, every), 90, "every pod bound")
        assert {p["metadata"]["name"]: p["spec"]["nodeName"] for p in placed} == planned
        assert on_plan(port, host_tls["ca"]) == every
        assert "planned ahead" in process.text() and "planned for pod" not in process.text()
    assert forbidden(cluster, "extender") == []  # the chart's role lets it write the nominations


def assert_placed_at_admission(pod: dict[str, Any]) -> None:
    """``pod`` was stored with its placement's token and its planned node as a required affinity, and bound there."""
    annotations = pod["metadata"]["annotations"]
    assert annotations.get("netaware.io/placed-at-admission"), pod["metadata"]["name"]
    node = annotations["netaware.io/planned-node"]
    assert pod["spec"]["nodeName"] == node
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    ]


def test_pods_placed_at_admission_are_created_pinned_and_bound_on_their_planned_nodes(
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    ungated_namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    # The real API server calls the extender's placement webhook for each pod its ReplicaSets create (no name yet:
    # generateName); each pod is stored with its planned node as a required affinity, the annotation and the
    # token, and the real kube-scheduler binds it on that node, asked about it with that one node. Nothing is
    # nominated, nothing planned when kube-scheduler asks.
    with extender_synced(cluster, chart_rbac, host_tls, tmp_path, "--place-at-admission") as (port, process):
        webhook = placement_webhook(port, host_tls["ca_b64"], [NAMESPACE])
        cluster.kubectl("apply", "-f", "-", stdin=json.dumps(webhook))
        try:
            every = apply_shop(cluster)
            placed = eventually(lambda: bound_pods(cluster, NAMESPACE, every), 90, "every pod bound")
        finally:
            cluster.kubectl("delete", "mutatingwebhookconfiguration", webhook["metadata"]["name"])
        for pod in placed:
            assert_placed_at_admission(pod)
        assert on_plan(port, host_tls["ca"]) == every
        assert "placed at admission" in process.text() and "planned for pod" not in process.text()
        assert by_result(port, host_tls["ca"], "netaware_extender_nominations_total") == {}
    assert forbidden(cluster, "extender") == []  # placing at admission needs no right of the API


def test_pods_placed_through_netawares_webhook_are_admitted_in_one_call_pinned_and_bound(
    cluster: ControlPlane,
    chart_rbac: dict[str, pathlib.Path],
    host_tls: dict[str, Any],
    ungated_namespace: str,
    tmp_path: pathlib.Path,
) -> None:
    # netaware's webhook (its chart ServiceAccount) asks the extender for each pod's placement and answers the API
    # server once with both patches: each pod is called for once, stored pinned and marked admitted by the
    # webhook's own patch (the bandwidth guarantee's mark), and bound on its planned node by the real kube-scheduler.
    name = "netaware-placing-e2e"
    with extender_synced(cluster, chart_rbac, host_tls, tmp_path, "--place-at-admission") as (port, process):
        hook_port, configuration, webhook, _ = gating_components(chart_rbac, host_tls, name, NAMESPACE)
        configuration["webhooks"][0]["timeoutSeconds"] = 5
        webhook += ["--bandwidth-resources", "combined", "--placement-url", f"https://127.0.0.1:{port}/place-pods",
                    "--placement-ca-file", str(host_tls["ca"]), "--placement-timeout", "4"]  # fmt: skip
        with running(webhook, tmp_path / "webhook.log") as hooked:
            wait_for_port(hook_port, process=hooked)
            eventually(lambda: https_get(hook_port, "/readyz", host_tls["ca"])[0] == 200, 60, "webhook synced")
            cluster.kubectl("apply", "-f", "-", stdin=json.dumps(configuration))
            try:
                every = apply_shop(cluster)
                placed = eventually(lambda: bound_pods(cluster, NAMESPACE, every), 90, "every pod bound")
            finally:
                cluster.kubectl("delete", "mutatingwebhookconfiguration", name)
            metrics = https_get(hook_port, "/metrics", host_tls["ca"])[1]
        requests = re.search(r'controller_runtime_webhook_requests_total\{code="200",webhook="mutate-pods"\} ([\d.]+)',
                             metrics)  # fmt: skip
        assert requests is not None and float(requests.group(1)) == every  # one call a pod
        results = re.finditer(r'netaware_webhook_placements_total\{result="(\w+)"\} ([\d.]+)', metrics)
        assert {match.group(1): float(match.group(2)) for match in results} == {"placed": every}
        for pod in placed:
            assert_placed_at_admission(pod)
            assert pod["metadata"]["annotations"].get("netaware.io/admitted") == "true"  # the webhook's own patch
        assert on_plan(port, host_tls["ca"]) == every
        assert "placed at admission" in process.text() and "planned for pod" not in process.text()
    assert forbidden(cluster, "webhook") == [] and forbidden(cluster, "extender") == []


def let_go(cluster: ControlPlane, pod: str) -> None:
    cluster.kubectl("patch", "pod", pod, "-n", NAMESPACE, "--type", "json",
                    "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')  # fmt: skip
