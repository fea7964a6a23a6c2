"""The real node tier: netaware's image and chart on real nodes (kubelet 1.37, containerd 2, runc, the CNI plugins
bridge/host-local/portmap/bandwidth), beside a KWOK node, on a control plane of their own (hack/control-plane
realnode.py: each node a network namespace, the control plane in node 1's).

What only a real node shows: the image built from the Dockerfile starts under the chart's securityContext; the
API server reaches the webhook through its Service (kube-proxy, a ClusterIP); the second scheduler reaches the
extender by its Service DNS name over TLS (CoreDNS); the CNI bandwidth plugin enforces the annotation the webhook
wrote; the probes measure pod-to-pod round trips; the agent shapes the node's NIC; `helm uninstall` and the
cluster's stop leave nothing behind. Under CI a node that cannot start fails the tier instead of skipping it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import pathlib
import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from hack.control_plane import cluster as control_plane
from hack.control_plane.cluster import ControlPlane
from tests.support.e2e import (
    ROOT,
    apply_netperf_topology,
    eventually,
    gated_at_admission,
    helm,
    kubectl_json,
    netperf_costs,
    not_built,
)
from tests.support.prerequisites import require

pytestmark = [pytest.mark.e2e, pytest.mark.realnode]

CHART = ROOT / "helm" / "netaware"
NAMESPACE = "netaware-system"
NODES = ("real-node-1", "real-node-2")
TCP = pathlib.Path(__file__).with_name("tcp_traffic.py")
EGRESS_LIMIT = 20_000_000  # bits/s: the namespace default the webhook writes into kubernetes.io/egress-bandwidth


def values() -> dict[str, Any]:
    version = subprocess.run(
        [str(control_plane.BIN / "kube-scheduler"), "--version"], capture_output=True, text=True, check=True
    )
    scheduler = "localhost/kube-scheduler:" + version.stdout.split()[-1]  # images.sh tags it with the version
    return {
        "image": {"repository": "localhost/netaware", "tag": "dev", "pullPolicy": "Never"},
        "nodeSelector": {"type": "real"},  # the Deployments; the DaemonSets go to every node, the KWOK one too
        # plans on, as docs/first-hour.md installs the chart (test_the_first_hour_page)
        "operator": {"replicas": 1, "components": ["appgroup", "networktopology", "nodeslo"], "appGroupPlans": True},
        "webhook": {"replicas": 1},
        "extender": {"replicas": 1},
        "secondScheduler": {"enabled": True, "image": scheduler},
        "descheduler": {"enabled": True, "policy": {"deschedulingInterval": "5s"}},  # dryRun: counts, evicts none
        "bandwidth": {"defaultNodeBandwidth": "1G"},
        "probe": {"enabled": True, "interval": 1, "reportInterval": 2},
        "agent": {"enabled": True, "defaultNodeBandwidth": "1G", "reportInterval": 2},
    }


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    require(not_built())
    folder = tmp_path_factory.mktemp("real-node-plane")
    kwok = folder / "kwok-node.yaml"
    labels = {"topology.kubernetes.io/region": "real", "topology.kubernetes.io/zone": "kwok"}
    kwok.write_text(json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "kwok-1", "labels": labels}}))
    plane = ControlPlane(folder, real_nodes=len(NODES))
    plane.start([kwok])  # fails (never skips) when a node does not become Ready
    try:
        (folder / "values.yaml").write_text(json.dumps(values()))
        helm(
            plane,
            "install",
            "netaware",
            str(CHART),
            "-n",
            NAMESPACE,
            "--create-namespace",
            "-f",
            str(folder / "values.yaml"),
            "--wait",
            "--timeout",
            "180s",
        )
        yield plane
    finally:
        plane.stop()


def pods(plane: ControlPlane, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    args = ["get", "pods", "-n", namespace] + (["-l", selector] if selector else [])
    return list(kubectl_json(plane, *args)["items"])


def raw(plane: ControlPlane, path: str) -> str:
    return str(plane.kubectl("get", "--raw", path).stdout)


def netns(node: str, *command: str) -> str:
    index = node.rsplit("-", 1)[-1]
    return subprocess.run(
        ["nsenter", f"--net=/run/netns/naw-node-{index}", "--", *command],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout


def test_the_charts_pods_run_the_image_on_the_real_nodes_ready_without_restarts(real: Any) -> None:
    found = {
        pod["metadata"]["labels"]["app.kubernetes.io/component"]: pod
        for pod in pods(real, NAMESPACE)
        if pod["spec"]["nodeName"] in NODES
    }
    assert set(found) == {"operator", "webhook", "webhook-first", "extender", "scheduler", "probe", "agent"}
    for component, pod in found.items():
        statuses = pod["status"]["containerStatuses"]
        brief = [(s["name"], s["ready"], s["restartCount"], s.get("lastState"), s.get("state")) for s in statuses]
        if not all(s["ready"] and s["restartCount"] == 0 for s in statuses):
            name = pod["metadata"]["name"]  # the pod's events say why (a probe that failed, an OOM kill, a pull)
            events = real.kubectl("get", "events", "-n", NAMESPACE, f"--field-selector=involvedObject.name={name}",
                                  "-o", "custom-columns=AT:.lastTimestamp,REASON:.reason,MESSAGE:.message",
                                  check=False).stdout  # fmt: skip
            raise AssertionError(f"{component} on {pod['spec']['nodeName']}: {brief}\n{events}")
        if component != "scheduler":
            assert statuses[0]["image"].endswith("localhost/netaware:dev"), statuses[0]["image"]
    # the image's user and the chart's securityContext hold in the running container, not only in the spec
    operator = found["operator"]["metadata"]["name"]
    ids = real.kubectl(
        "exec",
        "-n",
        NAMESPACE,
        operator,
        "--",
        "python3",
        "-c",
        "import os; print(os.getuid(), os.getgid()); open('/x', 'w')",
        check=False,
    )
    assert ids.stdout.split() == ["65532", "65532"]
    assert "Read-only file system" in ids.stderr
    # probes and metrics answered, through the API server's proxy to the pods' addresses
    metrics = raw(real, f"/api/v1/namespaces/{NAMESPACE}/pods/http:{operator}:8080/proxy/metrics")
    assert "netaware_" in metrics
    # the agent is on the host network, where the API server does not proxy: from the node's namespace
    for node in NODES:
        index = node.rsplit("-", 1)[-1]
        fetch = f"import urllib.request; print(urllib.request.urlopen('http://10.201.0.{index}:9103/metrics').read().decode())"
        assert "netaware_agent_pods" in netns(node, sys.executable, "-c", fetch)


def test_a_deployment_gets_its_bandwidth_through_the_webhooks_service_and_the_second_scheduler(real: Any) -> None:
    """A Deployment in an annotated namespace, through the webhook's Service and the second scheduler (its
    extender in the scheduler's pod); the namespace deleted after, so its pod leaves the real nodes to later tests."""
    try:
        real.kubectl("create", "namespace", "bw-deploy")
        real.kubectl("annotate", "namespace", "bw-deploy", "netaware.io/default-egress-bandwidth=20M")
        deployment = workload("app", "bw-deploy", scheduler="network-aware-scheduler")
        real.kubectl("apply", "-f", "-", stdin=json.dumps(deployment))
        pod = eventually(
            lambda: next((p for p in pods(real, "bw-deploy") if p["status"].get("phase") == "Running"), None),
            90,
            "the Deployment's pod Running",
        )
        assert pod["metadata"]["annotations"]["kubernetes.io/egress-bandwidth"] == "20M"
        assert pod["spec"]["containers"][0]["resources"]["requests"]["netaware.io/egress-bandwidth"] == "20M"
        assert pod["spec"]["nodeName"] in NODES
        events = kubectl_json(real, "get", "events", "-n", "bw-deploy", "--field-selector", "reason=Scheduled")["items"]
        assert {event.get("reportingComponent") for event in events} == {"network-aware-scheduler"}
        # the webhook is configured by Service (no URL): the API server resolved it through kube-proxy
        webhooks = kubectl_json(
            real, "get", "mutatingwebhookconfigurations", "-l", "app.kubernetes.io/instance=netaware"
        )
        assert all("service" in hook["clientConfig"] for config in webhooks["items"] for hook in config["webhooks"])
        # the second scheduler called the extender in its own pod (secondScheduler.extenderInPod: its metrics on the
        # sidecar's health port)
        schedulers = [pod["metadata"]["name"] for pod in pods(real, NAMESPACE, "app.kubernetes.io/component=scheduler")]
        served = [
            line
            for scheduler in schedulers
            for line in raw(
                real, f"/api/v1/namespaces/{NAMESPACE}/pods/http:{scheduler}:8080/proxy/metrics"
            ).splitlines()
            if line.startswith("netaware_extender_latency_seconds_count") and 'verb="filter"' in line
        ]
        assert served and sum(float(line.rsplit(" ", 1)[1]) for line in served) >= 1, served
    finally:
        real.kubectl("delete", "namespace", "bw-deploy", "--wait=false", check=False)


def workload(
    name: str,
    namespace: str,
    scheduler: str = "default-scheduler",
    command: list[str] | None = None,
    node: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        # a test's namespace deleted, its pods stop at once: a sender still streaming (the CNI test ends once it
        # has measured) would otherwise load the node for the 30 s of the default grace period
        "terminationGracePeriodSeconds": 1,
        "containers": [
            {
                "name": name,
                "image": "localhost/netaware:dev",
                "imagePullPolicy": "Never",
                "command": command or ["python3", "-c", "import time; time.sleep(3600)"],
                "volumeMounts": [{"name": "tcp", "mountPath": "/tcp"}],
            }
        ],
        "volumes": [{"name": "tcp", "configMap": {"name": "tcp", "optional": True}}],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": spec},
        },
    }


def pod_of(plane: ControlPlane, namespace: str, app: str, phase: str = "Running") -> dict[str, Any]:
    found: dict[str, Any] = eventually(
        lambda: next((p for p in pods(plane, namespace, f"app={app}") if p["status"].get("phase") == phase), None),
        90,
        f"{app} {phase}",
    )
    return found


def received_rate(log: str, limit: float) -> float | None:
    """Bits/s the receiver counted once the shaper's initial burst has drained, read from its marks as it prints
    them (so a stream whose end is late, its last bytes queued behind the limit, is measured all the same); None
    until it has counted :data:`STEADY_SECONDS` of steady state.

    The bandwidth plugin's token bucket starts full (about 500 MB: the first second here, eight seconds once in CI,
    where the receiver's Python drained it slowly on a loaded machine): the steady state starts after the last step
    between two marks that ran above twice ``limit`` and the step after it. A step spans at least the receiver's
    0.5 s between marks, so a receiver stalled under load makes a long step at the limit, not a fast one."""
    marks = [(float(t), int(n)) for line in log.splitlines() if line.startswith("mark ")
             for _, t, n in [line.split()]]  # fmt: skip
    if log.strip().endswith("]"):  # the stream ended: every mark, as one list
        marks = [(float(t), int(n)) for t, n in json.loads(log.strip().splitlines()[-1])]
    marks = [mark for mark in marks if mark[0] <= SENDER_SECONDS - 1.0]  # the sender's end left out
    fast = [at for at, ((t0, n0), (t1, n1)) in enumerate(itertools.pairwise(marks), 1)
            if (n1 - n0) * 8 > 2 * limit * (t1 - t0)]  # fmt: skip
    steady = marks[max(fast, default=-1) + 1 :]  # from the end of the step after the last fast one (that step may
    # still have spent the bucket's last tokens)
    if len(steady) < 2 or steady[-1][0] - steady[0][0] < STEADY_SECONDS:
        return None
    (t0, n0), (t1, n1) = steady[0], steady[-1]
    return float((n1 - n0) * 8 / (t1 - t0))


STEADY_SECONDS = 4.0
SENDER_SECONDS = 40.0  # the sender's time: ample for the burst and the steady state; the test ends at the latter


def stream(
    plane: ControlPlane, namespace: str, limit: str, receiver_node: str, sender_node: str, seconds: float
) -> tuple[dict[str, Any], str]:
    """A namespace whose pods get ``limit`` of egress from the webhook, a receiver on ``receiver_node`` and a
    sender on ``sender_node`` (through the second scheduler) streaming to it for ``seconds``: the sender pod and
    the receiver pod's name."""
    plane.kubectl("create", "namespace", namespace)
    plane.kubectl("annotate", "namespace", namespace, f"netaware.io/default-egress-bandwidth={limit}")
    plane.kubectl("create", "configmap", "tcp", "-n", namespace, f"--from-file=tcp_traffic.py={TCP}")
    receive = workload(
        "receiver", namespace, command=["python3", "/tcp/tcp_traffic.py", "receive", "5001"], node=receiver_node
    )
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(receive))
    receiver = pod_of(plane, namespace, "receiver")
    command = f"python3 /tcp/tcp_traffic.py send {receiver['status']['podIP']} 5001 {seconds:g}; sleep 3600"
    send = workload("sender", namespace, "network-aware-scheduler", ["sh", "-c", command], sender_node)
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(send))
    return pod_of(plane, namespace, "sender"), receiver["metadata"]["name"]


@contextlib.contextmanager
def streaming(
    plane: ControlPlane, namespace: str, limit: str, receiver_node: str, sender_node: str, seconds: float
) -> Iterator[tuple[dict[str, Any], str]]:
    """stream() for the block's time: on a failure the sender's and receiver's logs are printed (a refused or
    reset connection shows there); the namespace is deleted after, so no later test finds its pods on the nodes
    (the descheduler's test counts what it evicts from a busy node)."""
    try:
        yield stream(plane, namespace, limit, receiver_node, sender_node, seconds)
    except BaseException:
        for app in ("sender", "receiver"):
            log = plane.kubectl("logs", "-n", namespace, "-l", f"app={app}", "--tail=20", check=False)
            print(f"{namespace} {app}: {log.stdout[-2000:]} {log.stderr[-1000:]}")
        raise
    finally:
        plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def test_the_receivers_rate_is_read_once_the_bucket_has_drained() -> None:
    """Marks as the receiver prints them (hand-made): a burst drained by 1 s, and one drained only by 8.7 s as in a
    loaded CI run (its only mark between 2 and 9 s once divided by zero)."""

    def log(*marks: tuple[float, int]) -> str:
        return "accepted 10.244.2.8\n" + "".join(f"mark {t:.3f} {n}\n" for t, n in marks)

    mb = 1_000_000
    steady = [(1.0 + 0.5 * i, 513 * mb + i * 1_250_000) for i in range(10)]  # 20 Mbit/s: 1.25 MB each 0.5 s
    assert received_rate(log((0.5, 288 * mb), *steady), EGRESS_LIMIT) == pytest.approx(20e6, rel=0.01)
    assert received_rate(log((0.5, 288 * mb), *steady[:8]), EGRESS_LIMIT) is None  # 3.5 s of steady state: not yet
    slow = [(0.5 + i, 66_750_000 * (i + 1)) for i in range(8)] + [(8.742, 535 * mb), (9.245, 536_250_000)]
    assert received_rate(log(*slow), EGRESS_LIMIT) is None  # once it failed the test with a ZeroDivisionError
    later = [(9.245 + 0.5 * i, 536_250_000 + i * 1_250_000) for i in range(1, 9)]
    assert received_rate(log(*slow, *later), EGRESS_LIMIT) == pytest.approx(20e6, rel=0.01)


def test_the_cni_bandwidth_plugin_holds_the_egress_limit_the_webhook_wrote(real: Any) -> None:
    """Sender and receiver on one node: the traffic stays on the node's bridge, so only the CNI bandwidth plugin
    (not the agent, which shapes the NIC) can hold it to the limit."""
    with streaming(real, "bw-cni", "20M", "real-node-2", "real-node-2", SENDER_SECONDS) as (sender, receiver):
        assert sender["metadata"]["annotations"]["kubernetes.io/egress-bandwidth"] == "20M"

        def measured() -> float | None:
            return received_rate(real.kubectl("logs", "-n", "bw-cni", receiver, check=False).stdout, EGRESS_LIMIT)

        rate = eventually(measured, 60, "the receiver's count")
    print(f"CNI bandwidth plugin: {rate / 1e6:.2f} Mbit/s received for a {EGRESS_LIMIT / 1e6:.0f} Mbit/s egress limit")
    assert abs(rate - EGRESS_LIMIT) <= 0.10 * EGRESS_LIMIT, rate


def test_the_probes_measure_pod_to_pod_and_the_topology_gets_costs_from_them(real: Any) -> None:
    key = "netperf.p90.latency.milliseconds.origin.{}.destination.{}"

    def rows() -> dict[str, dict[str, str]]:
        found = {}
        for node in NODES:
            done = real.kubectl(
                "get", "configmap", f"netperf-nt-default-{node}", "-n", NAMESPACE, "-o", "json", check=False
            )
            found[node] = (json.loads(done.stdout).get("data") or {}) if done.returncode == 0 else {}
        return found

    measured = eventually(
        lambda: all(key.format(a, b) in rows()[a] for a in NODES for b in NODES if a != b) and rows(),
        60,
        "both nodes' rows",
    )
    for a, b in ((NODES[0], NODES[1]), (NODES[1], NODES[0])):
        assert 0 <= int(measured[a][key.format(a, b)]) < 1000  # a round trip across the fabric, in ms
    apply_netperf_topology(real, NAMESPACE, "nt-default")

    def costs() -> dict[tuple[str, str], int]:
        return netperf_costs(real, NAMESPACE, "nt-default")

    def agreeing() -> dict[tuple[str, str], int] | None:
        """The costs once they are the rows' round trips as the rows stand (the probes rewrite their rows every few
        seconds: a cost computed from the previous row can differ from the row read after it)."""
        found, now = costs(), rows()
        pairs = {("real-1", "real-2"): (NODES[0], NODES[1]), ("real-2", "real-1"): (NODES[1], NODES[0])}
        agree = all(
            zones in found and key.format(a, b) in now[a] and found[zones] == int(now[a][key.format(a, b)])
            for zones, (a, b) in pairs.items()
        )
        return found if agree else None

    eventually(agreeing, 120, "costs equal to the rows")


def test_the_agent_shapes_the_real_nodes_nic_per_pod(real: Any) -> None:
    """Traffic from a pod with an egress limit to another node: the agent's HTB leaf for that pod on the node's NIC
    has the pod's rate and counts the pod's bytes."""

    def leaf() -> tuple[str, int] | None:
        for block in netns("real-node-2", "tc", "-s", "class", "show", "dev", "eth0").split("\nclass "):
            if "rate 30Mbit ceil 30Mbit" in block:
                sent = int(block.split("Sent ", 1)[1].split(" ", 1)[0])
                return (block.split()[1], sent) if sent > 5_000_000 else None
        return None

    with streaming(real, "bw-agent", "30M", "real-node-1", "real-node-2", seconds=4):
        classid, sent = eventually(leaf, 60, "the sender's leaf class on eth0, counting its traffic")
    print(f"agent: leaf {classid} on real-node-2's eth0 sent {sent} bytes")
    slo = kubectl_json(real, "get", "nodeslo", "real-node-2")
    assert "networkUsage" in slo.get("status", {})


METRICS_PORTS = {"operator": "metrics", "webhook": "metrics", "webhook-first": "metrics", "extender": "metrics",
                 "scheduler": "health", "probe": "health", "agent": "health"}  # the PodMonitors' ports  # fmt: skip
HOG = "400M"  # each way, each of two pods: 1.6G of a node's 2 x 1G (duplex), above the high threshold (70 %)


def scrape_every_component(plane: ControlPlane) -> dict[str, str]:
    """Each pod's /metrics as its PodMonitor scrapes it (plain HTTP on its metrics port), by pod name."""
    served: dict[str, str] = {}
    for pod in pods(plane, NAMESPACE):
        component = pod["metadata"]["labels"]["app.kubernetes.io/component"]
        if component not in METRICS_PORTS or pod["spec"].get("nodeName") not in NODES:  # KWOK's run nothing
            continue
        every = pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
        ports = {p["name"]: p["containerPort"] for c in every for p in c.get("ports", [])}
        name, port = pod["metadata"]["name"], ports[METRICS_PORTS[component]]
        if pod["spec"].get("hostNetwork"):  # the API server proxies to no node address: scraped from the node
            url = f"http://{pod['status']['podIP']}:{port}/metrics"
            fetch = f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=10).read().decode())"
            served[name] = netns(pod["spec"]["nodeName"], sys.executable, "-c", fetch)
        else:
            served[name] = raw(plane, f"/api/v1/namespaces/{NAMESPACE}/pods/http:{name}:{port}/proxy/metrics")
    return served


def with_samples(served: dict[str, str]) -> set[str]:
    return {line.split("{")[0].split(" ")[0] for text in served.values() for line in text.splitlines()
            if line and not line.startswith("#")}  # fmt: skip


def dashboard_and_alert_series() -> set[str]:
    """Every series name a dashboard panel or an alert reads."""
    dashboard = json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    panels = {target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])}
    alerts = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    exprs = {rule["expr"] for group in alerts["groups"] for rule in group["rules"]}
    return {
        name
        for expr in panels | exprs
        for name in re.findall(r"\b((?:netaware|controller_runtime|descheduler|leader_election)_[a-z_]+)", expr)
    }


def the_events_the_dashboard_counts(plane: ControlPlane) -> None:
    """What the event-driven panels count, made to happen: a plan-mode AppGroup's pod held by its gate and released
    (gate waits); two pods asking 400M each way on one real node, cordoning the other while they are placed, so the
    descheduler's cycle finds that node above its high threshold and a pod that fits on the other (a dry-run
    eviction; the nodes' utilization ratios come with every cycle)."""
    plane.kubectl("create", "namespace", "metrics-events")
    plane.kubectl("annotate", "namespace", "metrics-events", f"netaware.io/default-egress-bandwidth={HOG}",
                  f"netaware.io/default-ingress-bandwidth={HOG}")  # fmt: skip
    plane.kubectl("create", "namespace", "metrics-gates")
    group = {"apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1", "kind": "AppGroup",
             "metadata": {"name": "gated", "namespace": "metrics-gates",
                          "annotations": {"netaware.io/ordered-scheduling": "plan"}},
             "spec": {"numMembers": 1, "topologySortingAlgorithm": "KahnSort",
                      "workloads": [{"workload": {"kind": "Deployment", "apiVersion": "apps/v1", "name": "one",
                                                  "selector": "one"}}]}}  # fmt: skip
    one = workload("one", "metrics-gates")
    one["spec"]["template"]["metadata"]["labels"].update(
        {"appgroup.diktyo.x-k8s.io": "gated", "appgroup.diktyo.x-k8s.io.workload": "one"}
    )
    one["spec"]["template"]["spec"]["nodeSelector"] = {"type": "real"}
    # The AppGroup Ready first, as docs/first-hour.md orders it: the webhook gates only the pods of an AppGroup whose
    # order the controller has computed. Applied together, a busy machine once created the pod first, ungated, and
    # no gate wait was ever counted.
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(group))
    template = one["spec"]["template"]
    eventually(lambda: gated_at_admission(plane, "metrics-gates", template), 60, "the webhook gating its pods")
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(one))
    hogs = workload("hog", "metrics-events")
    hogs["spec"]["replicas"] = 2
    hogs["spec"]["template"]["spec"]["nodeSelector"] = {"type": "real"}
    plane.kubectl("cordon", NODES[1])
    try:
        plane.kubectl("apply", "-f", "-", stdin=json.dumps(hogs))

        def both_placed() -> list[dict[str, Any]] | None:
            found = [pod for pod in pods(plane, "metrics-events", "app=hog") if pod["spec"].get("nodeName")]
            return found if len(found) == 2 else None

        placed = eventually(both_placed, 60, "both hogs placed")
    finally:
        plane.kubectl("uncordon", NODES[1])
    assert {p["spec"]["nodeName"] for p in placed} == {NODES[0]}
    for way in ("egress", "ingress"):
        assert {p["metadata"]["annotations"][f"kubernetes.io/{way}-bandwidth"] for p in placed} == {HOG}


def test_every_component_serves_what_the_dashboard_and_the_alerts_read(real: Any) -> None:
    """Every series a dashboard panel or an alert reads is served, with samples, by some component scraped as its
    PodMonitor scrapes it, once the events the panels count have happened."""
    try:
        the_events_the_dashboard_counts(real)
        read = dashboard_and_alert_series()

        def missing() -> list[str] | None:
            served = scrape_every_component(real)
            samples = with_samples(served)
            left = sorted(name for name in read if name not in samples)
            if left:
                raise ValueError(f"no samples of {left}")
            return [name.rsplit("-", 2)[0] for name in served]

        # the descheduler's cycle every 5 s (values()): its first one after the hogs counts the eviction
        components = eventually(missing, 90, "every series a panel or an alert reads, with samples")
        assert set(components) >= {"netaware-operator", "netaware-webhook", "netaware-extender"}
        found = [
            (sample.name, sample.labels, sample.value)
            for text in scrape_every_component(real).values()
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name in ("descheduler_pods_evicted_total", "netaware_node_utilization_ratio")
        ]
        evicted = {(labels["result"], labels["node"], labels["namespace"]): value
                   for name, labels, value in found if name == "descheduler_pods_evicted_total"}  # fmt: skip
        assert evicted.get(("dry-run", NODES[0], "metrics-events"), 0) >= 1, found  # a hog, from the busy node
        ratios = {(labels["node"], labels["resource"]): value
                  for name, labels, value in found if name == "netaware_node_utilization_ratio"}  # fmt: skip
        assert ratios[(NODES[0], "netBandwidth")] >= 0.8, found  # both hogs' 1.6G of 2G, and what else runs there
    except AssertionError:
        logs = real.kubectl("logs", "-n", NAMESPACE, "deploy/netaware-operator", "--tail=40", check=False)
        print(logs.stdout[-6000:], logs.stderr[-2000:])  # the descheduler says what it found of each node
        raise
    finally:
        for namespace in ("metrics-events", "metrics-gates"):
            real.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def test_the_first_hour_page(real: Any) -> None:
    """docs/first-hour.md's commands of steps 4-6, run as they are, in order, on the chart the fixture installed
    with the page's own flags: a plain Deployment-based AppGroup placed by plan (its pods bound by the cluster's
    kube-scheduler, the chart's secondScheduler.planPods false), without a schedulerName written anywhere, and
    `netaware explain appgroup` on it."""
    page = (ROOT / "docs" / "first-hour.md").read_text()
    blocks = re.findall(r"<!-- first-hour: (run|install) -->\n```sh\n(.*?)```", page, re.S)
    install = "".join(text for kind, text in blocks if kind == "install")
    commands = "".join(text for kind, text in blocks if kind == "run")
    assert "helm install netaware helm/netaware" in install and "kubectl apply -f hack/first-hour" in commands
    flags = dict(re.findall(r"--set ([\w.]+)=(\S+)", install))
    assert flags["secondScheduler.enabled"] == flags["operator.appGroupPlans"] == "true"  # the fixture's values
    assert values()["secondScheduler"]["enabled"] and values()["operator"]["appGroupPlans"]
    manifests = list(yaml.safe_load_all((ROOT / "hack" / "first-hour" / "shop.yaml").read_text()))
    assert not any("schedulerName" in d["spec"]["template"]["spec"] for d in manifests if d["kind"] == "Deployment")
    for node in real.nodes:  # no registry here: the page's image is the nodes' own pause image, tagged
        subprocess.run([str(control_plane.BIN / "ctr"), f"--address={node.containerd_socket}", "-n", "k8s.io",
                        "images", "tag", "--force", "localhost/pause:netaware", "registry.k8s.io/pause:3.10"],
                       check=True, capture_output=True, timeout=30)  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(real.kubeconfig),
           "PATH": f"{control_plane.BIN}:{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}  # fmt: skip
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", commands], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=420, check=False)  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        shop = pods(real, "default", "appgroup.diktyo.x-k8s.io=shop")
        assert len(shop) == 5
        for pod in shop:  # a plan's pods keep the cluster's kube-scheduler, released to the node their plan gave them
            assert pod["spec"]["schedulerName"] == "default-scheduler"
            assert pod["spec"]["nodeName"] == pod["metadata"]["annotations"]["netaware.io/planned-node"]
        assert "True" in done.stdout  # the AppGroup is Ready
        for workload in ("web", "api", "db"):
            assert workload in done.stdout.split("True", 1)[1]  # explain names every workload
    finally:
        real.kubectl("delete", "-f", str(ROOT / "hack" / "first-hour"), "--wait=true", check=False)


def test_helm_uninstall_leaves_nothing_and_the_agents_undo_their_shaping(real: Any) -> None:
    helm(real, "uninstall", "netaware", "-n", NAMESPACE, "--wait", "--timeout", "120s")
    eventually(lambda: not pods(real, NAMESPACE), 90, "the release's pods gone")
    for node in NODES:
        assert "htb" not in netns(node, "tc", "qdisc", "show", "dev", "eth0")
        assert "netaware-ifb" not in netns(node, "ip", "link", "show")
        assert "netaware" not in netns(node, "nft", "list", "tables")
    left = real.kubectl(
        "get",
        "all,configmaps,secrets,serviceaccounts,roles,rolebindings",
        "-n",
        NAMESPACE,
        "-l",
        "app.kubernetes.io/instance=netaware",
        "-o",
        "name",
    ).stdout.split()
    assert left == []
