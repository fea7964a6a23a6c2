"""NodeSLO network QoS: Koordinator's merge and numbers, validation with last-good semantics."""

from __future__ import annotations

import datetime
import json
from typing import Any

import jsonpatch
import pytest

from operators.api.config.controllers import NodeSLOOptions
from operators.api.quantity import Quantity
from operators.engine.cluster.objects import Node
from operators.engine.status.nodeslo import owned_spec, owned_spec_patch, render_nodeslo
from operators.engine.status.sloconfig import ConfigState, overlay, update_config

NOW = datetime.datetime(2026, 11, 22, 12, tzinfo=datetime.UTC)
QOS, SYSTEM = "resource-qos-config", "system-config"


def node(name: str, region: str = "west", **annotations: str) -> Node:
    return Node.parse(
        {"metadata": {"name": name, "labels": {"topology.kubernetes.io/region": region}, "annotations": annotations}}
    )


def qos(
    ls: dict[str, Any] | None = None, be: dict[str, Any] | None = None, strategies: list[dict[str, Any]] | None = None
) -> str:
    cluster: dict[str, Any] = {}
    if ls is not None:
        cluster["lsClass"] = {"networkQOS": {"enable": True, **ls}}
    if be is not None:
        cluster["beClass"] = {"networkQOS": {"enable": True, **be}}
    return json.dumps({"clusterStrategy": cluster, "nodeStrategies": strategies or []})


def system(total: str, strategies: list[dict[str, Any]] | None = None) -> str:
    return json.dumps({"clusterStrategy": {"totalNetworkBandwidth": total}, "nodeStrategies": strategies or []})


def classes(state: ConfigState, target: Node, options: NodeSLOOptions | None = None) -> dict[str, Any]:
    slo = render_nodeslo(target, state, None, options or NodeSLOOptions(), NOW).to_wire()
    return slo["status"].get("networkQOS", {}).get("classes", {})


def test_koordinator_tc_numbers_percent_and_absolute() -> None:
    nodes = [node("a")]
    percent = update_config(ConfigState(), {QOS: qos(ls={"ingressRequest": 10}), SYSTEM: system("100M")}, nodes)
    absolute = update_config(ConfigState(), {QOS: qos(ls={"ingressRequest": "10M"}), SYSTEM: system("100M")}, nodes)
    for state in (percent, absolute):
        ls = classes(state, nodes[0])["ls"]
        assert Quantity.parse(ls["ingressRequest"]).value() == 10_000_000
        assert ls["ingressLimit"] == "100M"  # a missing limit is 100 %
        assert ls["egressRequest"] == "0"  # a missing request is 0


def test_system_class_gets_the_remainder() -> None:
    state = update_config(
        ConfigState(),
        {QOS: qos(ls={"ingressRequest": 30, "egressRequest": 20}, be={"ingressRequest": 10}), SYSTEM: system("1G")},
        [node("a")],
    )
    system_class = classes(state, node("a"))["system"]
    assert system_class == {
        "ingressRequest": "600M",
        "ingressLimit": "1G",
        "egressRequest": "800M",
        "egressLimit": "1G",
    }


def test_overlay_is_a_json_merge() -> None:
    base = {"lsClass": {"networkQOS": {"enable": True, "ingressRequest": 10, "egressRequest": 10}}, "list": [1, 2]}
    patch = {"lsClass": {"networkQOS": {"ingressRequest": 30, "egressRequest": None}}, "list": [3]}
    assert overlay(base, patch) == {
        "lsClass": {"networkQOS": {"enable": True, "ingressRequest": 30, "egressRequest": 10}},
        "list": [3],
    }


def test_node_strategies_first_match_wins_unmatched_gets_cluster() -> None:
    strategies = [
        {
            "name": "east",
            "nodeSelector": {"matchLabels": {"topology.kubernetes.io/region": "east"}},
            "lsClass": {"networkQOS": {"ingressRequest": 40}},
        },
        {
            "name": "gpu",
            "nodeSelector": {"matchLabels": {"gpu": "yes"}},
            "lsClass": {"networkQOS": {"ingressRequest": 50}},
        },
    ]
    nodes = [node("w"), node("e", region="east")]
    state = update_config(
        ConfigState(),
        {QOS: qos(ls={"ingressRequest": 10, "egressRequest": 5}, strategies=strategies), SYSTEM: system("100M")},
        nodes,
    )
    assert classes(state, nodes[0])["ls"]["ingressRequest"] == "10M"  # cluster strategy
    east = classes(state, nodes[1])["ls"]
    assert east["ingressRequest"] == "40M" and east["egressRequest"] == "5M"  # overlaid on the cluster strategy


def test_total_sources_in_order() -> None:
    state = update_config(ConfigState(), {QOS: qos(ls={"ingressRequest": 10}), SYSTEM: system("100M")}, [node("a")])

    def total(target: Node, default: Quantity | None = None) -> tuple[str, str]:
        slo = render_nodeslo(target, state, None, NodeSLOOptions(default_total=default), NOW).to_wire()
        network = slo["status"].get("networkQOS") or {}
        return network.get("totalNetworkBandwidth", ""), network.get("totalSource", "")

    assert total(node("a")) == ("100M", "system-config")
    assert total(node("b", **{"node.kubernetes.io/network-limit": "2G"})) == ("2G", "node.kubernetes.io/network-limit")
    both = node("c", **{"node.koordinator.sh/network-bandwidth": "5G", "node.kubernetes.io/network-limit": "2G"})
    assert total(both) == ("5G", "node.koordinator.sh/network-bandwidth")
    spec = render_nodeslo(both, state, None, NodeSLOOptions(), NOW).to_wire()["spec"]
    assert spec["systemStrategy"]["totalNetworkBandwidth"] == "5G"  # the annotation overrides system-config
    no_total = update_config(ConfigState(), {QOS: qos(ls={"ingressRequest": 10})}, [node("a")])
    assert (
        render_nodeslo(node("a"), no_total, None, NodeSLOOptions(default_total=Quantity.parse("1G")), NOW).to_wire()[
            "status"
        ]["networkQOS"]["totalSource"]
        == "default"
    )


def test_unknown_total_is_a_condition_not_zeros() -> None:
    state = update_config(ConfigState(), {QOS: qos(ls={"ingressRequest": 10})}, [node("a")])
    status = render_nodeslo(node("a"), state, None, NodeSLOOptions(), NOW).to_wire()["status"]
    assert "networkQOS" not in status
    known = next(c for c in status["conditions"] if c["type"] == "NetworkBandwidthKnown")
    assert known["status"] == "False" and "no bandwidth for node a" in known["message"]
    bad = node("b", **{"node.koordinator.sh/network-bandwidth": "fast"})
    status = render_nodeslo(bad, state, None, NodeSLOOptions(), NOW).to_wire()["status"]
    known = next(c for c in status["conditions"] if c["type"] == "NetworkBandwidthKnown")
    assert known["status"] == "False" and "node.koordinator.sh/network-bandwidth" in known["message"]


@pytest.mark.parametrize("annotation", ["node.koordinator.sh/network-bandwidth", "node.kubernetes.io/network-limit"])
def test_a_bandwidth_annotation_that_does_not_parse_gives_one_answer_in_spec_and_status(annotation: str) -> None:
    """system-config says 1G, the node's annotation says "fast": the status says the total is unknown, and the spec
    carries no system strategy (Koordinator's controller writes none when the annotation does not parse), not
    system-config's 1G."""
    state = update_config(ConfigState(), {QOS: qos(ls={"ingressRequest": 10}), SYSTEM: system("1G")}, [node("a")])
    wire = render_nodeslo(node("b", **{annotation: "fast"}), state, None, NodeSLOOptions(), NOW).to_wire()
    assert "networkQOS" not in wire["status"]
    assert "totalNetworkBandwidth" not in (wire["spec"].get("systemStrategy") or {})
    assert wire["spec"]["resourceQOSStrategy"]["lsClass"]["networkQOS"]["ingressRequest"] == 10  # the rest stays
    good = render_nodeslo(node("c"), state, None, NodeSLOOptions(), NOW).to_wire()
    assert good["spec"]["systemStrategy"]["totalNetworkBandwidth"] == "1G"
    assert good["status"]["networkQOS"]["totalNetworkBandwidth"] == "1G"


GOOD = {QOS: qos(ls={"ingressRequest": 30, "ingressLimit": 80}, be={"ingressRequest": 10}), SYSTEM: system("1G")}
TWO = [
    {"name": "east", "nodeSelector": {"matchLabels": {"topology.kubernetes.io/region": "east"}}},
    {
        "name": "all-east",
        "nodeSelector": {
            "matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["east"]}]
        },
    },
]


@pytest.mark.parametrize(
    ("key", "text", "message"),
    [
        (QOS, '{"clusterStrategy": {', "resource-qos-config: not valid JSON: Expecting"),
        (
            QOS,
            qos(ls={"ingressRequest": 120}),
            "resource-qos-config: clusterStrategy.lsClass.networkQOS.ingressRequest: percent outside 0..100 (got 120)",
        ),
        (
            QOS,
            qos(ls={"ingressRequest": "10Q"}),
            'resource-qos-config: clusterStrategy.lsClass.networkQOS.ingressRequest: not a quantity (got "10Q")',
        ),
        (
            QOS,
            qos(ls={"ingressRequest": 70}, be={"ingressRequest": 40}),
            "resource-qos-config: clusterStrategy.*.networkQOS.ingressRequest: "
            "lsr, ls and be requests sum above 100 percent",
        ),
        (
            QOS,
            qos(ls={"ingressRequest": "700M"}, be={"ingressRequest": "400M"}),
            "lsr, ls and be requests sum above the total 1G",
        ),
        (
            QOS,
            qos(ls={"ingressRequest": 30}, be={"ingressRequest": "100M"}),
            "beClass.networkQOS.ingressRequest: mixes percent and absolute requests in one strategy",
        ),
        (
            QOS,
            qos(ls={"ingressRequest": 30, "ingressLimit": 20}),
            "clusterStrategy.lsClass.networkQOS.ingressLimit: limit below its request 30 (got 20)",
        ),
        (
            QOS,
            qos(ls={"ingressRequest": 30}, strategies=TWO),
            "resource-qos-config: nodeStrategies: node e matches more than one node strategy "
            '(got ["east", "all-east"])',
        ),
        (SYSTEM, system("lots"), "system-config: clusterStrategy.totalNetworkBandwidth: not a quantity"),
    ],
)
def test_invalid_config_keeps_the_last_good_value(key: str, text: str, message: str) -> None:
    nodes = [node("w"), node("e", region="east")]
    good = update_config(ConfigState(), GOOD, nodes)
    assert not good.problems
    bad = update_config(good, {**GOOD, key: text}, nodes)
    assert str(bad.problems[key]).startswith(message) or message in str(bad.problems[key])
    assert bad.configs[key] is good.configs[key]  # the last good value stays in force
    rendered = render_nodeslo(nodes[0], bad, None, NodeSLOOptions(), NOW).to_wire()
    valid = next(c for c in rendered["status"]["conditions"] if c["type"] == "NetworkQOSConfigValid")
    assert valid["status"] == "False" and valid["reason"] == "ConfigRefused"
    assert message in valid["message"] or valid["message"].startswith(message)
    assert rendered["status"]["networkQOS"]["classes"]["ls"]["ingressRequest"] == "300M"  # from the good config
    fixed = update_config(bad, GOOD, nodes)
    assert not fixed.problems


def test_deleting_the_configmap_keeps_the_config() -> None:
    good = update_config(ConfigState(), GOOD, [node("a")])
    assert update_config(good, None, [node("a")]) is good


def test_an_absent_key_takes_its_default() -> None:
    state = update_config(update_config(ConfigState(), GOOD, [node("a")]), {SYSTEM: system("1G")}, [node("a")])
    assert classes(state, node("a"))["ls"]["ingressRequest"] == "0"


def test_a_key_never_valid_keeps_what_the_nodeslo_has() -> None:
    existing = render_nodeslo(node("a"), update_config(ConfigState(), GOOD, [node("a")]), None, NodeSLOOptions(), NOW)
    state = update_config(ConfigState(), {**GOOD, QOS: "{"}, [node("a")])  # e.g. after an operator restart
    again = render_nodeslo(node("a"), state, existing, NodeSLOOptions(), NOW).to_wire()
    assert again["spec"]["resourceQOSStrategy"] == existing.to_wire()["spec"]["resourceQOSStrategy"]


def test_koordinator_owns_the_spec_when_told() -> None:
    existing = render_nodeslo(node("a"), update_config(ConfigState(), GOOD, [node("a")]), None, NodeSLOOptions(), NOW)
    other = update_config(ConfigState(), {QOS: qos(ls={"ingressRequest": 50}), SYSTEM: system("1G")}, [node("a")])
    rendered = render_nodeslo(node("a"), other, existing, NodeSLOOptions(spec_owner="koordinator"), NOW).to_wire()
    assert rendered["spec"] == existing.to_wire()["spec"]
    assert rendered["status"]["networkQOS"]["classes"]["ls"]["ingressRequest"] == "500M"


# --- ownership: only the network-QoS fields are netaware's ---------------------------------------------

FOREIGN_SPEC = {
    "cpuBurstStrategy": {"policy": "auto", "cpuBurstPercent": 1000},
    "extensions": {"someVendor": {"a": [1, 2]}},
    "resourceQOSStrategy": {
        "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}, "networkQOS": {"ingressRequest": 99}},
        "policies": {"cpuPolicy": "coreSched"},
    },
    "systemStrategy": {"memcgReapBackGround": 1},
}


def test_owned_spec_keeps_only_network_fields() -> None:
    assert owned_spec(FOREIGN_SPEC) == {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"ingressRequest": 99}}}}


def test_owned_patch_touches_only_network_fields() -> None:
    wanted = {
        "resourceQOSStrategy": {
            "lsClass": {"cpuQOS": {"enable": False}, "networkQOS": {"ingressRequest": 30}},
            "beClass": {"networkQOS": {"egressLimit": 50}},
            "policies": {"netQOSPolicy": "tc", "cpuPolicy": "none"},
        },
        "systemStrategy": {"totalNetworkBandwidth": "1G"},
    }
    operations = owned_spec_patch({"spec": FOREIGN_SPEC}, wanted)
    assert operations == [
        {"op": "replace", "path": "/spec/resourceQOSStrategy/lsClass/networkQOS", "value": {"ingressRequest": 30}},
        {"op": "add", "path": "/spec/resourceQOSStrategy/beClass", "value": {}},
        {"op": "add", "path": "/spec/resourceQOSStrategy/beClass/networkQOS", "value": {"egressLimit": 50}},
        {"op": "add", "path": "/spec/resourceQOSStrategy/policies/netQOSPolicy", "value": "tc"},
        {"op": "add", "path": "/spec/systemStrategy/totalNetworkBandwidth", "value": "1G"},
    ]
    patched = jsonpatch.apply_patch({"spec": FOREIGN_SPEC}, operations)
    assert patched["spec"]["cpuBurstStrategy"] == FOREIGN_SPEC["cpuBurstStrategy"]
    assert patched["spec"]["extensions"] == FOREIGN_SPEC["extensions"]
    assert patched["spec"]["resourceQOSStrategy"]["lsClass"]["cpuQOS"] == {"enable": True, "groupIdentity": 2}
    assert patched["spec"]["resourceQOSStrategy"]["policies"]["cpuPolicy"] == "coreSched"
    assert patched["spec"]["systemStrategy"]["memcgReapBackGround"] == 1
    assert owned_spec_patch(patched, wanted) == []  # a second pass changes nothing


def test_owned_patch_removes_a_network_field_no_longer_wanted_and_builds_a_missing_spec() -> None:
    assert owned_spec_patch({"spec": FOREIGN_SPEC}, {}) == [
        {"op": "remove", "path": "/spec/resourceQOSStrategy/lsClass/networkQOS"}
    ]
    assert owned_spec_patch({}, {"systemStrategy": {"totalNetworkBandwidth": "2G"}}) == [
        {"op": "add", "path": "/spec", "value": {}},
        {"op": "add", "path": "/spec/systemStrategy", "value": {}},
        {"op": "add", "path": "/spec/systemStrategy/totalNetworkBandwidth", "value": "2G"},
    ]


def test_reconcile_shows_the_nodeslo_as_patched_with_koordinators_fields_kept() -> None:
    """`netaware reconcile` prints what the live controller leaves: its owned fields set, every other one kept."""
    import datetime

    from operators.engine.cluster.snapshot import build_snapshot
    from operators.engine.status.reconcile import reconcile

    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
        "data": {"resource-qos-config": qos(ls={"egressRequest": 30, "egressLimit": 80})},
    }
    slo = {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeSLO",
        "metadata": {"name": "n1", "resourceVersion": "7"},
        "spec": {
            "cpuBurstStrategy": {"policy": "auto", "cpuBurstPercent": 1000},
            "extensions": {"vendor": {"x": 1}},
            "resourceQOSStrategy": {"lsClass": {"cpuQOS": {"enable": True}}, "policies": {"cpuPolicy": "none"}},
            "systemStrategy": {"minFreeKbytesFactor": 100},
        },
    }
    raw_node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "annotations": {"node.koordinator.sh/network-bandwidth": "1G"}},
    }
    written = reconcile(build_snapshot([raw_node, slo, config]), datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC))
    spec = next(o for o in written if o["kind"] == "NodeSLO")["spec"]
    assert spec["cpuBurstStrategy"] == {"policy": "auto", "cpuBurstPercent": 1000}
    assert spec["extensions"] == {"vendor": {"x": 1}}
    assert spec["resourceQOSStrategy"]["lsClass"]["cpuQOS"] == {"enable": True}
    assert spec["resourceQOSStrategy"]["lsClass"]["networkQOS"]["egressRequest"] == 30
    assert spec["resourceQOSStrategy"]["policies"]["cpuPolicy"] == "none"
    assert spec["systemStrategy"] == {"minFreeKbytesFactor": 100, "totalNetworkBandwidth": "1G"}
