"""Loading snapshots: files, folders, stdin, Lists; indexes; errors naming file, document and field."""

from __future__ import annotations

import io
import pathlib

import pytest
import yaml

from operators.api.quantity import parse_quantity
from operators.api.selectors import from_label_selector, parse_selector
from operators.engine.cluster.snapshot import build_snapshot
from operators.sources.files import LoadError, load_snapshot

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "hack" / "examples"


def test_the_example_cluster_loads_with_its_indexes() -> None:
    snapshot = load_snapshot([str(EXAMPLES)])
    assert [node.name for node in snapshot.nodes] == [f"n-{i}" for i in range(1, 9)]
    assert {zone: [node.name for node in nodes] for zone, nodes in snapshot.nodes_by_zone.items()} == {
        "Z1": ["n-1", "n-2"],
        "Z2": ["n-3", "n-4"],
        "Z3": ["n-5", "n-6"],
        "Z4": ["n-7", "n-8"],
    }
    assert sorted(snapshot.nodes_by_region) == ["us-east-1", "us-west-1"]
    assert [pod.name for pod in snapshot.pods_by_node["n-1"]] == ["p2-deployment-7d4b9c-abcde"]
    assert len(snapshot.appgroup_pods("default", "a1")) == 2
    assert snapshot.appgroup_pods("other", "a1") == ()
    assert [group.metadata.name for group in snapshot.app_groups] == ["a1", "onlineboutique"]
    assert snapshot.config_map_by_key[("koordinator-system", "slo-controller-config")].data["system-config"]
    assert snapshot.node_by_name["n-5"].region == "us-east-1"


def test_kind_list_stdin_and_json(tmp_path: pathlib.Path) -> None:
    listing = {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a"}},
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "b"}},
        ],
    }
    snapshot = load_snapshot(["-"], stdin=io.StringIO(yaml.safe_dump(listing)))
    assert [node.name for node in snapshot.nodes] == ["a", "b"]
    (tmp_path / "nodes.json").write_text(
        '{"apiVersion": "v1", "kind": "NodeList", "items": '
        '[{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "c"}}]}'
    )
    assert [node.name for node in load_snapshot([str(tmp_path)]).nodes] == ["c"]


def test_pod_requests_follow_the_scheduler() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "x"},
        "spec": {
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "250m", "memory": "1Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m"}}},
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
            "overhead": {"memory": "64Mi"},
        },
    }
    (parsed,) = build_snapshot([pod]).pods
    assert parsed.requests["cpu"] == parse_quantity("2")
    assert parsed.requests["memory"] == parse_quantity("1088Mi")
    assert parsed.phase == "Pending" and not parsed.is_scheduled


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("apiVersion: v1\nkind: Node\nmetadata: {name: a\n", "bad.yaml: not valid YAML"),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {}\n",
            "bad.yaml: document 1: metadata.name: expected a non-empty string",
        ),
        (
            "---\napiVersion: v1\nkind: Node\nmetadata: {name: a}\n"
            "---\napiVersion: v1\nkind: Node\nmetadata: {name: b}\n"
            "status: {allocatable: {cpu: 10Q}}\n",
            "bad.yaml: document 2: status.allocatable.cpu: "
            'not a quantity: unexpected characters after the number (got "10Q")',
        ),
        (
            "apiVersion: appgroup.diktyo.x-k8s.io/v1alpha1\nkind: AppGroup\nmetadata: {name: g}\n"
            "spec:\n  numMembers: 1\n"
            "  topologySortingAlgorithm: KahnSort\n  workloads:\n  - workload: {kind: D, name: a, selector: a}\n"
            "    dependencies:\n    - workload: {kind: D, name: b, selector: b}\n      minBandwidth: 10Q\n",
            "bad.yaml: document 1: spec.workloads[0].dependencies[0].minBandwidth: not a quantity",
        ),
        ("kind: Node\nmetadata: {name: a}\n", "bad.yaml: document 1: apiVersion: expected the object's apiVersion"),
        ("- 1\n- 2\n", "bad.yaml: document 1: expected a Kubernetes object"),
    ],
)
def test_errors_name_the_file_the_document_and_the_field(tmp_path: pathlib.Path, content: str, expected: str) -> None:
    (tmp_path / "bad.yaml").write_text(content)
    with pytest.raises(LoadError) as raised:
        load_snapshot([str(tmp_path / "bad.yaml")])
    message = str(raised.value)
    assert "\n" not in message
    assert message.replace(str(tmp_path) + "/", "").startswith(expected)


def test_missing_file() -> None:
    with pytest.raises(LoadError, match=r"missing\.yaml: no such file or directory"):
        load_snapshot(["missing.yaml"])


def test_old_api_groups_and_field_names_are_read_with_warnings(tmp_path: pathlib.Path) -> None:
    (tmp_path / "nt.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "diktyo.k8s.io/v1alpha1",
                "kind": "NetworkTopology",
                "metadata": {"name": "net-topology-test"},
                "spec": {"configMapName": "netperf-metrics", "weights": [{"name": "UserDefined", "costList": []}]},
            }
        )
    )
    snapshot = load_snapshot([str(tmp_path)])
    (topology,) = snapshot.network_topologies
    assert topology.spec.configmap_name == "netperf-metrics"
    assert topology.metadata.namespace == "default"
    assert any("old API group" in warning for warning in snapshot.warnings)
    assert any("configMapName is an old field name" in warning for warning in snapshot.warnings)


def test_a_duplicate_object_warns_and_the_later_one_wins(tmp_path: pathlib.Path) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a", "labels": {"v": "1"}}}
    (tmp_path / "1.yaml").write_text(yaml.safe_dump(node))
    node["metadata"]["labels"]["v"] = "2"
    (tmp_path / "2.yaml").write_text(yaml.safe_dump(node))
    snapshot = load_snapshot([str(tmp_path)])
    assert snapshot.nodes[0].labels["v"] == "2"
    assert any("appears twice" in warning for warning in snapshot.warnings)


@pytest.mark.parametrize(
    ("selector", "labels", "matches"),
    [
        ("a=b", {"a": "b"}, True),
        ("a=b", {"a": "c"}, False),
        ("a==b,c!=d", {"a": "b"}, True),
        ("a==b,c!=d", {"a": "b", "c": "d"}, False),
        ("e in (f,g),!h", {"e": "g"}, True),
        ("e in (f,g),!h", {"e": "g", "h": ""}, False),
        ("x", {"x": ""}, True),
        ("x notin (1)", {}, True),
        ("", {}, True),
    ],
)
def test_string_label_selectors(selector: str, labels: dict[str, str], matches: bool) -> None:
    assert parse_selector(selector).matches(labels) is matches


def test_structured_label_selectors() -> None:
    selector = from_label_selector(
        {"matchLabels": {"app": "x"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}
    )
    assert selector.matches({"app": "x", "tier": "a"})
    assert not selector.matches({"app": "x"})
    assert from_label_selector({}).matches({"any": "thing"})
    assert not from_label_selector(None).matches({})
    with pytest.raises(ValueError, match=r"matchExpressions\[0\]\.operator"):
        from_label_selector({"matchExpressions": [{"key": "a", "operator": "Near"}]})
