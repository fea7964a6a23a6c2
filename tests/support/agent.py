"""Builders for the node agent's tests: a node, its NodeSLO, pods with a QoS class and bandwidth."""

from __future__ import annotations

from typing import Any

from operators.api.nodeslo import NodeSLO
from operators.engine.cluster.objects import Node, Pod


def make_node(annotations: dict[str, str] | None = None) -> Node:
    return Node.parse({"metadata": {"name": "n1", "annotations": annotations or {}}})


def slo(spec: dict[str, Any]) -> NodeSLO:
    """A NodeSLO as Koordinator's slo-controller writes it: a spec and no status."""
    return NodeSLO.model_validate({"metadata": {"name": "n1"}, "spec": spec})


def make_pod(
    name: str,
    label: str | None = None,
    annotations: dict[str, str] | None = None,
    qos: str | None = None,
    ip: str = "10.0.0.1",
    host_network: bool = False,
    node: str = "n1",
) -> Pod:
    status: dict[str, Any] = {"phase": "Running", "podIP": ip}
    if qos:
        status["qosClass"] = qos
    return Pod.parse(
        {
            "metadata": {
                "name": name,
                "namespace": "ns",
                "labels": {"koordinator.sh/qosClass": label} if label else {},
                "annotations": annotations or {},
            },
            "spec": {"nodeName": node, "hostNetwork": host_network, "containers": [{"name": "c"}]},
            "status": status,
        }
    )
