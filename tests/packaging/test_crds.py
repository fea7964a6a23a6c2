"""The CRDs in crds/: generated from the models, valid, structural, and what docs/design/contracts.md promises."""

from __future__ import annotations

import pathlib
import subprocess
import sys
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from operators.api.crd import ALL_CRDS, custom_resource_definition

ROOT = pathlib.Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
EXAMPLES = ROOT / "hack" / "examples"


def load_crd(file_name: str) -> dict[str, Any]:
    return yaml.safe_load((CRDS / file_name).read_text())


def test_crd_yaml_matches_the_models() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "gen_crds.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    for info in ALL_CRDS:
        assert load_crd(info.file_name) == custom_resource_definition(info)


def test_drift_is_detected(tmp_path: pathlib.Path) -> None:
    for info in ALL_CRDS:
        (tmp_path / info.file_name).write_text((CRDS / info.file_name).read_text().replace("minimum: 1", "minimum: 2"))
    result = subprocess.run(
        [sys.executable, str(ROOT / "hack" / "gen_crds.py"), "--check", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 1
    assert "appgroups" in result.stderr


EXPECTED = {
    "appgroup.diktyo.x-k8s.io_appgroups.yaml": (
        "appgroup.diktyo.x-k8s.io",
        "AppGroup",
        "appgroups",
        ["ag"],
        "Namespaced",
    ),
    "networktopology.diktyo.x-k8s.io_networktopologies.yaml": (
        "networktopology.diktyo.x-k8s.io",
        "NetworkTopology",
        "networktopologies",
        ["nt"],
        "Namespaced",
    ),
    "slo.koordinator.sh_nodeslos.yaml": ("slo.koordinator.sh", "NodeSLO", "nodeslos", ["nslo"], "Cluster"),
}


@pytest.mark.parametrize("file_name", sorted(EXPECTED))
def test_crd_is_a_valid_kubernetes_object_with_the_specified_names(file_name: str) -> None:
    crd = load_crd(file_name)
    kubernetes_validate.validate(crd, "1.33.0", strict=True)
    group, kind, plural, short, scope = EXPECTED[file_name]
    assert crd["spec"]["group"] == group
    assert crd["spec"]["names"]["kind"] == kind
    assert crd["spec"]["names"]["plural"] == plural
    assert crd["spec"]["names"]["shortNames"] == short
    assert crd["spec"]["scope"] == scope
    assert crd["metadata"]["name"] == f"{plural}.{group}"
    (version,) = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}


def test_an_invalid_crd_is_caught_by_the_validator() -> None:
    crd = load_crd("appgroup.diktyo.x-k8s.io_appgroups.yaml")
    crd["spec"]["scope"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(crd, "1.33.0", strict=True)


def _walk(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        found.append((path, node))
        for key, value in node.items():
            found.extend(_walk(value, f"{path}/{key}"))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.extend(_walk(value, f"{path}[{index}]"))
    return found


@pytest.mark.parametrize("file_name", sorted(EXPECTED))
def test_schemas_are_structural(file_name: str) -> None:
    schema = load_crd(file_name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _walk(schema):
        assert "$ref" not in node, path
        assert "title" not in node, path
        if "x-kubernetes-int-or-string" in node:
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        if path.endswith("/anyOf[0]") or path.endswith("/anyOf[1]"):
            continue
        if path.rsplit("/", 1)[-1] == "properties" or (
            "/properties/" in path and not node.get("type") and set(node) <= {"type", "properties"}
        ):
            continue
        if "properties" in node or "items" in node or "enum" in node or "format" in node:
            assert "type" in node, f"{path} has no type"
        assert not ("properties" in node and isinstance(node.get("additionalProperties"), dict)), path


def _schema(file_name: str) -> dict[str, Any]:
    return load_crd(file_name)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _validate_instance(schema: dict[str, Any], instance: dict[str, Any]) -> None:
    jsonschema.validate(instance, schema)


def test_example_custom_resources_validate_against_their_crds() -> None:
    schemas = {kind: _schema(file_name) for file_name, (_, kind, _, _, _) in EXPECTED.items()}
    seen = set()
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") in schemas:
                _validate_instance(schemas[document["kind"]], document)
                seen.add(document["kind"])
    assert {"AppGroup", "NetworkTopology"} <= seen


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda ag: ag["spec"]["workloads"][0]["dependencies"][0].update(maxNetworkCost=10001), "10001"),
        (lambda ag: ag["spec"]["workloads"][0]["dependencies"][0].update(maxNetworkCost=-1), "-1"),
        (lambda ag: ag["spec"].update(numMembers=0), "0"),
        (lambda ag: ag["spec"].update(topologySortingAlgorithm="BubbleSort"), "BubbleSort"),
        (lambda ag: ag["spec"]["workloads"][0]["dependencies"][0].update(minBandwidth="10Q"), "10Q"),
    ],
)
def test_schema_rejects_what_upstream_validation_rejects(mutate: Any, message: str) -> None:
    appgroup = yaml.safe_load((EXAMPLES / "appgroup-a1.yaml").read_text())
    mutate(appgroup)
    with pytest.raises(jsonschema.ValidationError) as raised:
        _validate_instance(_schema("appgroup.diktyo.x-k8s.io_appgroups.yaml"), appgroup)
    assert message in str(raised.value.message)


def test_printer_columns() -> None:
    columns = {
        column["name"]: column["jsonPath"]
        for column in load_crd("appgroup.diktyo.x-k8s.io_appgroups.yaml")["spec"]["versions"][0][
            "additionalPrinterColumns"
        ]
    }
    assert columns["Algorithm"] == ".spec.topologySortingAlgorithm"
    assert columns["Running"] == ".status.runningWorkloads"
    assert columns["Age"] == ".metadata.creationTimestamp"
    nt_columns = {
        column["name"]: column["jsonPath"]
        for column in load_crd("networktopology.diktyo.x-k8s.io_networktopologies.yaml")["spec"]["versions"][0][
            "additionalPrinterColumns"
        ]
    }
    assert nt_columns["Nodes"] == ".status.nodeCount"
    assert nt_columns["Calculated"] == ".status.weightCalculationTime"


def test_nodeslo_keeps_koordinator_fields_it_does_not_model() -> None:
    spec = _schema("slo.koordinator.sh_nodeslos.yaml")["properties"]["spec"]
    assert spec["x-kubernetes-preserve-unknown-fields"] is True
    lsr = spec["properties"]["resourceQOSStrategy"]["properties"]["lsrClass"]
    assert lsr["x-kubernetes-preserve-unknown-fields"] is True
    assert "networkQOS" in lsr["properties"]
