"""The CRD models: upstream field names on the wire, round trips, errors with paths, old names."""

from __future__ import annotations

import copy
import pathlib

import pydantic
import pytest
import yaml

from operators.api import errors
from operators.api.appgroup import AppGroup
from operators.api.networktopology import NetworkTopology, convert_legacy_names
from operators.api.nodeslo import NodeSLO

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "hack" / "examples"


def example(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


@pytest.mark.parametrize(
    ("file_name", "model"),
    [
        ("appgroup-a1.yaml", AppGroup),
        ("appgroup-onlineboutique.yaml", AppGroup),
        ("networktopology.yaml", NetworkTopology),
    ],
)
def test_wire_round_trip_keeps_the_object_exactly(file_name: str, model: type[pydantic.BaseModel]) -> None:
    raw = example(file_name)
    assert model.model_validate(raw).to_wire() == raw  # type: ignore[attr-defined]


def test_upstream_field_names() -> None:
    group = AppGroup.model_validate(example("appgroup-a1.yaml"))
    dependency = group.spec.workloads[0].dependencies[0]  # type: ignore[index]
    assert dependency.max_network_cost == 30
    assert dependency.min_bandwidth is not None and dependency.min_bandwidth.value() == 100 * 2**20
    wire = group.to_wire()
    assert set(wire["spec"]) == {"numMembers", "topologySortingAlgorithm", "workloads"}
    assert set(wire["spec"]["workloads"][0]["dependencies"][0]) == {"workload", "minBandwidth", "maxNetworkCost"}
    topology = NetworkTopology.model_validate(example("networktopology.yaml")).to_wire()
    cost = topology["spec"]["weights"][0]["topologyList"][0]["originList"][0]["costList"][0]
    assert set(cost) == {"destination", "networkCost", "bandwidthCapacity"}
    assert "configmapName" in topology["spec"]


def test_a_bad_quantity_is_an_error_with_its_field_path() -> None:
    raw = example("appgroup-a1.yaml")
    raw["spec"]["workloads"][1]["dependencies"][0]["minBandwidth"] = "10Q"
    with pytest.raises(pydantic.ValidationError) as raised:
        AppGroup.model_validate(raw)
    (error,) = errors.from_pydantic(raised.value)
    assert error.path == "spec.workloads[1].dependencies[0].minBandwidth"
    assert error.value == "10Q"
    assert str(error).startswith("spec.workloads[1].dependencies[0].minBandwidth: not a quantity")


def test_nodeslo_keeps_koordinator_fields() -> None:
    raw = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {"name": "n-1"},
        "spec": {
            "cpuBurstStrategy": {"policy": "auto"},
            "resourceQOSStrategy": {
                "lsClass": {
                    "cpuQOS": {"enable": True},
                    "networkQOS": {"enable": True, "ingressRequest": 30, "egressLimit": "100M"},
                }
            },
            "systemStrategy": {"totalNetworkBandwidth": "1G", "minFreeKbytesFactor": 100},
        },
    }
    slo = NodeSLO.model_validate(raw)
    assert slo.spec.resource_qos_strategy is not None
    assert slo.spec.resource_qos_strategy.ls_class.network_qos.ingress_request == 30  # type: ignore[union-attr]
    assert slo.to_wire()["spec"] == raw["spec"]


LEGACY = {
    "configMapName": "netperf-metrics",
    "weights": [
        {
            "name": "UserDefined",
            "costList": [
                {
                    "topologyKey": "topology.kubernetes.io/zone",
                    "originCosts": [
                        {
                            "origin": "z1",
                            "costs": [
                                {
                                    "destination": "z2",
                                    "networkCost": 5,
                                    "bandwidthCapacity": "1Gi",
                                    "bandwidthAllocatable": "100Mi",
                                },
                            ],
                        }
                    ],
                }
            ],
        }
    ],
}


def test_old_networktopology_names_are_converted_with_a_note_per_rename() -> None:
    converted, notes = convert_legacy_names(copy.deepcopy(LEGACY))
    assert converted == {
        "configmapName": "netperf-metrics",
        "weights": [
            {
                "name": "UserDefined",
                "topologyList": [
                    {
                        "topologyKey": "topology.kubernetes.io/zone",
                        "originList": [
                            {
                                "origin": "z1",
                                "costList": [
                                    {
                                        "destination": "z2",
                                        "networkCost": 5,
                                        "bandwidthCapacity": "1Gi",
                                        "bandwidthAllocated": "100Mi",
                                    },
                                ],
                            }
                        ],
                    }
                ],
            }
        ],
    }
    assert notes == [
        "spec.configMapName is an old field name, read as spec.configmapName",
        "spec.weights[0].costList is an old field name, read as spec.weights[0].topologyList",
        "spec.weights[0].topologyList[0].originCosts is an old field name, "
        "read as spec.weights[0].topologyList[0].originList",
        "spec.weights[0].topologyList[0].originList[0].costs is an old field name, "
        "read as spec.weights[0].topologyList[0].originList[0].costList",
        "spec.weights[0].topologyList[0].originList[0].costList[0].bandwidthAllocatable is an old field name, "
        "read as spec.weights[0].topologyList[0].originList[0].costList[0].bandwidthAllocated",
    ]


def test_current_names_pass_through_unchanged() -> None:
    spec = example("networktopology.yaml")["spec"]
    converted, notes = convert_legacy_names(copy.deepcopy(spec))
    assert converted == spec
    assert notes == []
