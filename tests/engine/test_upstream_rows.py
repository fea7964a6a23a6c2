"""Rows where netaware once differed from upstream: NodeResourcesAllocatable's integer arithmetic (scheduler-plugins
``pkg/noderesources/allocatable.go``: the weighted sum divided by the sum of the weights, truncated toward zero,
before the min-max normalisation) and kube-scheduler's NodeResourcesFit in `netaware schedule` when the
configuration enables kube-scheduler's default filters. Expected values derived by hand in each test."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

from operators.api.config.scheduler import (
    RESOURCES_FIT,
    NodeResourcesAllocatableArgs,
    SchedulerConfig,
    parse_config,
)
from operators.cli.main import cli
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling import allocatable
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.scheduling.schedule import schedule


def node(name: str, cpu: str, memory: str, pods: str = "110") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods}},
    }


def pod(name: str, cpu: str, memory: str = "0", on: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": on,
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        },
        "status": {"phase": "Running" if on else "Pending"},
    }


@pytest.mark.parametrize(
    ("mode", "raw", "normalized"),
    [
        # cpu weight 3, memory 1 (sum 4). a: 1m -> 3 -> 3 // 4 = 0; b: 1m + 1 byte -> 4 -> 1; c: 2m -> 6 -> 1.
        # Undivided it would be 3, 4, 6: normalised 0, 33, 100.
        ("Most", [0, 1, 1], [0, 100, 100]),
        # Least: -3 / 4 truncates to 0 (not -1), -4 / 4 = -1, -6 / 4 truncates to -1 (not -2): 100, 0, 0.
        ("Least", [0, -1, -1], [100, 0, 0]),
    ],
)
def test_allocatable_divides_by_the_weights_and_truncates_toward_zero(
    mode: str, raw: list[int], normalized: list[int]
) -> None:
    nodes = [Node.parse(node("a", "1m", "0")), Node.parse(node("b", "1m", "1")), Node.parse(node("c", "2m", "0"))]
    args = NodeResourcesAllocatableArgs(mode=mode, resources=(("cpu", 3), ("memory", 1)))
    scores = [allocatable.allocatable_score(n, args) for n in nodes]
    assert scores == raw
    assert allocatable.normalize(np.array(scores, dtype=np.int64)).tolist() == normalized


def test_a_resource_upstream_does_not_count_scores_zero() -> None:
    """``pods`` is neither cpu, memory, ephemeral-storage nor a scalar resource: upstream counts 0 for it."""
    args = NodeResourcesAllocatableArgs(mode="Most", resources=(("pods", 1), ("example.com/gpu", 2)))
    raw = node("a", "1", "1Gi", pods="110")
    raw["status"]["allocatable"]["example.com/gpu"] = "4"
    assert allocatable.allocatable_score(Node.parse(raw), args) == (0 * 1 + 4 * 2) // 3


ROOT = pathlib.Path(__file__).resolve().parents[2]
DEFAULTS_ON = {
    "apiVersion": "kubescheduler.config.k8s.io/v1",
    "kind": "KubeSchedulerConfiguration",
    "profiles": [
        {
            "schedulerName": "network-aware-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": "NodeResourcesAllocatable", "weight": 1}]}},
            "pluginConfig": [{"name": "NodeResourcesAllocatable", "args": {"mode": "Least"}}],
        }
    ],
}


def test_schedule_applies_node_resources_fit_when_the_default_filters_are_on(tmp_path: pathlib.Path) -> None:
    """A 3-cpu pod: the small nodes (2 cpu; 4 cpu with 2 requested) cannot hold it, only the big one (8 cpu) can;
    NodeResourcesAllocatable in Least mode alone would pick a small node."""
    objects = [
        node("small", "2", "8Gi"),
        node("busy", "4", "8Gi"),
        node("big", "8", "32Gi"),
        pod("placed", "2", on="busy"),
        pod("wants-3", "3"),
    ]
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(objects))
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(DEFAULTS_ON))
    result = CliRunner().invoke(
        cli,
        [
            "schedule",
            "-f",
            str(tmp_path / "cluster.yaml"),
            "--pod",
            "default/wants-3",
            "--config",
            str(tmp_path / "config.yaml"),
        ],
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["selectedNode"] == "big"
    assert answer["filter"]["small"][RESOURCES_FIT] == "Insufficient cpu"
    assert answer["filter"]["busy"][RESOURCES_FIT] == "Insufficient cpu"  # 4 - 2 requested < 3
    assert answer["filter"]["big"][RESOURCES_FIT] == "passed"


def test_node_resources_fit_counts_the_pods_limit_and_follows_the_configuration() -> None:
    snapshot = build_snapshot([node("full", "8", "8Gi", pods="1"), pod("there", "0", on="full"), pod("new", "1")])
    index = ClusterIndex.build(snapshot)
    new = Pod.parse(pod("new", "1"))
    on = schedule(new, index, parse_config(DEFAULTS_ON))
    assert on.failed == {"full": "Too many pods"}
    disabled = json.loads(json.dumps(DEFAULTS_ON))
    disabled["profiles"][0]["plugins"]["filter"] = {"disabled": [{"name": "*"}]}
    assert RESOURCES_FIT not in parse_config(disabled).filters
    assert schedule(new, index, parse_config(disabled)).failed == {}
    named = json.loads(json.dumps(DEFAULTS_ON))
    named["profiles"][0]["plugins"]["multiPoint"]["disabled"] = [{"name": "NodeResourcesFit"}]
    assert RESOURCES_FIT not in parse_config(named).filters
    # no configuration: kube-scheduler's default profile's filters, then netaware's plugins
    assert SchedulerConfig().filters[:5] == (
        "NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", RESOURCES_FIT,
    )  # fmt: skip
