"""CustomResourceDefinitions generated from the pydantic models (one source of truth).

``model_json_schema()`` is turned into a *structural* OpenAPI v3 schema: ``$ref`` inlined,
``anyOf [X, null]`` collapsed to ``X`` (optional fields are simply not required), titles and
null defaults dropped, ``extra="allow"`` models marked ``x-kubernetes-preserve-unknown-fields``.
``hack/gen_crds.py`` writes the YAML into ``crds/``; a test fails when the two drift.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from pydantic import BaseModel

from operators.api import appgroup, keys, networktopology, nodeslo


@dataclass(frozen=True)
class PrinterColumn:
    name: str
    json_path: str
    type: str = "string"
    description: str = ""
    priority: int = 0

    def to_wire(self) -> dict[str, Any]:
        column: dict[str, Any] = {"name": self.name, "type": self.type, "jsonPath": self.json_path}
        if self.description:
            column["description"] = self.description
        if self.priority:
            column["priority"] = self.priority
        return column


@dataclass(frozen=True)
class CrdInfo:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    namespaced: bool
    spec_model: type[BaseModel]
    status_model: type[BaseModel]
    spec_required: bool = True
    columns: tuple[PrinterColumn, ...] = field(default_factory=tuple)
    description: str = ""

    @property
    def name(self) -> str:
        return f"{self.plural}.{self.group}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def file_name(self) -> str:
        return f"{self.group}_{self.plural}.yaml"


_AGE = PrinterColumn("Age", ".metadata.creationTimestamp", "date")

APPGROUP_CRD: Final = CrdInfo(
    group=keys.APPGROUP_GROUP,
    version=keys.V1ALPHA1,
    kind="AppGroup",
    plural="appgroups",
    singular="appgroup",
    short_names=("ag",),
    namespaced=True,
    spec_model=appgroup.AppGroupSpec,
    status_model=appgroup.AppGroupStatus,
    description="An application's workloads and the network requirements between them.",
    columns=(
        PrinterColumn("Algorithm", ".spec.topologySortingAlgorithm", description="Topology sorting algorithm"),
        PrinterColumn("Running", ".status.runningWorkloads", "integer", "Pods of the AppGroup in phase Running"),
        PrinterColumn("Ready", '.status.conditions[?(@.type=="Ready")].status'),
        PrinterColumn("Reason", '.status.conditions[?(@.type=="Ready")].reason', priority=1),
        _AGE,
    ),
)

NETWORKTOPOLOGY_CRD: Final = CrdInfo(
    group=keys.NETWORKTOPOLOGY_GROUP,
    version=keys.V1ALPHA1,
    kind="NetworkTopology",
    plural="networktopologies",
    singular="networktopology",
    short_names=("nt",),
    namespaced=True,
    spec_model=networktopology.NetworkTopologySpec,
    status_model=networktopology.NetworkTopologyStatus,
    description="Network costs and bandwidth between the zones and regions of a cluster.",
    columns=(
        PrinterColumn("Nodes", ".status.nodeCount", "integer", "Nodes in the topology"),
        PrinterColumn("Calculated", ".status.weightCalculationTime", "date", "When the costs were computed"),
        PrinterColumn("ConfigMap", ".spec.configmapName", priority=1),
        _AGE,
    ),
)

NODESLO_CRD: Final = CrdInfo(
    group=keys.SLO_GROUP,
    version=keys.V1ALPHA1,
    kind="NodeSLO",
    plural="nodeslos",
    singular="nodeslo",
    short_names=("nslo",),
    namespaced=False,
    spec_model=nodeslo.NodeSLOSpec,
    status_model=nodeslo.NodeSLOStatus,
    spec_required=False,
    description="Per-node service level objectives (Koordinator); netaware renders network QoS.",
    columns=(
        PrinterColumn("Bandwidth", ".status.networkQOS.totalNetworkBandwidth", description="Node total, bits/s"),
        PrinterColumn("Source", ".status.networkQOS.totalSource", priority=1),
        PrinterColumn("Valid", '.status.conditions[?(@.type=="NetworkQOSConfigValid")].status'),
        _AGE,
    ),
)

ALL_CRDS: Final = (APPGROUP_CRD, NETWORKTOPOLOGY_CRD, NODESLO_CRD)

_DROPPED_KEYS = frozenset({"title", "discriminator", "examples"})


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of a model, as a CRD needs it."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    definitions = raw.pop("$defs", {})
    cleaned: dict[str, Any] = _clean(raw, definitions)
    return cleaned


def _clean(node: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_clean(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
        merged = {**target, **{key: value for key, value in node.items() if key != "$ref"}}
        return _clean(merged, definitions)
    any_of = node.get("anyOf")
    if isinstance(any_of, list):
        options = [option for option in any_of if option != {"type": "null"}]
        if len(options) == 1 and len(options) != len(any_of):
            rest = {key: value for key, value in node.items() if key != "anyOf"}
            return _clean({**options[0], **rest}, definitions)
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS or (key == "default" and value is None):
            continue
        if key == "const":
            result["enum"] = [value]
            continue
        if key == "additionalProperties" and value is True:
            result["x-kubernetes-preserve-unknown-fields"] = True
            continue
        if key == "additionalProperties" and value is False:
            continue
        if key == "properties":
            result[key] = {name: _clean(child, definitions) for name, child in value.items()}
            continue
        result[key] = _clean(value, definitions)
    if "enum" in result and "type" not in result:
        result["type"] = "string"
    return result


def custom_resource_definition(info: CrdInfo) -> dict[str, Any]:
    """The whole ``apiextensions.k8s.io/v1`` CustomResourceDefinition for one kind."""
    spec_schema = structural_schema(info.spec_model)
    status_schema = structural_schema(info.status_model)
    top: dict[str, Any] = {
        "type": "object",
        "description": info.description,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema,
            "status": status_schema,
        },
    }
    if info.spec_required:
        top["required"] = ["spec"]
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": f"{info.kind}List",
        "plural": info.plural,
        "singular": info.singular,
        "shortNames": list(info.short_names),
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": info.name,
            "labels": {"app.kubernetes.io/part-of": "netaware"},
        },
        "spec": {
            "group": info.group,
            "names": names,
            "scope": "Namespaced" if info.namespaced else "Cluster",
            "versions": [
                {
                    "name": info.version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": top},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [column.to_wire() for column in info.columns],
                }
            ],
        },
    }
