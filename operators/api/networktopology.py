"""NetworkTopology, ``networktopology.diktyo.x-k8s.io/v1alpha1`` (current upstream field names).

The seeds and old upstream examples use other names; :func:`convert_legacy_names`
rewrites them on input (the CRD itself stores only current names) and says what it did.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field

from operators.api import keys
from operators.api.meta import ApiModel, Condition, NamespacedMeta, Timestamp
from operators.api.quantity import QuantityField

API_VERSION: Final = f"{keys.NETWORKTOPOLOGY_GROUP}/{keys.V1ALPHA1}"
KIND: Final = "NetworkTopology"


class CostInfo(ApiModel):
    destination: str
    network_cost: int = Field(ge=0)
    bandwidth_capacity: QuantityField | None = None
    bandwidth_allocated: QuantityField | None = None
    is_allowed: bool | None = None  # networktopology-api v1.0.4-alpha and later


class OriginInfo(ApiModel):
    origin: str
    cost_list: list[CostInfo] | None = None


class TopologyInfo(ApiModel):
    topology_key: str
    origin_list: list[OriginInfo]


class WeightInfo(ApiModel):
    name: str
    topology_list: list[TopologyInfo]


class NetworkTopologySpec(ApiModel):
    configmap_name: str
    weights: list[WeightInfo]


class MissingCost(ApiModel):
    topology_key: str
    origin: str
    destination: str


class NetperfSummary(ApiModel):
    """What the last computation ingested."""

    config_maps: list[str]
    measurements: int = Field(ge=0)
    skipped: int = Field(ge=0)
    skipped_entries: list[str] | None = None  # the first few, "<configmap>/<key>: <reason>"


class NetworkTopologyStatus(ApiModel):
    node_count: int | None = Field(default=None, ge=0)
    weight_calculation_time: Timestamp | None = None
    # netaware additions
    netperf: NetperfSummary | None = None
    missing_costs: list[MissingCost] | None = None
    conditions: list[Condition] | None = None
    observed_generation: int | None = Field(default=None, ge=0)


class NetworkTopology(ApiModel):
    api_version: Literal["networktopology.diktyo.x-k8s.io/v1alpha1"] = "networktopology.diktyo.x-k8s.io/v1alpha1"
    kind: Literal["NetworkTopology"] = KIND
    metadata: NamespacedMeta
    spec: NetworkTopologySpec
    status: NetworkTopologyStatus | None = None


# Old field name -> current one, per nesting level (docs/design/contracts.md).
_LEGACY_SPEC = {"configMapName": "configmapName"}
_LEGACY_WEIGHT = {"costList": "topologyList"}
_LEGACY_TOPOLOGY = {"originCosts": "originList"}
_LEGACY_ORIGIN = {"costs": "costList"}
_LEGACY_COST = {"bandwidthAllocatable": "bandwidthAllocated"}


def convert_legacy_names(spec: dict[str, Any], path: str = "spec") -> tuple[dict[str, Any], list[str]]:
    """Rewrite old NetworkTopology field names to current ones; return the new spec and one note per rename."""
    notes: list[str] = []

    def rename(node: Any, table: dict[str, str], where: str) -> Any:
        if not isinstance(node, dict):
            return node
        result = dict(node)
        for old, new in table.items():
            if old in result:
                if new in result:
                    notes.append(f"{where}.{old}: ignored, {where}.{new} is also set")
                    del result[old]
                else:
                    result[new] = result.pop(old)
                    notes.append(f"{where}.{old} is an old field name, read as {where}.{new}")
        return result

    def each(items: Any, fn: Any, where: str) -> Any:
        if not isinstance(items, list):
            return items
        return [fn(item, f"{where}[{index}]") for index, item in enumerate(items)]

    def cost(node: Any, where: str) -> Any:
        return rename(node, _LEGACY_COST, where)

    def origin(node: Any, where: str) -> Any:
        node = rename(node, _LEGACY_ORIGIN, where)
        if isinstance(node, dict) and "costList" in node:
            node["costList"] = each(node["costList"], cost, f"{where}.costList")
        return node

    def topology(node: Any, where: str) -> Any:
        node = rename(node, _LEGACY_TOPOLOGY, where)
        if isinstance(node, dict) and "originList" in node:
            node["originList"] = each(node["originList"], origin, f"{where}.originList")
        return node

    def weight(node: Any, where: str) -> Any:
        node = rename(node, _LEGACY_WEIGHT, where)
        if isinstance(node, dict) and "topologyList" in node:
            node["topologyList"] = each(node["topologyList"], topology, f"{where}.topologyList")
        return node

    converted = rename(spec, _LEGACY_SPEC, path)
    if isinstance(converted, dict) and "weights" in converted:
        converted["weights"] = each(converted["weights"], weight, f"{path}.weights")
    return converted, notes
