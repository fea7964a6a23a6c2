"""The end-to-end tier: a real control plane on loopback (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, KWOK nodes), real kubectl and Helm, netaware's components as host processes.

The binaries come from ``bash hack/control-plane/build.sh`` (the README's test command runs it first). Without
them the tier is skipped with that instruction, except under CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import os
import pathlib
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import trustme
import yaml

from hack.control_plane import cluster as control_plane
from hack.control_plane.cluster import ControlPlane, free_port
from tests.e2e import rbac
from webhooks.configuration import mutating_webhook_configuration

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "hack" / "examples"
RELEASE_NAMESPACE = "netaware-system"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.timeout(300))  # a control plane to start, Helm waits, a loaded CI machine


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One control plane for the session, with KWOK nodes from the example cluster and netaware's CRDs."""
    missing = control_plane.missing_binaries()
    if missing:
        message = f"the control plane is not built ({', '.join(missing)}): run bash hack/control-plane/build.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    plane = ControlPlane(tmp_path_factory.mktemp("control-plane"))
    plane.start([EXAMPLES / "cluster.yaml"])
    CLUSTERS.append(plane)
    try:
        plane.kubectl("apply", "-f", str(ROOT / "crds"))
        plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        yield plane
    finally:
        CLUSTERS.remove(plane)
        plane.stop()


CLUSTERS: list[ControlPlane] = []  # the session's control plane once started (rbac_claims reads its audit log)


@pytest.fixture(scope="module", autouse=True)
def rbac_claims(request: pytest.FixtureRequest) -> Iterator[None]:
    """When a module whose scenarios claim permissions (``rbac.CLAIMS``) ends, its ServiceAccounts used every
    permission it claims during its own run, and none was refused; with NETAWARE_RBAC_RECORD=FILE, what each
    module used is appended to FILE (one JSON line per module) to write the claims from."""
    module = pathlib.Path(str(request.path)).stem
    claims = rbac.CLAIMS.get(module, {})
    record = os.environ.get("NETAWARE_RBAC_RECORD")
    started = datetime.datetime.now(datetime.UTC)
    failed_before = request.session.testsfailed
    yield
    if not CLUSTERS or not (claims or record) or request.session.testsfailed > failed_before:
        return  # no cluster in this module, nothing claimed, or a failure already said what went wrong
    plane = CLUSTERS[0]
    usage = {
        component: rbac.used(plane.audit_events(service_account(component)), started, refused_by_rbac)
        for component in rbac.COMPONENTS
    }
    if record:
        line = {component: sorted(seen) for component, (seen, _) in usage.items() if seen}
        with open(record, "a") as out:
            out.write(json.dumps({module: line}) + "\n")
    for component, permissions in claims.items():
        seen, refused = usage[component]
        assert refused == [], f"{module}: the {component}'s ServiceAccount was refused {refused}"
        assert permissions <= seen, f"{module}: the {component} never used {sorted(permissions - seen)}"


def kubectl_json(cluster: ControlPlane, *args: str) -> Any:
    return json.loads(cluster.kubectl(*args, "-o", "json").stdout)


def helm(plane: ControlPlane, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(plane.bin_dir / "helm"), f"--kubeconfig={plane.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)}: {done.stderr}")
    return done


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


def member_deployment(namespace: str, group: str, selector: str, replicas: int, cpu: str) -> dict[str, Any]:
    """A Deployment of pause pods labelled as AppGroup ``group``'s workload ``selector``, each asking ``cpu``."""
    labels = {"appgroup.diktyo.x-k8s.io": group, "appgroup.diktyo.x-k8s.io.workload": selector}
    container = {"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": selector, "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def example(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


@pytest.fixture(scope="session")
def host_tls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A CA and a serving pair for 127.0.0.1: the webhook and the extender run on the host."""
    folder = tmp_path_factory.mktemp("host-tls")
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    cert, key, ca_file = folder / "tls.crt", folder / "tls.key", folder / "ca.crt"
    leaf.private_key_and_cert_chain_pem.write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    return {"cert": cert, "key": key, "ca": ca_file, "ca_b64": base64.b64encode(ca.cert_pem.bytes()).decode()}


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
    """The chart's ServiceAccounts, roles and bindings as it renders them, the descheduler, the probe and the agent
    on (their DaemonSets left out: their pods would run on every KWOK node)."""
    command = ["template", "netaware", str(ROOT / "helm" / "netaware"), "--namespace", RELEASE_NAMESPACE]
    command += ["--set", "descheduler.enabled=true", "--set", "descheduler.rebalance.enabled=true"]
    command += ["--set", "probe.enabled=true"]
    command += ["--set", f"probe.topologyNamespace={PROBE_NAMESPACE}"]
    command += ["--set", "agent.enabled=true", "--set", "agent.publishCapacity=true"]
    command += ["--show-only", "templates/rbac.yaml", "--show-only", "templates/probe.yaml"]
    command += ["--show-only", "templates/agent.yaml"]
    helm = control_plane.BIN / "helm"
    rendered = subprocess.run([str(helm), *command], capture_output=True, text=True, check=True).stdout
    documents = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] != "DaemonSet"]
    return yaml.safe_dump_all(documents)


@pytest.fixture(scope="session")
def chart_rbac(cluster: ControlPlane) -> dict[str, pathlib.Path]:
    """The chart's ServiceAccounts and RBAC, exactly as it renders them (descheduler on), applied to the cluster;
    a kubeconfig per component that authenticates with its ServiceAccount's token."""
    rendered = chart_rbac_yaml()
    cluster.kubectl("create", "namespace", RELEASE_NAMESPACE, check=False)
    cluster.kubectl("create", "namespace", PROBE_NAMESPACE, check=False)
    cluster.kubectl("apply", "-f", "-", stdin=rendered)
    configs = {}
    for component in ("operator", "webhook", "extender", "probe", "agent"):
        token = cluster.kubectl("create", "token", f"netaware-{component}", "-n", RELEASE_NAMESPACE, "--duration=2h")
        configs[component] = cluster.token_kubeconfig(component, token.stdout.strip())
    return configs


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
