"""The end-to-end tier: a real control plane on loopback (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, KWOK nodes), real kubectl and Helm, netaware's components as host processes.

The binaries come from ``bash hack/control-plane/build.sh`` (the README's test command runs it first). Without
them the tier is skipped with that instruction, except under CI (``CI=true``), where it fails
(``tests/support/prerequisites.require``).
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest
import trustme

from hack.control_plane.cluster import ControlPlane
from tests.e2e import rbac
from tests.support.e2e import (
    EXAMPLES,
    PROBE_NAMESPACE,
    RELEASE_NAMESPACE,
    ROOT,
    chart_rbac_yaml,
    refused_by_rbac,
    service_account,
)
from tests.support.prerequisites import control_plane_built, require

CLUSTERS: list[ControlPlane] = []  # the session's control plane once started (rbac_claims reads its audit log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
            if item.get_closest_marker("timeout") is None:  # a module may ask for more (its own marker)
                item.add_marker(pytest.mark.timeout(300))  # a control plane to start, Helm waits, a loaded CI machine


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """One control plane for the session, with KWOK nodes from the example cluster and netaware's CRDs."""
    require(control_plane_built())
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
