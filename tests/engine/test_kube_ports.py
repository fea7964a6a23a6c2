"""kube-scheduler 1.37's own unit tables for NodePorts, translated: the engine's
:mod:`operators.engine.cluster.kube.ports` (and the host ports :mod:`~operators.engine.cluster.kube.terms` reads of
a pod) is held to upstream's expected results.

Source: ``k8s.io/kubernetes@v1.37.2/pkg/scheduler/framework/plugins/nodeports/node_ports_test.go``: TestNodePorts
(PreFilter Skip, or the Filter's status) and TestFits (whether the pod's ports fit the node's). The node's pods are
one placed pod with upstream's ports, on node ``m1``; the pipeline (:func:`filters.failure` with NodePorts only)
reports upstream's reason. Left out: TestPreFilterDisabled (Filter without PreFilter is an error upstream; the engine
has no such state), the queueing hints and the deferred-resize case (not modelled).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from operators.engine.cluster.kube import filters, ports
from operators.engine.cluster.kube.terms import scheduling_spec
from operators.engine.cluster.kube.view import PlacedPods
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling.index import ClusterIndex

Raw = dict[str, Any]
SKIP = "PreFilter: Skip"  # the pod asks for no host port
OK = ""


def container_ports(*infos: str) -> list[Raw]:
    """upstream's newPod port strings, ``PROTOCOL/HOSTIP/HOSTPORT``, as container ports."""
    found = []
    for info in infos:
        protocol, host_ip, host_port = info.split("/")
        found.append({"hostIP": host_ip, "hostPort": int(host_port), "protocol": protocol})
    return found


def pod(name: str, on: str = "", containers: Sequence[Raw] = (), init_containers: Sequence[Raw] = ()) -> Raw:
    spec: Raw = {"containers": list(containers) or [{"name": "c"}]}
    if init_containers:
        spec["initContainers"] = list(init_containers)
    if on:
        spec["nodeName"] = on
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"phase": "Running" if on else "Pending"},
    }


def new_pod(name: str, on: str, *infos: str) -> Raw:
    """upstream's newPod: one container with these host ports."""
    return pod(name, on, [{"name": "container", "image": "pause", "ports": container_ports(*infos)}])


def sidecar_pod(sidecar: bool) -> Raw:
    """upstream's InitContainerPort(sidecar, [{containerPort: 8001, hostPort: 8001, TCP}])."""
    init: Raw = {
        "name": "init-container",
        "image": "pause",
        "ports": [{"containerPort": 8001, "hostPort": 8001, "protocol": "TCP"}],
    }
    if sidecar:
        init["restartPolicy"] = "Always"
    return pod("incoming", init_containers=[init])


def node_ports(incoming: Raw, *existing_ports: str) -> str:
    """NodePorts for ``incoming`` on node m1, whose one pod uses ``existing_ports`` (none: an empty node)."""
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "m1"}}
    placed = [new_pod("existing", "m1", *existing_ports)] if existing_ports else []
    snapshot = build_snapshot([node, *placed])
    index = ClusterIndex.build(snapshot)
    view = PlacedPods(index.usage, snapshot.node_by_name, snapshot.namespace_by_name)
    found = Pod.parse(incoming)
    wanted = scheduling_spec(found).host_ports
    cycle = filters.prefilter(found, view, index.requested, defaults=())
    plugin, reasons = filters.failure(cycle, snapshot.node_by_name["m1"], (filters.NODE_PORTS,))
    if not wanted:
        assert (plugin, reasons) == ("", ())
        return SKIP
    reason = ports.CONFLICT if ports.conflicts(wanted, view.ports_on("m1")) else OK
    assert (plugin, reasons) == ((ports.NAME, (reason,)) if reason else ("", ()))
    return reason


NODE_PORTS = [
    pytest.param(pod("incoming"), (), SKIP, id="skip filter"),
    pytest.param(new_pod("incoming", "m1", "UDP/127.0.0.1/8080"), ("UDP/127.0.0.1/9090",), OK, id="other port"),
    pytest.param(
        new_pod("incoming", "m1", "UDP/127.0.0.1/8080"), ("UDP/127.0.0.1/8080",), ports.CONFLICT, id="same udp port"
    ),
    pytest.param(
        new_pod("incoming", "m1", "TCP/127.0.0.1/8080"), ("TCP/127.0.0.1/8080",), ports.CONFLICT, id="same tcp port"
    ),
    pytest.param(new_pod("incoming", "m1", "TCP/127.0.0.1/8080"), ("TCP/127.0.0.2/8080",), OK, id="different host ip"),
    pytest.param(new_pod("incoming", "m1", "UDP/127.0.0.1/8080"), ("TCP/127.0.0.1/8080",), OK, id="different protocol"),
    pytest.param(
        new_pod("incoming", "m1", "UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"),
        ("UDP/127.0.0.1/8080",),
        ports.CONFLICT,
        id="second udp port conflict",
    ),
    pytest.param(
        new_pod("incoming", "m1", "TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"),
        ("TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"),
        ports.CONFLICT,
        id="first tcp port conflict",
    ),
    pytest.param(
        new_pod("incoming", "m1", "TCP/0.0.0.0/8001"),
        ("TCP/127.0.0.1/8001",),
        ports.CONFLICT,
        id="first tcp port conflict due to 0.0.0.0 hostIP",
    ),
    pytest.param(
        new_pod("incoming", "m1", "TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"),
        ("TCP/127.0.0.1/8001",),
        ports.CONFLICT,
        id="TCP hostPort conflict due to 0.0.0.0 hostIP",
    ),
    pytest.param(
        new_pod("incoming", "m1", "TCP/127.0.0.1/8001"),
        ("TCP/0.0.0.0/8001",),
        ports.CONFLICT,
        id="second tcp port conflict to 0.0.0.0 hostIP",
    ),
    pytest.param(
        new_pod("incoming", "m1", "UDP/127.0.0.1/8001"), ("TCP/0.0.0.0/8001",), OK, id="second different protocol"
    ),
    pytest.param(
        new_pod("incoming", "m1", "UDP/127.0.0.1/8001"),
        ("TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"),
        ports.CONFLICT,
        id="UDP hostPort conflict due to 0.0.0.0 hostIP",
    ),
    pytest.param(sidecar_pod(False), ("TCP/0.0.0.0/8001",), SKIP, id="non-sidecar initContainer using hostPort"),
    pytest.param(
        sidecar_pod(True), ("TCP/0.0.0.0/8001",), ports.CONFLICT, id="TCP hostPort conflict from sidecar initContainer"
    ),
]


@pytest.mark.parametrize(("incoming", "existing", "want"), NODE_PORTS)
def test_node_ports(incoming: Raw, existing: tuple[str, ...], want: str) -> None:
    assert node_ports(incoming, *existing) == want


FITS = [
    pytest.param(("TCP/127.0.0.1/80",), ("TCP/127.0.0.1/9090",), True, id="non-conflicting ports"),
    pytest.param(
        ("TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"),
        ("TCP/127.0.0.1/9090", "TCP/127.0.0.1/9191", "TCP/127.0.1.1/8080"),
        True,
        id="multiple non-conflicting ports",
    ),
    pytest.param(("TCP/127.0.0.1/80",), ("UDP/127.0.0.1/80",), True, id="same ports on different protocols"),
    pytest.param(("TCP/127.0.0.1/80",), ("TCP/127.0.0.1/80",), False, id="conflicting ports"),
    pytest.param(
        ("TCP/127.0.0.1/80", "TCP/127.0.1.1/80", "TCP/127.0.1.1/90", "TCP/127.0.1.1/100"),
        ("TCP/127.0.0.1/9090", "TCP/127.0.1.1/90", "TCP/127.0.1.1/8080"),
        False,
        id="multiple ports, some conflicting",
    ),
]


@pytest.mark.parametrize(("wanted", "existing", "fits"), FITS)
def test_fits(wanted: tuple[str, ...], existing: tuple[str, ...], fits: bool) -> None:
    """TestFits: the pod's host ports against the node's (upstream's Fits)."""
    assert (node_ports(new_pod("incoming", "", *wanted), *existing) == OK) is fits
