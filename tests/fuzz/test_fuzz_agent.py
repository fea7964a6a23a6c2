"""The node agent's pure core under hostile input: pods with any labels, annotations, addresses and QoS classes,
NodeSLOs with any networkQOS values, nodes with any bandwidth annotations. The plan is made or refused with its
reasons, never raised; what it asks of the kernel is a tree the kernel accepts (every class under an existing
parent, rate <= ceil, positive rates), and applying it twice changes nothing."""

from __future__ import annotations

from typing import Any

import pydantic
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from operators.api.nodeslo import NodeSLO
from operators.engine.cluster.objects import Node, Pod
from operators.engine.enforcement.changes import DeviceState, changes, wanted_classes
from operators.engine.enforcement.plan import ROOT_MINOR, node_plan
from operators.engine.enforcement.terway import CgroupLayout, terway_files
from tests.engine.terway_qos_reference import applied_priority, read_global_config, read_pod_config
from tests.fuzz.strategies import json_values, maybe, node_annotations, pods, quantities

addresses = st.one_of(
    st.sampled_from(["10.0.0.1", "10.0.0.2", "10.0.0.1", "fd00::1", "", "999.1.1.1", "10.0.0.1/24"]),
    st.ip_addresses(v=4).map(str),
    st.text(max_size=20),
    json_values,
)
qos_labels = st.sampled_from(["SYSTEM", "LSE", "LSR", "LS", "BE", "ls", "GOLD", ""]) | st.text(max_size=8)
network_qos = st.dictionaries(
    st.sampled_from(["enable", "ingressRequest", "ingressLimit", "egressRequest", "egressLimit"]),
    st.one_of(quantities, st.integers(min_value=-(2**40), max_value=2**40), json_values),
    max_size=5,
)
strategies = st.fixed_dictionaries(
    {},
    optional={
        name: maybe(st.fixed_dictionaries({"networkQOS": maybe(network_qos)}))
        for name in ("lsrClass", "lsClass", "beClass", "systemClass")
    },
)


@st.composite
def agent_pods(draw: st.DrawFn) -> dict[str, Any]:
    raw = draw(pods(node_names=("n1", "n2")))
    if isinstance(raw.get("status"), dict):
        raw["status"] = {**raw["status"], "podIP": draw(addresses), "qosClass": draw(maybe(qos_labels))}
    if isinstance(raw.get("metadata"), dict) and draw(st.booleans()):
        raw["metadata"] = {**raw["metadata"], "labels": {"koordinator.sh/qosClass": draw(qos_labels)}}
    if isinstance(raw.get("spec"), dict):
        raw["spec"] = {**raw["spec"], "hostNetwork": draw(maybe(st.booleans()))}
    return raw


def parsed(raw: Any, kind: Any) -> Any:
    try:
        return kind.parse(raw)
    except Exception:  # an unreadable object is dropped by the snapshot before the plan sees it
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(agent_pods(), max_size=6),
    maybe(strategies),
    maybe(st.fixed_dictionaries({}, optional={"totalNetworkBandwidth": st.one_of(quantities, json_values)})),
    node_annotations,
)
@example([], {}, {}, {"node.koordinator.sh/network-bandwidth": "0"})  # found by this test: a root of 0 bits/s
@example(  # found by this test: a NodeSLO request out of a quantity's range raised
    [],
    {"lsrClass": {"networkQOS": {"ingressRequest": "9223372036854775808"}}},
    {},
    {"node.koordinator.sh/network-bandwidth": "10000"},
)
def test_the_plan_is_made_or_refused_never_raised_and_the_kernel_would_accept_it(
    raw_pods: list[Any], qos: Any, system: Any, annotations: dict[str, str]
) -> None:
    node = Node.parse({"metadata": {"name": "n1", "annotations": annotations}})
    try:
        slo = NodeSLO.model_validate(
            {"metadata": {"name": "n1"}, "spec": {"resourceQOSStrategy": qos, "systemStrategy": system}}
        )
    except pydantic.ValidationError:
        slo = None  # the API server's schema (and the cache) would not hand it over
    members = [pod for pod in (parsed(raw, Pod) for raw in raw_pods) if pod is not None]
    plan = node_plan(node, slo, members)
    if not plan.directions:
        assert plan.problems  # nothing shaped: always with the reason
        return
    for direction in plan.directions.values():
        tree = wanted_classes(direction)
        assert all(k.parent in tree or k.minor == ROOT_MINOR for k in tree.values())
        assert all(0 < k.rate <= k.ceil for k in tree.values())
        assert len({pod.ip for pod in direction.pods}) == len(direction.pods)  # one leaf per address
        built = changes(direction, DeviceState({}, {}))
        held = DeviceState(tree, {pod.ip: pod.minor for pod in direction.pods})
        assert len(built) == len(tree) + len(direction.pods)
        assert changes(direction, held) == []
    # the terway-qos backend's files from the same plan, read by terway-qos's own rules: written only when
    # terway-qos accepts them (else the reason is reported), one pod.json entry per pod with a UID
    files, problems = terway_files(plan, CgroupLayout())
    if not files:
        assert problems and all("cannot be expressed for terway-qos" in problem for problem in problems)
        return
    levels = read_global_config(files["global_bps_config"])
    assert all(level.l0_min <= level.hw_guaranteed for level in levels.values())
    entries = read_pod_config(files["pod.json"])
    assert len(entries) + len(problems) == len(plan.directions["egress"].pods)
    assert all(applied_priority(entry) is not None for entry in entries.values())
