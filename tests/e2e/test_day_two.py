"""Day two on real nodes, as a platform team runs netaware: the previous release installed with users' objects and
traffic, upgraded to this chart while a pod is created every 100 ms, upgraded again with the same values, uninstalled
and installed again, and the node of the leaders lost — on a control plane of its own with three real nodes (kubelet,
containerd, runc, the CNI plugins; real-node-1 holds the control plane and the webhook's first group, netaware's
other Deployments run on real-node-2 and real-node-3) and a KWOK node that takes the users' pods.

What each test shows, and the issue's acceptance it answers:

* the upgrade refuses no pod, lets none through without its mutation, and the second scheduler never skips its
  extender (kube-scheduler logs every skip; none is logged, and every AppGroup pod is Scheduled by it);
* an upgrade with unchanged values changes no Secret, no caBundle and no pod template;
* an uninstall keeps every AppGroup, NetworkTopology and NodeSLO, leaves no pod held by netaware's gate (the
  post-delete Job, the real image), and a reinstall reconciles them again;
* the node that holds the operator's and the second scheduler's leaders, a webhook replica and an extender replica,
  lost (its kubelet, containerd and pods killed): no pod creation fails, AppGroup pods keep binding, and the next
  decisions come within the lease duration + 5 s.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import pathlib
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from hack.control_plane import cluster as control_plane
from hack.control_plane.cluster import ControlPlane
from tests.support.e2e import ROOT, eventually, helm, kubectl_json, not_built
from tests.support.prerequisites import require

# three real nodes to start and a release to install before the first test; upgrades that wait for every rollout
pytestmark = [pytest.mark.e2e, pytest.mark.realnode, pytest.mark.timeout(600)]

CHART = ROOT / "helm" / "netaware"
RELEASES = ROOT / "tests" / "fixtures" / "releases"
NAMESPACE = "netaware-system"
# the users' namespace: a default egress bandwidth, their AppGroups and pods. "default": where the extender looks
# AppGroups and the NetworkTopology up by default (extender.networkOverhead, which the previous chart has not)
APPS = "default"
TOPOLOGY = "nt-default"
COMPONENT_NODES = ("real-node-2", "real-node-3")
# the webhook's first group (webhook.first) on a node of its own: no lost node takes both groups
FIRST_NODE = "real-node-1"
GATE = "netaware.io/topology-order"
SCHEDULER = "network-aware-scheduler"
LEASE_SECONDS = 15  # the chart's default, for the operator and the second scheduler alike
# What the tests measured, written as one JSON line to the file $NETAWARE_DAY_TWO_FIGURES names when the module ends
# (benchmarks/bench_day_two.py runs the module and keeps its figures as a record)
FIGURES: dict[str, float] = {}


def version_of(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def previous_release() -> tuple[str, pathlib.Path]:
    """The newest release of tests/fixtures/releases below the working tree's chart version, and its chart."""
    current = version_of(yaml.safe_load((CHART / "Chart.yaml").read_text())["version"])
    older = sorted(
        (folder for folder in RELEASES.iterdir() if version_of(folder.name) < current),
        key=lambda folder: version_of(folder.name),
    )
    assert older, f"no release below {current} in {RELEASES} (hack/cut-release.sh makes one)"
    folder = older[-1]
    return folder.name, folder / f"netaware-{folder.name}.tgz"


def values(tag: str) -> dict[str, Any]:
    """The same values for both releases (keys the previous chart's schema knows too)."""
    version = subprocess.run(
        [str(control_plane.BIN / "kube-scheduler"), "--version"], capture_output=True, text=True, check=True
    ).stdout.split()[-1]
    return {
        "image": {"repository": "localhost/netaware", "tag": tag, "pullPolicy": "Never"},
        "nodeSelector": {"netaware-test/components": "true"},
        "operator": {"appGroupPlans": True},
        "secondScheduler": {"enabled": True, "image": f"localhost/kube-scheduler:{version}"},
        "bandwidth": {"defaultNodeBandwidth": "100G"},
    }


class Api:
    """The API server over one keep-alive HTTPS connection, with the admin's certificate (a pod every 100 ms needs
    no kubectl process per pod)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.host, self.port = plane.server.removeprefix("https://").split(":")
        self.context = plane.admin_context()
        self.connection: http.client.HTTPSConnection | None = None

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, str]:
        for attempt in range(2):  # a connection the server closed while idle is opened again, once
            if self.connection is None:
                self.connection = http.client.HTTPSConnection(
                    self.host, int(self.port), context=self.context, timeout=30
                )
            try:
                self.connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
                answer = self.connection.getresponse()
                return answer.status, answer.read().decode(errors="replace")
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                self.connection = None
                if attempt:
                    raise
        raise AssertionError("unreachable")


@dataclass
class Creator:
    """Creates a pod every ``period`` seconds in a thread, in turn: one that asks for bandwidth itself, a plain one
    (the namespace's default gives it a bandwidth), a pod of the AppGroup ``traffic`` (sent to the second
    scheduler); every answer kept."""

    plane: ControlPlane
    prefix: str
    period: float = 0.1
    created: list[tuple[str, str, float]] = field(default_factory=list)  # (name, kind, when)
    refused: list[tuple[str, int, str]] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def pod(self, name: str, kind: str) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "labels": {"creator": self.prefix}}
        if kind == "bandwidth":
            meta["annotations"] = {"kubernetes.io/egress-bandwidth": "1M"}
        if kind == "group":
            meta["labels"].update({"appgroup.diktyo.x-k8s.io": "traffic", "appgroup.diktyo.x-k8s.io.workload": "w"})
        spec = {
            "nodeSelector": {"type": "kwok"},
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
        }
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    def run(self) -> None:
        api = Api(self.plane)
        kinds = ("bandwidth", "plain", "group")
        number = 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            kind = kinds[number % 3]
            name = f"{self.prefix}-{number:05d}"
            try:
                status, text = api.post(f"/api/v1/namespaces/{APPS}/pods", self.pod(name, kind))
            except OSError as error:
                status, text = 0, str(error)
            if status == 201:
                self.created.append((name, kind, time.time()))
            else:
                self.refused.append((name, status, text[:1000]))
            number += 1
            next_at += self.period
            time.sleep(max(0.0, next_at - time.monotonic()))

    @contextlib.contextmanager
    def running(self) -> Iterator[Creator]:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stopping.set()
            thread.join(30)


@dataclass
class SchedulerLogs:
    """Every line each second-scheduler pod logs while inside (``kubectl logs -f`` per pod, followed as pods come):
    kube-scheduler logs "Skipping extender" each time an ignorable extender fails and it schedules without it."""

    plane: ControlPlane
    folder: pathlib.Path
    followed: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stopping.is_set():
            for pod in scheduler_pods(self.plane):
                name = pod["metadata"]["name"]
                statuses = pod["status"].get("containerStatuses") or ()
                started = any(s["name"] == "kube-scheduler" and "running" in s.get("state", {}) for s in statuses)
                if name not in self.followed and started:
                    log = (self.folder / f"{name}.log").open("wb")
                    self.followed[name] = subprocess.Popen(
                        [
                            str(self.plane.bin_dir / "kubectl"),
                            f"--kubeconfig={self.plane.kubeconfig}",
                            "logs",
                            "-f",
                            "-n",
                            NAMESPACE,
                            name,
                            "-c",
                            "kube-scheduler",
                        ],
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    )
            self.stopping.wait(0.5)

    @contextlib.contextmanager
    def following(self) -> Iterator[SchedulerLogs]:
        thread = threading.Thread(target=self.run, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stopping.set()
            thread.join(10)
            time.sleep(1)
            for process in self.followed.values():
                process.terminate()
                process.wait(10)

    def lines(self, pattern: str) -> list[str]:
        found = []
        for path in self.folder.glob("*.log"):
            found += [
                f"{path.stem}: {line}" for line in path.read_text(errors="replace").splitlines() if pattern in line
            ]
        return found


def scheduler_pods(plane: ControlPlane) -> list[dict[str, Any]]:
    return list(
        kubectl_json(plane, "get", "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=scheduler")["items"]
    )


def pods_of(plane: ControlPlane, selector: str, namespace: str = APPS) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"]: p for p in kubectl_json(plane, "get", "pods", "-n", namespace, "-l", selector)["items"]
    }


def scheduled_by(plane: ControlPlane) -> dict[str, tuple[str, str]]:
    """pod -> (the scheduler that bound it, its instance), from the Scheduled Events of the users' namespace."""
    events = kubectl_json(plane, "get", "events", "-n", APPS, "--field-selector", "reason=Scheduled")["items"]
    return {
        e["involvedObject"]["name"]: (e.get("reportingComponent") or "", e.get("reportingInstance") or "")
        for e in events
    }


def all_scheduled(plane: ControlPlane, names: list[str], within: float = 120) -> dict[str, tuple[str, str]]:
    """Once every pod of ``names`` is bound: who bound them, from their Scheduled Events (scheduler, instance; a pod
    whose binder was killed before its Event went out has none); else an AssertionError that says where they are."""
    deadline = time.monotonic() + within
    while True:
        pods = pods_of(plane, "creator")
        missing = [name for name in names if not pods.get(name, {}).get("spec", {}).get("nodeName")]
        if not missing:
            return scheduled_by(plane)
        if time.monotonic() > deadline:
            detail = []
            for name in missing[:5]:
                pod = pods.get(name, {})
                conditions = [c.get("message", "")[:200] for c in pod.get("status", {}).get("conditions") or ()]
                detail.append((name, pod.get("spec", {}).get("schedulerName"), conditions))
            raise AssertionError(f"{len(missing)} of {len(names)} pods not bound: {detail}")
        time.sleep(1)


def mutated(pod: dict[str, Any]) -> bool:
    """Carries the bandwidth the webhook writes: the annotation and the extended resource kube-scheduler counts."""
    annotations = pod["metadata"].get("annotations") or {}
    requests = pod["spec"]["containers"][0].get("resources", {}).get("requests", {})
    return "kubernetes.io/egress-bandwidth" in annotations and "netaware.io/egress-bandwidth" in requests


def lease_holder(plane: ControlPlane, name: str) -> str:
    lease = kubectl_json(plane, "get", "lease", name, "-n", NAMESPACE)
    return str(lease["spec"].get("holderIdentity") or "")


def node_of_pod(plane: ControlPlane, name: str) -> str:
    return str(kubectl_json(plane, "get", "pod", name, "-n", NAMESPACE)["spec"]["nodeName"])


def holder_pod(holder: str) -> str:
    """The pod named in a Lease's holderIdentity: netaware's `<hostname>_<suffix>`, kube-scheduler's
    `<hostname>_<uuid>` (the hostname is the pod's name)."""
    return holder.rsplit("_", 1)[0]


@pytest.fixture(scope="module", autouse=True)
def figures() -> Iterator[None]:
    FIGURES.clear()
    yield
    target = os.environ.get("NETAWARE_DAY_TWO_FIGURES")
    if target and FIGURES:
        with open(target, "a") as out:
            out.write(json.dumps(FIGURES) + "\n")


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    require(not_built())
    folder = tmp_path_factory.mktemp("day-two-plane")
    kwok = folder / "kwok-node.yaml"
    kwok.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": "kwok-1",
                    "labels": {"topology.kubernetes.io/region": "real", "topology.kubernetes.io/zone": "kwok"},
                },
                "status": {
                    "allocatable": {"cpu": "1000", "memory": "4Ti", "pods": "5000"},
                    "capacity": {"cpu": "1000", "memory": "4Ti", "pods": "5000"},
                },
            }
        )
    )
    plane = ControlPlane(folder, real_nodes=3)
    plane.start([kwok])
    try:
        for node in COMPONENT_NODES:
            plane.kubectl("label", "node", node, "netaware-test/components=true")
        plane.kubectl("label", "node", FIRST_NODE, "netaware-test/webhook-first=true")
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="module")
def previous(plane: ControlPlane) -> Iterator[str]:
    """The previous release installed, with the users' objects: a namespace with a default egress bandwidth, the
    AppGroup ``traffic`` (its pods go to the second scheduler), and a NetworkTopology."""
    version, chart = previous_release()
    folder = plane.folder
    (folder / "previous.yaml").write_text(json.dumps(values(version)))
    helm(
        plane,
        "install",
        "netaware",
        str(chart),
        "-n",
        NAMESPACE,
        "--create-namespace",
        "-f",
        str(folder / "previous.yaml"),
        "--wait",
        "--timeout",
        "300s",
    )
    plane.kubectl("annotate", "namespace", APPS, "netaware.io/default-egress-bandwidth=2M")
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(appgroup("traffic", [("w", [])])))
    topology = yaml.safe_load((ROOT / "hack" / "examples" / "networktopology.yaml").read_text())
    topology["metadata"].update(namespace=APPS, name=TOPOLOGY)
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(topology))
    eventually(
        lambda: kubectl_json(plane, "get", "appgroup", "traffic", "-n", APPS).get("status", {}).get("topologyOrder"),
        120,
        "the previous release's operator at work",
    )
    yield version


def appgroup(name: str, workloads: list[tuple[str, list[str]]], annotations: dict[str, str] | None = None) -> Any:
    def ref(selector: str) -> dict[str, str]:
        return {"kind": "Deployment", "name": selector, "selector": selector, "apiVersion": "apps/v1"}

    return {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {"name": name, "namespace": APPS, "annotations": annotations or {}},
        "spec": {
            "numMembers": len(workloads),
            "topologySortingAlgorithm": "KahnSort",
            "workloads": [
                {"workload": ref(w), "dependencies": [{"workload": ref(d)} for d in deps]} for w, deps in workloads
            ],
        },
    }


# The --set arguments of the last upgrade that rolled every pod (the module's values from then on: going back to
# the defaults would roll every pod once more, about half a minute, for nothing the later tests check).
ROLLED: list[str] = []


def upgrade(plane: ControlPlane, *more: str) -> float:
    """``helm upgrade --install`` to the working tree's chart with the same values (:data:`ROLLED` among them);
    the seconds it took."""
    current = values("dev")
    current["webhook"] = {"first": {"nodeSelector": {"netaware-test/webhook-first": "true"}}}
    (plane.folder / "current.yaml").write_text(json.dumps(current))
    started = time.monotonic()
    helm(
        plane,
        "upgrade",
        "--install",
        "netaware",
        str(CHART),
        "-n",
        NAMESPACE,
        "-f",
        str(plane.folder / "current.yaml"),
        *ROLLED,
        *more,
        "--wait",
        "--timeout",
        "300s",
    )
    return time.monotonic() - started


# Releases whose servers stop at once on SIGTERM (they close their listener while kube-proxy still sends new
# connections their way, for about a second): an upgrade from one can lose calls to a replica it replaces. Every
# later release drains (webhook.shutdownDelaySeconds), and an upgrade from it loses nothing.
ABRUPT = {"0.1.0"}


@dataclass(frozen=True)
class Outcome:
    """What a pod every 100 ms met while ``action`` ran (:func:`under_traffic`)."""

    seconds: float
    created: int
    refused: list[tuple[str, int, str]]
    unmutated: list[str]  # admitted without the bandwidth the webhook writes
    unaccounted: list[str]  # ... among the pods that ask for bandwidth themselves: created without the resources
    skipped: list[str]  # kube-scheduler's "Skipping extender" lines
    answered: float  # /filter answers of the second scheduler's leader's extender after the action
    bound_by_leader: int  # AppGroup pods that leader bound
    failed_calls: list[str]  # kube-apiserver's log lines of webhook calls that failed meanwhile (why a pod was)

    def keep(self, what: str) -> None:
        """The figures of this outcome, for the record (:data:`FIGURES`)."""
        FIGURES.update({f"{what}: seconds": self.seconds, f"{what}: pods created": self.created,
                        f"{what}: refused": len(self.refused), f"{what}: admitted unmutated": len(self.unmutated),
                        f"{what}: extender calls skipped": len(self.skipped)})  # fmt: skip

    def show(self, what: str) -> str:
        return (f"{what}: {self.seconds:.1f} s, {self.created} pods created, {len(self.refused)} refused, "
                f"{len(self.unmutated)} unmutated, {len(self.unaccounted)} asking for bandwidth without its resources, "
                f"{len(self.skipped)} extender calls skipped; the scheduler leader's extender answered "
                f"{self.answered:g} filters for its {self.bound_by_leader} AppGroup pods"
                + "".join(f"\n  {line}" for line in self.failed_calls[:10]))  # fmt: skip


def under_traffic(plane: ControlPlane, prefix: str, logs_folder: pathlib.Path, action: Any) -> Outcome:
    """``action()`` while a pod is created every 100 ms (some asking for bandwidth, some plain, some of an AppGroup,
    sent to the second scheduler) and every second-scheduler pod's log is followed; what the pods met."""
    creator = Creator(plane, prefix)
    logs = SchedulerLogs(plane, logs_folder)
    apiserver_log = plane.folder / "logs" / "kube-apiserver.log"
    read_from = apiserver_log.stat().st_size
    with logs.following(), creator.running():
        time.sleep(3)
        started = time.monotonic()
        action()
        seconds = time.monotonic() - started
        time.sleep(5)  # and a while after it
    pods = pods_of(plane, f"creator={prefix}")
    assert len(pods) == len(creator.created)
    unmutated = sorted(name for name, pod in pods.items() if not mutated(pod))
    asking = {name for name, kind, _ in creator.created if kind == "bandwidth"}
    group = [name for name, kind, _ in creator.created if kind == "group"]
    assert all(pods[name]["spec"]["schedulerName"] == SCHEDULER for name in group if name not in unmutated)
    binders = all_scheduled(plane, group)
    assert {binders[name][0] for name in group if name in binders} == {SCHEDULER}
    leader = holder_pod(lease_holder(plane, "netaware-scheduler"))
    metrics = plane.kubectl("get", "--raw", f"/api/v1/namespaces/{NAMESPACE}/pods/http:{leader}:8080/proxy/metrics")
    counted = "netaware_extender_latency_seconds_count"
    answered = sum(float(line.rsplit(" ", 1)[1]) for line in metrics.stdout.splitlines()
                   if line.startswith(counted) and 'verb="filter"' in line)  # fmt: skip
    # one DELETE of the collection: kubectl deletes a selector's pods one request each (~350 pods: 20 s)
    plane.kubectl("delete", "--raw", f"/api/v1/namespaces/{APPS}/pods?labelSelector=creator%3D{prefix}")
    assert logs.followed
    with apiserver_log.open("rb") as log:
        log.seek(read_from)
        failed = [line for line in log.read().decode(errors="replace").splitlines() if "failed calling webhook" in line]
    return Outcome(seconds, len(creator.created), creator.refused, unmutated,
                   sorted(name for name in unmutated if name in asking), logs.lines("Skipping extender"), answered,
                   sum(1 for name in group if leader in binders.get(name, ("", ""))[1]), failed)  # fmt: skip


def test_an_upgrade_from_the_previous_release_under_a_pod_every_100ms(
    plane: ControlPlane, previous: str, tmp_path: pathlib.Path
) -> None:
    outcome = under_traffic(plane, "up", tmp_path, lambda: upgrade(plane))
    print(outcome.show(f"upgrade {previous} -> working tree"))
    outcome.keep("upgrade from the previous release")
    assert outcome.unaccounted == []  # the guarantee: a pod that asks for bandwidth is refused rather than that
    assert outcome.bound_by_leader and outcome.answered >= outcome.bound_by_leader  # its extender saw every pod
    if previous not in ABRUPT:
        assert (outcome.refused, outcome.unmutated, outcome.skipped) == ([], [], [])


def test_an_upgrade_that_replaces_every_pod_under_a_pod_every_100ms_loses_nothing(
    plane: ControlPlane, previous: str, tmp_path: pathlib.Path
) -> None:
    """From a release that drains (this one) to one whose every pod template differs: every replica of the webhook,
    the extender, the operator and the second scheduler is replaced while the pods come."""
    rolling = ("--set", "webhook.shutdownDelaySeconds=6", "--set", "extender.shutdownDelaySeconds=6",
               "--set", "operator.terminationGracePeriodSeconds=31",
               "--set", "secondScheduler.httpTimeout=6s")  # fmt: skip
    before = tls_state(plane)["templates"]

    def roll() -> None:
        upgrade(plane, *rolling)
        ROLLED[:] = rolling  # the later tests' values (each a second more than the default: nothing they check)

    outcome = under_traffic(plane, "roll", tmp_path, roll)
    print(outcome.show("upgrade replacing every pod"))
    outcome.keep("upgrade replacing every pod")
    after = tls_state(plane)["templates"]
    assert all(before[name] != after[name] for name in before), "every Deployment rolled"
    assert (outcome.refused, outcome.unmutated, outcome.skipped) == ([], [], [])
    # no call found a closed listener: a replica serves until the Service stops sending (each pod's first entry
    # would hide it, retried by the second; a plain pod has no second)
    assert [line for line in outcome.failed_calls if "connection refused" in line] == []
    assert outcome.bound_by_leader and outcome.answered >= outcome.bound_by_leader


def tls_state(plane: ControlPlane) -> dict[str, Any]:
    listed = kubectl_json(plane, "get", "secrets", "-n", NAMESPACE, "-l", "app.kubernetes.io/instance=netaware")
    webhook = kubectl_json(plane, "get", "mutatingwebhookconfiguration", "netaware-webhook")
    templates = {
        d["metadata"]["name"]: d["spec"]["template"]
        for d in kubectl_json(plane, "get", "deployments", "-n", NAMESPACE)["items"]
    }
    return {
        "secrets": {s["metadata"]["name"]: s["data"] for s in listed["items"]},
        "caBundles": [entry["clientConfig"]["caBundle"] for entry in webhook["webhooks"]],
        "templates": templates,
    }


def test_an_upgrade_with_the_same_values_changes_no_secret_no_ca_bundle_and_rolls_no_pod(
    plane: ControlPlane, previous: str
) -> None:
    before = tls_state(plane)
    upgrade(plane)
    assert tls_state(plane) == before


def test_an_uninstall_keeps_the_users_objects_releases_every_gate_and_a_reinstall_reconciles_them(
    plane: ControlPlane, previous: str
) -> None:
    upgrade(plane)  # the working tree's chart, whether or not the upgrade tests ran first
    # a pod held by netaware's gate: its workload waits for one that never comes (an hour's timeout)
    held = appgroup(
        "held",
        [("front", ["back"]), ("back", [])],
        {"netaware.io/ordered-scheduling": "true", "netaware.io/ordered-scheduling-timeout": "3600"},
    )
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(held))
    eventually(
        lambda: kubectl_json(plane, "get", "appgroup", "held", "-n", APPS).get("status", {}).get("topologyOrder"),
        60,
        "the AppGroup held ready",
    )
    # back's pod fits no node (it is never placed), so front's pod waits for it behind the gate
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(deployment_of("back", "held", {"type": "nowhere"})))
    plane.kubectl("apply", "-f", "-", stdin=json.dumps(deployment_of("front", "held", {"type": "kwok"})))
    gated = eventually(lambda: [p for p in pods_of(plane, "app=front").values() if GATE in gates_of(p)], 60,
                       "the front pod gated")  # fmt: skip
    time.sleep(3)
    assert GATE in gates_of(pods_of(plane, "app=front")[gated[0]["metadata"]["name"]])  # still held
    assert gated[0]["spec"]["schedulerName"] == SCHEDULER
    kept = {
        (kind, name): kubectl_json(plane, "get", kind, name, *(["-n", APPS] if namespaced else []))["metadata"]["uid"]
        for kind, name, namespaced in (
            ("appgroup", "held", True),
            ("appgroup", "traffic", True),
            ("networktopology", TOPOLOGY, True),
            ("nodeslo", "kwok-1", False),
            ("nodeslo", "real-node-2", False),
        )
    }

    done, cleanup = uninstall_reading_the_cleanup(plane)
    print(f"the cleanup Job said:\n{cleanup}")
    assert done.returncode == 0, done.stderr
    assert f"pod {APPS}/{gated[0]['metadata']['name']}: deleted" in cleanup, cleanup
    assert re.search(rf"pod {APPS}/back-\S+: deleted \(names the removed scheduler", cleanup), cleanup
    assert not kubectl_json(plane, "get", "jobs", "-n", NAMESPACE)["items"]  # the cleanup Job succeeded and went
    everywhere = kubectl_json(plane, "get", "pods", "-A")["items"]
    assert not [
        p["metadata"]["name"] for p in everywhere if GATE in {g["name"] for g in p["spec"].get("schedulingGates") or ()}
    ]
    # the stuck pod (gated, sent to the removed scheduler) deleted; its ReplicaSet's new one binds without netaware
    replaced = eventually(
        lambda: [
            p
            for p in pods_of(plane, "app=front").values()
            if p["spec"].get("nodeName") and p["metadata"]["uid"] != gated[0]["metadata"]["uid"]
        ],
        60,
        "front bound",
    )
    assert replaced[0]["spec"]["schedulerName"] == "default-scheduler"
    for node in kubectl_json(plane, "get", "nodes")["items"]:  # nothing runs that requests them: all removed
        assert not [r for r in node["status"]["allocatable"] if r.startswith("netaware.io/")], node["metadata"]["name"]
    for (kind, name), uid in kept.items():
        args = ["get", kind, name, *(["-n", APPS] if kind != "nodeslo" else [])]
        assert kubectl_json(plane, *args)["metadata"]["uid"] == uid, (kind, name)

    upgrade(plane)  # installs it again, under the same release name
    plane.kubectl(
        "patch",
        "appgroup",
        "held",
        "-n",
        APPS,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"topologySortingAlgorithm": "TarjanSort"}}),
    )

    def reconciled() -> bool:
        group = kubectl_json(plane, "get", "appgroup", "held", "-n", APPS)
        return bool(group.get("status", {}).get("observedGeneration") == group["metadata"]["generation"])

    eventually(reconciled, 120, "the AppGroup's new generation reconciled by the reinstalled operator")
    # and a kept NodeSLO follows its node again: the node's bandwidth given, its network QoS rendered
    plane.kubectl("annotate", "node", "real-node-2", "node.koordinator.sh/network-bandwidth=10G", "--overwrite")
    eventually(lambda: kubectl_json(plane, "get", "nodeslo", "real-node-2").get("status", {}).get("networkQOS"), 60,
               "the kept NodeSLO reconciled")  # fmt: skip
    plane.kubectl("delete", "deployment", "front", "back", "-n", APPS)


def gates_of(pod: dict[str, Any]) -> set[str]:
    return {gate["name"] for gate in pod["spec"].get("schedulingGates") or ()}


def deployment_of(workload: str, group: str, node_selector: dict[str, str]) -> dict[str, Any]:
    """One replica of ``workload`` in the AppGroup ``group``, on the nodes ``node_selector`` picks."""
    labels = {"app": workload, "appgroup.diktyo.x-k8s.io": group, "appgroup.diktyo.x-k8s.io.workload": workload}
    spec = {"nodeSelector": node_selector, "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}  # fmt: skip
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": workload, "namespace": APPS},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": workload}},
                     "template": {"metadata": {"labels": labels}, "spec": spec}}}  # fmt: skip


def uninstall_reading_the_cleanup(plane: ControlPlane) -> tuple[subprocess.CompletedProcess[str], str]:
    """``helm uninstall --wait``, and what its post-delete Job logged (the Job is gone once it succeeded)."""
    command = [str(plane.bin_dir / "helm"), f"--kubeconfig={plane.kubeconfig}", "uninstall", "netaware", "-n",
               NAMESPACE, "--wait", "--timeout", "300s"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    said = ""
    follower: subprocess.Popen[str] | None = None  # `kubectl logs -f` of the Job's pod: all it logs, as it exits

    def finished(follower: subprocess.Popen[str], wait: float = 0) -> str:
        try:
            text = follower.communicate(timeout=wait or None)[0]
        except subprocess.TimeoutExpired:
            follower.kill()
            text = follower.communicate()[0]
        return text if text.startswith(("pod ", "node ", "nothing")) else ""  # not kubectl's "waiting to start"

    while process.poll() is None and not said:
        if follower is not None and follower.poll() is not None:
            said, follower = finished(follower), None
        if follower is None and not said:
            found = kubectl_json(plane, "get", "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=cleanup")
            if found["items"]:
                name = found["items"][0]["metadata"]["name"]
                follower = subprocess.Popen([str(plane.bin_dir / "kubectl"), f"--kubeconfig={plane.kubeconfig}", "logs",
                                             "-f", "-n", NAMESPACE, name], stdout=subprocess.PIPE,
                                            stderr=subprocess.DEVNULL, text=True)  # fmt: skip
        time.sleep(0.2)
    if follower is not None and not said:
        said = finished(follower, 30)
    out, err = process.communicate()
    return subprocess.CompletedProcess(command, process.returncode, out, err), said


@dataclass(frozen=True)
class Leaders:
    operator: str  # pod names
    scheduler: str

    def nodes(self, plane: ControlPlane) -> tuple[str, str]:
        return node_of_pod(plane, self.operator), node_of_pod(plane, self.scheduler)


def leaders(plane: ControlPlane) -> Leaders:
    return Leaders(
        holder_pod(lease_holder(plane, "netaware-operator")), holder_pod(lease_holder(plane, "netaware-scheduler"))
    )


def both_leaders(plane: ControlPlane) -> Leaders | None:
    """Both Leases held by a running pod (after a reinstall a Lease names a pod of the release before until the new
    replicas take it over)."""
    found = leaders(plane)
    if not (found.operator and found.scheduler):
        return None
    running = set(pods_of(plane, "app.kubernetes.io/name=netaware", NAMESPACE))
    return found if {found.operator, found.scheduler} <= running else None


def colocated_leaders(plane: ControlPlane) -> tuple[Leaders, str]:
    """Both leaders on one node (the one to lose): the scheduler's leader is deleted (its Lease handed over to the
    other replica, on the other node) until they share one."""
    for _ in range(4):
        found: Leaders = eventually(lambda: both_leaders(plane), 60, "leaders")
        operator_node, scheduler_node = found.nodes(plane)
        if operator_node == scheduler_node:
            return found, operator_node
        plane.kubectl("delete", "pod", found.scheduler, "-n", NAMESPACE)
        eventually(lambda deleted=found.scheduler: leaders(plane).scheduler not in ("", deleted), 60, "handed over")
    raise AssertionError("the leaders never shared a node")


def test_the_node_of_the_leaders_lost_no_pod_creation_fails_and_appgroup_pods_keep_binding(
    plane: ControlPlane, previous: str
) -> None:
    upgrade(plane)  # the working tree's chart, whatever ran before
    placed = {
        c: sorted(
            node_of_pod(plane, p["metadata"]["name"])
            for p in pods_of(plane, f"app.kubernetes.io/component={c}", NAMESPACE).values()
        )
        for c in ("operator", "webhook", "extender", "scheduler")
    }
    for component, nodes in placed.items():  # the chart's default spread: one replica per node
        assert nodes == list(COMPONENT_NODES), (component, nodes)
    (first,) = pods_of(plane, "app.kubernetes.io/component=webhook-first", NAMESPACE)
    assert node_of_pod(plane, first) == FIRST_NODE
    before, lost = colocated_leaders(plane)
    creator = Creator(plane, "loss")
    with creator.running():
        time.sleep(3)
        node = next(n for n in plane.nodes if n.name == lost)
        node.lose()
        lost_at = time.time()
        plane.kubectl("apply", "-f", "-", stdin=json.dumps(appgroup("after-loss", [("x", [])])))
        status = eventually(
            lambda: (
                kubectl_json(plane, "get", "appgroup", "after-loss", "-n", APPS).get("status", {}).get("topologyOrder")
                and time.time()
            ),
            LEASE_SECONDS + 30,
            "the new operator's decision",
        )
        time.sleep(max(0.0, lost_at + LEASE_SECONDS + 10 - time.time()))
    operator_decision = status - lost_at
    after = leaders(plane)
    assert after.operator != before.operator and after.scheduler != before.scheduler
    group = [(name, when) for name, kind, when in creator.created if kind == "group"]
    binders = all_scheduled(plane, [name for name, _ in group])
    bound_after = sorted(when for name, when in group if after.scheduler in binders.get(name, ("", ""))[1])
    first_binding = eventually(lambda: _first_binding_time(plane, after.scheduler), 30, "the new leader's binding")
    scheduler_decision = first_binding - lost_at
    print(
        f"node {lost} lost: {len(creator.created)} pods created, {len(creator.refused)} refused; the next "
        f"AppGroup status {operator_decision:.1f} s after, the next binding by the new scheduler leader "
        f"{scheduler_decision:.1f} s after (lease {LEASE_SECONDS} s)"
    )
    pods = pods_of(plane, "creator=loss")
    unmutated = [name for name, pod in pods.items() if not mutated(pod)]
    # pods that ask for bandwidth (and an AppGroup's) go first to the first group, on a node not lost, then (had
    # that failed) to the other replicas; a plain pod's one entry never blocks it,
    # and a call sent to the lost replica leaves it as it came (no namespace default bandwidth)
    plain = {name for name, kind, _ in creator.created if kind == "plain"}
    FIGURES.update({"node lost: pods created": len(creator.created), "node lost: refused": len(creator.refused),
                    "node lost: admitted unmutated (asking for bandwidth)": len(set(unmutated) - plain),
                    "node lost: admitted unmutated (plain)": len(set(unmutated) & plain),
                    "node lost -> the next AppGroup decided by the new operator leader": operator_decision,
                    "node lost -> the next binding by the new scheduler leader": scheduler_decision})  # fmt: skip
    assert creator.refused == []
    assert bound_after, "the new scheduler leader bound no AppGroup pod"
    assert operator_decision <= LEASE_SECONDS + 5, operator_decision
    assert scheduler_decision <= LEASE_SECONDS + 5, scheduler_decision
    assert sorted(set(unmutated) - plain) == []


def _first_binding_time(plane: ControlPlane, scheduler_pod: str) -> float | None:
    events = kubectl_json(plane, "get", "events", "-n", APPS, "--field-selector", "reason=Scheduled")["items"]
    times = [
        _epoch(e.get("eventTime") or e.get("firstTimestamp"))
        for e in events
        if scheduler_pod in (e.get("reportingInstance") or "")
    ]
    return min(times) if times else None


def _epoch(text: str) -> float:
    import datetime

    return datetime.datetime.fromisoformat(text).timestamp()
