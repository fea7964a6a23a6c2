"""The NodeSLO controller (real kopf) against the emulator."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from operators.api.config.controllers import ControllerOptions, NodeSLOOptions
from operators.emulator import ApiEmulator
from tests.integration.conftest import Api
from tests.integration.kopf_harness import running_operator
from tests.support.emulated import documents, eventually, reasons_posted

pytestmark = pytest.mark.integration

RESOURCE = "slo.koordinator.sh/v1alpha1/nodeslos"
PATH = "/apis/slo.koordinator.sh/v1alpha1/nodeslos"
CM = "/api/v1/namespaces/koordinator-system/configmaps/slo-controller-config"


def slo(emulator: ApiEmulator, name: str) -> dict[str, Any]:
    return emulator.get_object(RESOURCE, None, name) or {}


def ls_ingress(emulator: ApiEmulator, name: str) -> str:
    return (
        (slo(emulator, name).get("status", {}).get("networkQOS") or {})
        .get("classes", {})
        .get("ls", {})
        .get("ingressRequest", "")
    )


def valid(emulator: ApiEmulator, name: str) -> dict[str, Any]:
    conditions = slo(emulator, name).get("status", {}).get("conditions", [])
    return next((c for c in conditions if c["type"] == "NetworkQOSConfigValid"), {})


def qos_config(ls_percent: int) -> str:
    config = json.loads(documents("slo-controller-config.yaml")[0]["data"]["resource-qos-config"])
    config["clusterStrategy"]["lsClass"]["networkQOS"]["ingressRequest"] = ls_percent
    return json.dumps(config)


async def test_nodeslo_lifecycle(api: Api, emulator: ApiEmulator) -> None:
    cluster = [d for d in documents("cluster.yaml") if d["kind"] == "Namespace" or d["metadata"]["name"] != "n-8"]
    await emulator.seed(cluster)
    async with running_operator(emulator.base_url, ("nodeslo",)):
        # 1. nodes and the ConfigMap: one NodeSLO per node, absolute bandwidth in status
        await api.call(
            "POST", "/api/v1/namespaces/koordinator-system/configmaps", documents("slo-controller-config.yaml")[0]
        )
        # (a node rendered before the ConfigMap arrived has "0": wait for the configuration, not any value)
        await eventually(lambda: all(ls_ingress(emulator, f"n-{i}") not in ("", "0") for i in range(1, 8)))
        assert ls_ingress(emulator, "n-1") == "300M"  # 30 % of the node's 1G annotation
        assert ls_ingress(emulator, "n-5") == "3G"  # 30 % of 10G
        assert slo(emulator, "n-5")["status"]["networkQOS"]["classes"]["be"]["ingressRequest"] == "500M"  # east: 5 %
        assert slo(emulator, "n-1")["spec"]["resourceQOSStrategy"]["lsClass"]["networkQOS"]["ingressRequest"] == 30

        # 2. a percentage is edited
        await api.call("PATCH", CM, {"data": {"resource-qos-config": qos_config(40)}}, "application/merge-patch+json")
        await eventually(lambda: ls_ingress(emulator, "n-1") == "400M" and ls_ingress(emulator, "n-7") == "4G")

        # 3. the JSON breaks: last good stays, condition and Event name the key
        await api.call(
            "PATCH", CM, {"data": {"resource-qos-config": '{"clusterStrategy": {'}}, "application/merge-patch+json"
        )
        await eventually(lambda: valid(emulator, "n-1").get("status") == "False")
        assert "resource-qos-config: not valid JSON" in valid(emulator, "n-1")["message"]
        assert ls_ingress(emulator, "n-1") == "400M"
        await reasons_posted(api, "NetworkQOSConfigInvalid", namespace="koordinator-system")

        # 4. it is fixed
        await api.call("PATCH", CM, {"data": {"resource-qos-config": qos_config(25)}}, "application/merge-patch+json")
        await eventually(
            lambda: valid(emulator, "n-1").get("status") == "True" and ls_ingress(emulator, "n-1") == "250M"
        )

        # 5. a node is added
        node8 = next(d for d in documents("cluster.yaml") if d["metadata"]["name"] == "n-8")
        await api.call("POST", "/api/v1/nodes", node8)
        await eventually(lambda: ls_ingress(emulator, "n-8") == "2500M")

        # 6. a node's bandwidth annotation changes (annotation only: upstream would not notice)
        await api.call(
            "PATCH",
            "/api/v1/nodes/n-2",
            {"metadata": {"annotations": {"node.koordinator.sh/network-bandwidth": "2G"}}},
            "application/merge-patch+json",
        )
        await eventually(lambda: ls_ingress(emulator, "n-2") == "500M")
        assert slo(emulator, "n-2")["spec"]["systemStrategy"]["totalNetworkBandwidth"] == "2G"

        # 7. a manual edit of the spec is reverted
        await api.call(
            "PATCH",
            PATH + "/n-3",
            {"spec": {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"ingressRequest": 99}}}}},
            "application/merge-patch+json",
        )
        await eventually(
            lambda: slo(emulator, "n-3")["spec"]["resourceQOSStrategy"]["lsClass"]["networkQOS"]["ingressRequest"] == 25
        )

        # 8. a node is deleted: its NodeSLO goes
        await api.call("DELETE", "/api/v1/nodes/n-4")
        await eventually(lambda: not slo(emulator, "n-4"))
        assert slo(emulator, "n-3")


FOREIGN = {
    "cpuBurstStrategy": {"policy": "auto", "cpuBurstPercent": 1000, "cfsQuotaBurstPeriodSeconds": -1},
    "extensions": {"vendor.example.com": {"tuned": [1, 2, 3]}},
    "resourceQOSStrategy": {
        "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}, "memoryQOS": {"minLimitPercent": 0}},
        "beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}},
        "policies": {"cpuPolicy": "coreSched"},
    },
    "systemStrategy": {"memcgReapBackGround": 1, "minFreeKbytesFactor": 100},
}


def foreign_part(spec: dict[str, Any]) -> dict[str, Any]:
    """Everything of a NodeSLO spec netaware does not own, as it stands."""
    result = json.loads(json.dumps(spec))
    strategy = result.get("resourceQOSStrategy") or {}
    for name in ("lsrClass", "lsClass", "beClass", "systemClass"):
        (strategy.get(name) or {}).pop("networkQOS", None)
        if strategy.get(name) == {}:  # a class netaware added only to hold its networkQOS
            del strategy[name]
    strategy.get("policies", {}).pop("netQOSPolicy", None)
    (result.get("systemStrategy") or {}).pop("totalNetworkBandwidth", None)
    return {key: value for key, value in result.items() if value not in ({}, None)}


async def test_fields_netaware_does_not_own_survive_byte_for_byte(api: Api, emulator: ApiEmulator) -> None:
    """Koordinator (or anyone) wrote cpu burst, cpu QoS, extensions...: create, update and revert cycles of the
    network part leave them exactly as they were."""
    await emulator.seed(
        [d for d in documents("cluster.yaml") if d["kind"] == "Namespace" or d["metadata"]["name"] == "n-1"]
    )
    status, _ = await api.call(
        "POST",
        PATH,
        {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": "n-1"}, "spec": FOREIGN},
    )
    assert status == 201
    async with running_operator(emulator.base_url, ("nodeslo",)):
        await api.call(
            "POST", "/api/v1/namespaces/koordinator-system/configmaps", documents("slo-controller-config.yaml")[0]
        )
        await eventually(lambda: ls_ingress(emulator, "n-1") == "300M")
        spec = slo(emulator, "n-1")["spec"]
        assert spec["resourceQOSStrategy"]["lsClass"]["networkQOS"]["ingressRequest"] == 30  # ours, written
        assert foreign_part(spec) == FOREIGN  # theirs, untouched

        # an update of the configuration, then a manual edit of our field that is reverted
        await api.call("PATCH", CM, {"data": {"resource-qos-config": qos_config(40)}}, "application/merge-patch+json")
        await eventually(lambda: ls_ingress(emulator, "n-1") == "400M")
        await api.call(
            "PATCH",
            PATH + "/n-1",
            {"spec": {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"ingressRequest": 99}}}}},
            "application/merge-patch+json",
        )
        await eventually(
            lambda: slo(emulator, "n-1")["spec"]["resourceQOSStrategy"]["lsClass"]["networkQOS"]["ingressRequest"] == 40
        )
        # someone else changes their own field meanwhile: it stays as they wrote it
        await api.call(
            "PATCH",
            PATH + "/n-1",
            {"spec": {"cpuBurstStrategy": {"cpuBurstPercent": 500}}},
            "application/merge-patch+json",
        )
        await api.call("PATCH", CM, {"data": {"resource-qos-config": qos_config(20)}}, "application/merge-patch+json")
        await eventually(lambda: ls_ingress(emulator, "n-1") == "200M")
        expected = json.loads(json.dumps(FOREIGN))
        expected["cpuBurstStrategy"]["cpuBurstPercent"] = 500
        assert foreign_part(slo(emulator, "n-1")["spec"]) == expected


async def test_koordinator_owned_nodeslos_get_status_only(api: Api, emulator: ApiEmulator) -> None:
    """`--nodeslo-spec-owner koordinator` (the chart with crds.nodeSLO=false): the spec is never written and no
    NodeSLO is created for a node Koordinator has not created one for."""
    nodes = [
        d for d in documents("cluster.yaml") if d["kind"] == "Namespace" or d["metadata"]["name"] in ("n-1", "n-2")
    ]
    await emulator.seed(nodes)
    await api.call(
        "POST",
        PATH,
        {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": "n-1"}, "spec": FOREIGN},
    )
    options = NodeSLOOptions(spec_owner="koordinator")
    before = len(emulator.writes)
    async with running_operator(emulator.base_url, ("nodeslo",), ControllerOptions(nodeslo=options)):
        await api.call(
            "POST", "/api/v1/namespaces/koordinator-system/configmaps", documents("slo-controller-config.yaml")[0]
        )
        await eventually(lambda: ls_ingress(emulator, "n-1") == "300M")
        await asyncio.sleep(1)
        assert slo(emulator, "n-1")["spec"] == FOREIGN
        assert slo(emulator, "n-2") == {}
    ours = emulator.writes[before:]
    assert not [w for w in ours if w[2] == "nodeslos" and w[5] is None]  # no write to the main resource
