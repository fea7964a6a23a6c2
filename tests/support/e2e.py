"""What the end-to-end tests share besides their fixtures (tests/e2e/conftest.py): the control plane's
kubectl and Helm, polling, netaware's commands as host processes, the chart's RBAC and what the audit log says of it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pathlib
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import yaml

from hack.control_plane import cluster as control_plane
from hack.control_plane.cluster import ControlPlane
from hack.control_plane.objects import extender_entry
from hack.control_plane.ports import free_port
from operators.api import keys
from operators.emulator.transport import FaultyProxy
from webhooks.configuration import mutating_webhook_configuration

ROOT = pathlib.Path(__file__).resolve().parents[2]


EXAMPLES = ROOT / "hack" / "examples"


RELEASE_NAMESPACE = "netaware-system"


def kubectl_json(cluster: ControlPlane, *args: str) -> Any:
    return json.loads(cluster.kubectl(*args, "-o", "json").stdout)


# What makes pods again when they go, by the API path of its collection.
WORKLOADS = ("apis/apps/v1/{}/deployments", "apis/apps/v1/{}/replicasets", "apis/apps/v1/{}/statefulsets",
             "apis/apps/v1/{}/daemonsets", "apis/batch/v1/{}/jobs")  # fmt: skip


def delete_namespace(cluster: ControlPlane, namespace: str) -> None:
    """``namespace`` deleted, without waiting for the namespace controller to finish (10 to 13 s a test on the
    shared control plane, summed ~60 s a run): its workloads first (nothing makes pods again), then its pods
    without a grace period, so nothing of it holds a node's room once this returns — each one DELETE of the
    collection (kubectl deletes a selection one request per object). A test that creates the same namespace again
    waits for it to be gone then (:func:`create_namespace`)."""
    where = f"namespaces/{namespace}"
    for path in WORKLOADS:
        cluster.kubectl("delete", "--raw", "/" + path.format(where), check=False)
    cluster.kubectl("delete", "--raw", f"/api/v1/{where}/pods?gracePeriodSeconds=0", check=False)
    cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def create_namespace(cluster: ControlPlane, namespace: str, within: float = 120.0) -> None:
    """``namespace`` there and ready for pods: created (one of that name still terminating — :func:`delete_namespace`
    does not wait — once it is gone; one already active is kept), and its ``default`` ServiceAccount made by the
    controller manager (until then the API server refuses its pods: "serviceaccount "default" not found")."""

    def created() -> bool:
        done = cluster.kubectl("create", "namespace", namespace, check=False)
        if done.returncode == 0:
            return True
        if "AlreadyExists" not in done.stderr:
            raise RuntimeError(f"kubectl create namespace {namespace}: {done.stderr.strip()}")
        found = cluster.kubectl("get", "namespace", namespace, "-o", "json", check=False)
        return found.returncode == 0 and json.loads(found.stdout).get("status", {}).get("phase") == "Active"

    eventually(created, within, f"namespace {namespace} created (one of that name before it gone)")
    account = ("get", "serviceaccount", "default", "-n", namespace, "-o", "json")
    eventually(lambda: cluster.kubectl(*account, check=False).returncode == 0, within,
               f"namespace {namespace}'s default ServiceAccount")  # fmt: skip


def helm(plane: ControlPlane, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``helm *args``; with ``check``, a failure names the pods that are not ready and the warnings. Helm gets a
    minute past its own ``--timeout`` to give up itself: killed at the same moment, it once left the release
    "pending-upgrade", and every later upgrade failed "another operation is in progress"."""
    done = subprocess.run(
        [str(plane.bin_dir / "helm"), f"--kubeconfig={plane.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=helm_timeout(args) + 60,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)}: {done.stderr}{not_ready(plane)}")
    return done


def helm_timeout(args: tuple[str, ...]) -> float:
    """The seconds of a ``--timeout`` among helm's ``args`` (as 300s, 5m or 1m30s), else helm's default 300."""
    for at, arg in enumerate(args):
        if arg == "--timeout" and at + 1 < len(args):
            value = args[at + 1]
        elif arg.startswith("--timeout="):
            value = arg.split("=", 1)[1]
        else:
            continue
        minutes, _, seconds = value.rpartition("m")
        return float(minutes or 0) * 60 + float(seconds.removesuffix("s") or 0)
    return 300.0


def not_ready(plane: ControlPlane) -> str:
    """The pods of the cluster that are not ready (name, node, phase, restarts) and the last warnings: why a
    ``helm --wait`` did not end."""
    pods = plane.kubectl("get", "pods", "-A", "-o", "json", check=False)
    lines = []
    for pod in json.loads(pods.stdout or "{}").get("items", []) if pods.returncode == 0 else []:
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        if pod["status"].get("phase") != "Succeeded" and not (statuses and all(s.get("ready") for s in statuses)):
            restarts = sum(s.get("restartCount", 0) for s in statuses)
            where = f"{pod['metadata']['namespace']}/{pod['metadata']['name']} on {pod['spec'].get('nodeName', '-')}"
            lines.append(f"  {where}: {pod['status'].get('phase')}, {restarts} restarts")
    events = plane.kubectl("get", "events", "-A", "--field-selector=type=Warning", "--sort-by=.lastTimestamp",
                           "-o", "custom-columns=AT:.lastTimestamp,OBJECT:.involvedObject.name,REASON:.reason,"
                           "MESSAGE:.message", check=False).stdout.splitlines()[-20:]  # fmt: skip
    return "\npods not ready:\n" + "\n".join(lines[:40]) + "\nlast warnings:\n" + "\n".join(events)


def apply_netperf_topology(cluster: ControlPlane, namespace: str, name: str) -> None:
    """A NetworkTopology with no user-defined costs, whose ``NetperfCosts`` netaware computes from the probes'
    rows (read back with :func:`netperf_costs`)."""
    topology = {
        "apiVersion": "networktopology.diktyo.x-k8s.io/v1alpha1",
        "kind": "NetworkTopology",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"configmapName": "netperf-none", "weights": [{"name": "UserDefined", "topologyList": []}]},
    }
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(topology))


def netperf_costs(cluster: ControlPlane, namespace: str, name: str) -> dict[tuple[str, str], int]:
    """(origin, destination) -> networkCost of a NetworkTopology's NetperfCosts weight (what netaware computed)."""
    spec = kubectl_json(cluster, "get", "networktopology", name, "-n", namespace)["spec"]
    weight = next((w for w in spec["weights"] if w["name"] == "NetperfCosts"), {"topologyList": []})
    return {
        (origin["origin"], cost["destination"]): cost["networkCost"]
        for entry in weight["topologyList"]
        for origin in entry["originList"]
        for cost in origin.get("costList", [])
    }


def gated_at_admission(cluster: ControlPlane, namespace: str, template: dict[str, Any]) -> bool:
    """Whether a pod of ``template`` (a workload's pod template) created in ``namespace`` now would get netaware's
    topology-order gate: the webhook has seen its AppGroup Ready, with its order (asked by a server-side dry run,
    which goes through the webhooks and creates nothing)."""
    meta = {"name": "probe", "namespace": namespace, **template["metadata"]}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]}
    done = cluster.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(pod), check=False)
    gates = (json.loads(done.stdout)["spec"].get("schedulingGates") or []) if done.returncode == 0 else []
    return any(gate.get("name") == keys.TOPOLOGY_ORDER_GATE for gate in gates)


def eventually(check: Callable[[], Any], within: float = 30.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + within
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (subprocess.SubprocessError, RuntimeError, KeyError, IndexError, ValueError) as error:
            last = error
        else:
            if last:
                return last
        time.sleep(0.3)
    raise AssertionError(f"{what} not reached within {within:g} s (last: {last!r})")


def hosted_on_loopback(configuration: dict[str, Any], port: int, ca_bundle: str) -> dict[str, Any]:
    """``configuration``'s entries calling the webhook on 127.0.0.1:``port`` (a host process), at their path."""
    for entry in configuration["webhooks"]:
        path = entry["clientConfig"]["service"]["path"]
        entry["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle}
    return configuration


def gating_components(
    chart_rbac: dict[str, pathlib.Path], host_tls: dict[str, Any], name: str, namespace: str, *operator_args: str
) -> tuple[int, dict[str, Any], list[str], list[str]]:
    """The webhook — its port, and its configuration ``name`` admitting ``namespace`` only, failing closed (a pod
    admitted without it would make a gating test meaningless) — and the AppGroup operator (leader election id
    ``name``, with ``operator_args``), each run with its chart ServiceAccount's credentials."""
    port = free_port()
    configuration = mutating_webhook_configuration(name, "unused", RELEASE_NAMESPACE)
    hook = configuration["webhooks"][0]
    hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}/mutate-pods", "caBundle": host_tls["ca_b64"]}
    hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    hook["failurePolicy"] = "Fail"
    webhook = ["webhook", "--listen-address", "127.0.0.1", "--port", str(port)]
    webhook += ["--kubeconfig", str(chart_rbac["webhook"])]
    webhook += ["--tls-cert-file", str(host_tls["cert"]), "--tls-private-key-file", str(host_tls["key"])]
    operator = ["run", "--kubeconfig", str(chart_rbac["operator"]), "--components", "appgroup", "--health-port", "0"]
    operator += ["--leader-election-namespace", RELEASE_NAMESPACE, "--leader-election-id", name, *operator_args]
    return port, configuration, webhook, operator


def extender_command(
    port: int, chart_rbac: dict[str, pathlib.Path], host_tls: dict[str, Any], config: pathlib.Path
) -> list[str]:
    """`netaware extender` on loopback ``port`` over TLS, run with its chart ServiceAccount's credentials, with the
    scheduler configuration ``config``."""
    args = ["extender", "--listen-address", "127.0.0.1", "--port", str(port), "--config", str(config)]
    args += ["--kubeconfig", str(chart_rbac["extender"])]
    args += ["--tls-cert-file", str(host_tls["cert"]), "--tls-private-key-file", str(host_tls["key"])]
    return args


def extender_scheduler(
    cluster: ControlPlane, chart_rbac: dict[str, pathlib.Path], host_tls: dict[str, Any], folder: pathlib.Path,
    namespace: str, scheduler: str,
) -> tuple[int, list[str]]:  # fmt: skip
    """A kube-scheduler named ``scheduler``, started, whose profile calls `netaware extender` on a free loopback
    port (TLS, weight 20, not ignorable, 5 s), and that extender's command line: the repository's profile with
    NetworkOverhead's namespaces widened to ``namespace``. The caller stops the scheduler."""
    port = free_port()
    extender = extender_entry(port, host_tls["ca_b64"], weight=20, ignorable=False, timeout="5s")
    config = folder / "scheduler.yaml"
    config.write_text(json.dumps(cluster.scheduler_config([{"schedulerName": scheduler}], [extender])))
    profile = yaml.safe_load((ROOT / "hack" / "configs" / "scheduler-config.yaml").read_text())
    for entry in profile["profiles"][0]["pluginConfig"]:
        if entry["name"] == "NetworkOverhead":  # the AppGroup's namespace beside the NetworkTopology's
            entry["args"]["namespaces"] = ["default", namespace]
    (folder / "netaware.yaml").write_text(yaml.safe_dump(profile))
    cluster.start_scheduler(scheduler, config)
    return port, extender_command(port, chart_rbac, host_tls, folder / "netaware.yaml")


def example(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


class Process:
    """A netaware command running on the host, its output in a log file."""

    def __init__(self, args: list[str], log: pathlib.Path, env: dict[str, str] | None = None) -> None:
        self.log = log
        self.handle = subprocess.Popen(
            [sys.executable, "-m", "operators.cli", *args],
            stdout=log.open("w"),
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        if self.handle.poll() is None:
            self.handle.terminate()
            try:
                self.handle.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.handle.kill()
                self.handle.wait()
        return int(self.handle.returncode)


@contextlib.contextmanager
def running(args: list[str], log: pathlib.Path, env: dict[str, str] | None = None) -> Iterator[Process]:
    process = Process(args, log, env)
    try:
        yield process
    finally:
        process.stop()


def wait_for_port(port: int, within: float = 30.0, process: Process | None = None) -> None:
    def listening() -> bool:
        if process is not None and process.handle.poll() is not None:
            raise AssertionError(f"exited early:\n{process.text()[-3000:]}")
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) == 0

    eventually(listening, within, f"port {port}")


PROBE_NAMESPACE = "probe-e2e"  # the NetworkTopology's namespace, where the probe writes its rows


def chart_rbac_yaml() -> str:
    """The chart's ServiceAccounts, roles and bindings as it renders them, the descheduler, the operator's plans, the
    probe and the agent on (their DaemonSets left out: their pods would run on every KWOK node)."""
    command = ["template", "netaware", str(ROOT / "helm" / "netaware"), "--namespace", RELEASE_NAMESPACE]
    command += ["--set", "descheduler.enabled=true", "--set", "descheduler.rebalance.enabled=true"]
    command += ["--set", "operator.appGroupPlans=true", "--set", "probe.enabled=true"]
    command += ["--set", f"probe.topologyNamespace={PROBE_NAMESPACE}"]
    command += ["--set", "agent.enabled=true", "--set", "agent.publishCapacity=true"]
    command += ["--show-only", "templates/rbac.yaml", "--show-only", "templates/probe.yaml"]
    command += ["--show-only", "templates/agent.yaml"]
    helm = control_plane.BIN / "helm"
    rendered = subprocess.run([str(helm), *command], capture_output=True, text=True, check=True).stdout
    documents = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] != "DaemonSet"]
    return yaml.safe_dump_all(documents)


def service_account(component: str) -> str:
    return f"system:serviceaccount:{RELEASE_NAMESPACE}:netaware-{component}"


def refused_by_rbac(event: dict[str, Any]) -> bool:
    """An audit event of a request RBAC refused (403 with the authorizer's decision "forbid"; a 403 from admission,
    e.g. an object created in a namespace being deleted, is not a missing permission)."""
    decision = (event.get("annotations") or {}).get("authorization.k8s.io/decision")
    return event.get("responseStatus", {}).get("code") == 403 and decision != "allow"


def forbidden(cluster: ControlPlane, component: str) -> list[str]:
    """The requests of the component's ServiceAccount RBAC refused (from the API server's audit log)."""
    refused = []
    for event in cluster.audit_events(service_account(component)):
        if refused_by_rbac(event):
            target = event.get("objectRef", {})
            refused.append(f"{event['verb']} {target.get('resource')}/{target.get('subresource', '')}")
    return refused


def not_built() -> str | None:
    """Why the real node tier cannot run (its binaries or images are missing), or None."""
    missing = control_plane.missing_binaries() + [
        name for name in ("kubelet", "kube-proxy", "containerd", "coredns") if not (control_plane.BIN / name).exists()
    ]
    if not (ROOT / ".tools" / "node" / "images" / "netaware.tar").exists():
        missing.append("images")
    return (
        f"the real node tier is not built ({', '.join(missing)}): run bash hack/control-plane/build.sh"
        if missing
        else None
    )


def https_get(port: int, path: str, ca_file: pathlib.Path) -> tuple[int, str]:
    """The HTTP status and body of a GET on a netaware server on loopback (status 0: it does not answer)."""
    context = ssl.create_default_context(cafile=str(ca_file))
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=context, timeout=10) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), ""
    except OSError:
        return 0, ""


def bound_pods(cluster: ControlPlane, namespace: str, count: int) -> list[dict[str, Any]] | None:
    """The pods of ``namespace`` bound to a node and not being deleted, once there are ``count`` (None before)."""
    pods = kubectl_json(cluster, "get", "pods", "-n", namespace)["items"]
    found = [p for p in pods if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")]
    return found if len(found) >= count else None


class ProxyThread:
    """A transport-fault proxy (:class:`~operators.emulator.transport.FaultyProxy`) in front of the real API server,
    on an event loop of its own thread, for the synchronous end-to-end tests; ``kubeconfig(path)`` is a copy of a
    kubeconfig that reaches the API server through it (its certificate names 127.0.0.1: TLS passes through)."""

    def __init__(self, cluster: ControlPlane) -> None:
        self.cluster = cluster
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="proxy", daemon=True)
        self.proxy = FaultyProxy("127.0.0.1", cluster.ports["apiserver"])

    def __enter__(self) -> ProxyThread:
        self.thread.start()
        self.run(self.proxy.__aenter__())
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.run(self.proxy.__aexit__(None, None, None))
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()

    def run(self, work: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(60)

    def reset_all(self) -> None:
        self.loop.call_soon_threadsafe(self.proxy.reset_all)

    def refuse(self, seconds: float) -> None:
        self.run(self.proxy.refuse(seconds))

    def kubeconfig(self, path: pathlib.Path) -> pathlib.Path:
        config = yaml.safe_load(path.read_text())
        for entry in config["clusters"]:
            entry["cluster"]["server"] = f"https://127.0.0.1:{self.proxy.port}"
        copy = path.with_name(f"{path.stem}-proxied{path.suffix}")
        copy.write_text(json.dumps(config))
        return copy
