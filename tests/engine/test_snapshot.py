"""Loading snapshots: files, folders, stdin, Lists; indexes; errors naming file, document and field."""

from __future__ import annotations

import copy
import io
import pathlib
from typing import Any

import pytest
import yaml

from operators.api.errors import FieldError
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


def _appgroup(namespace: str, name: str) -> dict[str, Any]:
    workloads = [{"workload": {"kind": "Deployment", "name": "w", "selector": "w"}}]
    return {
        "apiVersion": "appgroup.diktyo.x-k8s.io/v1alpha1",
        "kind": "AppGroup",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"numMembers": 1, "topologySortingAlgorithm": "KahnSort", "workloads": workloads},
    }


def test_appgroups_by_name_hold_every_namespace_and_follow_a_changed_set() -> None:
    first = build_snapshot([_appgroup("a", "shop"), _appgroup("b", "shop"), _appgroup("a", "blog")])
    assert {name: [g.metadata.namespace for g in groups] for name, groups in first.app_groups_by_name.items()} == {
        "shop": ["a", "b"],
        "blog": ["a"],
    }
    assert "cart" not in first.app_groups_by_name
    # a snapshot sharing the tuple reads the kept index; another set of AppGroups is indexed anew
    sharing = build_snapshot([])
    object.__setattr__(sharing, "app_groups", first.app_groups)
    assert sharing.app_groups_by_name is first.app_groups_by_name
    second = build_snapshot([_appgroup("c", "shop")])
    assert [g.metadata.namespace for g in second.app_groups_by_name["shop"]] == ["c"]
    assert "blog" not in second.app_groups_by_name


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


# -- the kinds kube-scheduler's volume plugins and its default spread selector read --------------------------------

STORAGE_AND_SELECTORS = [
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "data",
            "namespace": "db",
            "uid": "u1",
            "annotations": {"pv.kubernetes.io/bind-completed": "yes", "other": "x"},
            "ownerReferences": [{"kind": "Pod", "name": "p", "uid": "pod-uid", "controller": True}],
        },
        "spec": {
            "volumeName": "pv-1",
            "storageClassName": "fast",
            "accessModes": ["ReadWriteOncePod"],
            "resources": {"requests": {"storage": "10Gi"}},
            "selector": {"matchLabels": {"tier": "ssd"}},
        },
        "status": {"phase": "Bound"},
    },
    {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": "pv-1",
            "labels": {"topology.kubernetes.io/zone": "z1"},
            "annotations": {"volume.beta.kubernetes.io/storage-class": "beta"},
        },
        "spec": {
            "storageClassName": "fast",
            "capacity": {"storage": "20Gi"},
            "accessModes": ["ReadWriteOnce"],
            "claimRef": {"namespace": "db", "name": "data", "uid": "u1"},
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}
                            ]
                        }
                    ]
                }
            },
        },
        "status": {"phase": "Bound"},
    },
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "fast"},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["z1"]}]}],
    },
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "plain"}, "provisioner": "x"},
    {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "n1"},
        "spec": {
            "drivers": [
                {"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25}},
                {"name": "efs.csi.aws.com", "nodeID": "i-1"},
            ]
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "db"},
        "spec": {"selector": {"app": "web"}},
    },
    {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "namespace": "db"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
    },
    {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "db"},
        "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}},
    },
    {
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "metadata": {"name": "old", "namespace": "db"},
        "spec": {"selector": {"app": "old"}},
    },
]


def test_the_storage_kinds_and_the_selecting_kinds_are_read() -> None:
    snapshot = build_snapshot(STORAGE_AND_SELECTORS)
    (claim,) = snapshot.persistent_volume_claims
    assert (claim.namespace, claim.name, claim.uid, claim.volume_name, claim.storage_class) == (
        "db",
        "data",
        "u1",
        "pv-1",
        "fast",
    )
    assert claim.fully_bound and claim.phase == "Bound" and claim.access_modes == ("ReadWriteOncePod",)
    assert claim.request == parse_quantity("10Gi") and claim.volume_mode == "Filesystem"
    assert claim.selector is not None and claim.selector.matches({"tier": "ssd"})
    assert claim.controller_uid == "pod-uid" and claim.selected_node is None and not claim.deleting
    assert snapshot.claim_by_key[("db", "data")] is claim
    volume = snapshot.volume_by_name["pv-1"]
    assert volume.storage_class == "beta"  # the beta annotation first, as upstream's GetPersistentVolumeClass
    assert volume.capacity == parse_quantity("20Gi") and volume.claim_ref == ("db", "data", "u1")
    assert volume.csi == ("ebs.csi.aws.com", "vol-1") and volume.labels["topology.kubernetes.io/zone"] == "z1"
    assert volume.allows({"topology.kubernetes.io/zone": "z1"}) and not volume.allows({})
    fast, plain = snapshot.storage_classes
    assert (fast.provisioner, fast.binding_mode) == ("ebs.csi.aws.com", "WaitForFirstConsumer")
    assert fast.allows({"topology.kubernetes.io/zone": "z1"}) and not fast.allows({"topology.kubernetes.io/zone": "z2"})
    assert plain.binding_mode == "Immediate" and plain.allows({})  # the API server's default; no topology: any node
    assert snapshot.csi_node_by_name["n1"].limits == {"ebs.csi.aws.com": 25}
    (service,) = snapshot.services
    assert dict(service.selector or {}) == {"app": "web"}
    assert snapshot.replica_sets[0].selector.matches({"app": "web"})
    assert snapshot.stateful_sets[0].selector.matches({"app": "x"})
    assert dict(snapshot.replication_controllers[0].selector) == {"app": "old"}
    assert snapshot.controller_by_key[("StatefulSet", "db", "db")] is snapshot.stateful_sets[0]


def test_the_new_kinds_are_read_from_kubectl_lists(tmp_path: pathlib.Path) -> None:
    items = [
        {key: value for key, value in item.items() if key not in ("apiVersion", "kind")}
        | {"apiVersion": item["apiVersion"], "kind": item["kind"]}
        for item in STORAGE_AND_SELECTORS
    ]
    (tmp_path / "all.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    (tmp_path / "claims.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaimList",
                "items": [{**items[0], "metadata": {"name": "more", "namespace": "db"}}],
            }
        )
    )
    snapshot = load_snapshot([str(tmp_path)])
    assert [claim.name for claim in snapshot.persistent_volume_claims] == ["data", "more"]
    assert [
        len(getattr(snapshot, slot))
        for slot in (
            "persistent_volumes",
            "storage_classes",
            "csi_nodes",
            "services",
            "replica_sets",
            "stateful_sets",
            "replication_controllers",
        )
    ] == [1, 2, 1, 1, 1, 1, 1]
    assert build_snapshot([]).persistent_volume_claims == () and build_snapshot([]).services == ()


@pytest.mark.parametrize(
    ("index", "change", "expected"),
    [
        (0, {"spec": {"accessModes": "ReadWriteOnce"}}, "[0].spec.accessModes: expected a list"),
        (0, {"spec": {"resources": {"requests": {"storage": "lots"}}}}, "[0].spec.resources.requests.storage"),
        (
            0,
            {"metadata": {"name": "c", "annotations": {"pv.kubernetes.io/bind-completed": 1}}},
            "[0].metadata.annotations[pv.kubernetes.io/bind-completed]: expected a string",
        ),
        (
            1,
            {
                "spec": {
                    "nodeAffinity": {
                        "required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]}
                    }
                }
            },
            "[1].spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator: expected one of",
        ),
        (1, {"spec": {"claimRef": "db/data"}}, "[1].spec.claimRef: expected an object"),
        (2, {"volumeBindingMode": "Later"}, "[2].volumeBindingMode: expected Immediate or WaitForFirstConsumer"),
        (
            2,
            {"allowedTopologies": [{"matchLabelExpressions": [{"key": "k", "values": "v"}]}]},
            "[2].allowedTopologies[0].matchLabelExpressions[0].values: expected a list",
        ),
        (
            4,
            {"spec": {"drivers": [{"name": "d", "allocatable": {"count": -1}}]}},
            "[4].spec.drivers[0].allocatable.count: expected a non-negative integer",
        ),
        (5, {"spec": {"selector": {"app": 1}}}, "[5].spec.selector[app]: expected a string"),
        (6, {"spec": {"selector": {"matchLabels": "web"}}}, "[6].spec.selector.matchLabels: expected a map"),
        (8, {"spec": {"selector": ["app"]}}, "[8].spec.selector: expected a map of strings"),
    ],
)
def test_errors_in_the_new_kinds_name_the_field(index: int, change: dict[str, Any], expected: str) -> None:
    objects = copy.deepcopy(STORAGE_AND_SELECTORS)
    objects[index] = {**objects[index], **change}
    with pytest.raises(FieldError) as raised:
        build_snapshot(objects)
    assert str(raised.value).startswith(expected)


def test_node_affinity_terms_match_as_upstream_checks_a_volume() -> None:
    """CheckNodeAffinity: terms are ORed; an empty or invalid term matches nothing; Gt/Lt compare integers; it passes
    the node's labels only, so matchFields are not checked (component-helpers nodeaffinity: no node name, no
    fields)."""

    def volume(*terms: dict[str, Any]) -> Any:
        raw = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "v"},
            "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": list(terms)}}},
        }
        return build_snapshot([raw]).persistent_volumes[0]

    def expression(key: str, operator: str, *values: str) -> dict[str, Any]:
        return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}

    assert not volume({}).allows({"a": "1"})
    assert volume({}, expression("a", "In", "1")).allows({"a": "1"})
    assert not volume(expression("a", "NotIn")).allows({})  # NotIn without values: invalid
    assert volume(expression("n", "Gt", "5")).allows({"n": "6"}) and not volume(expression("n", "Gt", "5")).allows(
        {"n": "x"}
    )
    assert not volume(expression("n", "Lt", "x")).allows({"n": "1"})
    assert not volume(expression("n", "Gt", "1", "9")).allows({"n": "5"})  # Gt, Lt: exactly one value
    fields = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["other-node"]}]}
    assert volume(fields).allows({})
    assert not volume({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}).allows({})
