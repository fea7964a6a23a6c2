"""kube-scheduler 1.37's own unit tables for PodTopologySpread, translated: the engine's
:mod:`operators.engine.cluster.kube.spread` is held to upstream's expected results.

Source: ``k8s.io/kubernetes@v1.37.2/pkg/scheduler/framework/plugins/podtopologyspread/filtering_test.go`` and
``scoring_test.go``; each case is named after upstream's and its expectation is upstream's: which nodes pass
(``Unschedulable``: :data:`~spread.SKEW`; ``UnschedulableAndUnresolvable``: :data:`~spread.MISSING_LABEL`), the
PreFilter counts per domain (``TpValueToMatchNum``), after AddPod/RemovePod too, the PreScore state (the normalising
weights, ``log(domains + 2)``, and the ignored nodes) and the scores after normalisation.

How upstream's fixtures read here: a pod without a namespace is in ``default``; the filter tables run with
``defaultingType: List`` and no default constraints (``defaults=()``), the score table with ``System``
(``defaults=None``); the default selector a Service or ReplicaSet of the case gives is passed as
:attr:`PlacedPods.selectors`. The engine always has the node inclusion policies and ``matchLabelKeys`` on (both
gates are on by default in 1.37); upstream's rows run with a gate off are kept only where the row's expectation is
the same with the gate on (no explicit policy in the row, or no ``matchLabelKeys`` the pod carries): those are marked
"(gate off: same with it on)" below. Left out: "matchLabelKeys ignored when feature gate disabled" (PreFilter and
Score: the pod carries the key, so the gate changes the result), TestPreFilterDisabled (Filter without PreFilter is an
error upstream; the engine has no such state), the deferred-resize and signature cases (not modelled), the
benchmarks. The two tests at the end are not rows of upstream's tables: they hold the engine to two rules of
upstream's code the tables do not reach (an empty selector counts no placed pod; ``matchLabelKeys`` leave an absent
selector selecting nothing), with the expectation worked out from that code.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from operators.api.selectors import EVERYTHING, Selector, from_label_selector
from operators.engine.cluster.kube import filters, spread
from operators.engine.cluster.kube.spread import MISSING_LABEL, SKEW, SpreadState
from operators.engine.cluster.kube.terms import (
    DO_NOT_SCHEDULE,
    HONOR,
    HOSTNAME,
    IGNORE,
    SCHEDULE_ANYWAY,
    SpreadConstraint,
    scheduling_spec,
)
from operators.engine.cluster.kube.view import PlacedPods
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling.index import ClusterIndex

Raw = dict[str, Any]
SKIP = "PreFilter/PreScore: Skip"
OK = ""  # fwk.Success
ZONE = "topology.kubernetes.io/zone"  # v1.LabelTopologyZone

# -- builders ------------------------------------------------------------------------------------------------------

FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}  # upstream's fooSelector
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}  # barSelector
UNSCHEDULABLE_TAINT = [{"key": "node.kubernetes.io/unschedulable", "value": "", "effect": "NoSchedule"}]


def labels_of(*keys: str, **pairs: str) -> dict[str, str]:
    return {**dict.fromkeys(keys, ""), **pairs}


def node(name: str, labels: Mapping[str, str] | None = None, tainted: bool = False) -> Raw:
    raw: Raw = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})}}
    if tainted:
        raw["spec"] = {"taints": UNSCHEDULABLE_TAINT}
    return raw


def zoned(name: str, zone: str, **extra: str) -> Raw:
    """``node-x`` with ``zone`` and ``node`` labels (upstream's usual node)."""
    return node(name, {"zone": zone, "node": name, **extra})


def constraint(
    skew: int,
    key: str,
    when: str,
    selector: Raw | None,
    min_domains: int | None = None,
    affinity_policy: str | None = None,
    taints_policy: str | None = None,
    match_label_keys: Sequence[str] | None = None,
) -> Raw:
    """upstream's SpreadConstraint(maxSkew, topologyKey, mode, selector, minDomains, policies, matchLabelKeys)."""
    raw: Raw = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when}
    for name, value in (
        ("labelSelector", selector),
        ("minDomains", min_domains),
        ("nodeAffinityPolicy", affinity_policy),
        ("nodeTaintsPolicy", taints_policy),
        ("matchLabelKeys", list(match_label_keys) if match_label_keys else None),
    ):
        if value is not None:
            raw[name] = value
    return raw


def hard(skew: int, key: str, selector: Raw | None, **extra: Any) -> Raw:
    return constraint(skew, key, DO_NOT_SCHEDULE, selector, **extra)


def soft(skew: int, key: str, selector: Raw | None, **extra: Any) -> Raw:
    return constraint(skew, key, SCHEDULE_ANYWAY, selector, **extra)


def pod(
    name: str,
    labels: Mapping[str, str] | None = None,
    on: str = "",
    namespace: str = "default",
    constraints: Sequence[Raw] = (),
    node_selector: Mapping[str, str] | None = None,
    node_affinity: tuple[str, str, Sequence[str]] | None = None,
    tolerate_unschedulable: bool = False,
    terminating: bool = False,
) -> Raw:
    spec: Raw = {"containers": [{"name": "c"}]}
    if on:
        spec["nodeName"] = on
    if constraints:
        spec["topologySpreadConstraints"] = list(constraints)
    if node_selector is not None:
        spec["nodeSelector"] = dict(node_selector)
    if node_affinity is not None:
        key, operator, values = node_affinity
        term = {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    if tolerate_unschedulable:
        spec["tolerations"] = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]
    metadata: Raw = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if terminating:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": spec,
        "status": {"phase": "Running" if on else "Pending"},
    }


def placed(name: str, on: str, *keys: str, namespace: str = "default", terminating: bool = False, **pairs: str) -> Raw:
    """An existing pod ``name`` on ``on`` with labels ``keys`` (value "") and ``pairs``."""
    return pod(name, labels_of(*keys, **pairs), on=on, namespace=namespace, terminating=terminating)


@dataclass
class Cluster:
    placed: PlacedPods
    index: ClusterIndex

    def node(self, name: str) -> Node:
        return self.placed.nodes[name]


def cluster(nodes: Sequence[Raw], pods: Sequence[Raw] = (), selector: Selector | None = None) -> Cluster:
    """The placed pods over ``nodes``; ``selector``: what the case's Service or ReplicaSet selects (the default
    spread selector of the pod; None: the case has none)."""
    snapshot = build_snapshot([*nodes, *pods])
    index = ClusterIndex.build(snapshot)
    hook = (lambda _: selector) if selector is not None else None
    return Cluster(PlacedPods(index.usage, snapshot.node_by_name, snapshot.namespace_by_name, hook), index)


def prefilter(raw: Raw, where: Cluster, defaults: Sequence[SpreadConstraint] | None = ()) -> SpreadState | None:
    found = Pod.parse(raw)
    return spread.prefilter(found, scheduling_spec(found), where.placed, filters.allows, defaults)


def default(skew: int, key: str, when: str) -> SpreadConstraint:
    """A default constraint of the configuration (its selector is the pod's default selector)."""
    return SpreadConstraint(skew, key, EVERYTHING, 1, HONOR, IGNORE, when)


def selects(match_labels: Mapping[str, str] | None = None, selector: Raw | None = None) -> Selector:
    """The default selector a Service (``match_labels``) or a ReplicaSet (``selector``) gives."""
    return from_label_selector(selector if selector is not None else {"matchLabels": dict(match_labels or {})})


FOUR = [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2"), zoned("node-y", "zone2")]


def on_nodes(*spec: tuple[str, str], **pairs: str) -> list[Raw]:
    """Placed pods (name, node) labelled foo="" (and ``pairs``)."""
    return [placed(name, where, "foo", **pairs) for name, where in spec]


# 2/1/0/3 on node-a, node-b, node-x, node-y
SPREAD_2103 = on_nodes(
    ("p-a1", "node-a"),
    ("p-a2", "node-a"),
    ("p-b1", "node-b"),
    ("p-y1", "node-y"),
    ("p-y2", "node-y"),
    ("p-y3", "node-y"),
)

# -- Filter (TestSingleConstraint, TestMultipleConstraints) ---------------------------------------------------------


@dataclass
class FilterCase:
    pod: Raw
    nodes: Sequence[Raw]
    want: Mapping[str, str]  # node -> reason ("" passes)
    pods: Sequence[Raw] = ()


def codes(*reasons: str, names: Sequence[str] = ("node-a", "node-b", "node-x", "node-y")) -> dict[str, str]:
    return dict(zip(names, reasons, strict=True))


P_FOO = labels_of("foo")
P_FOO_BAR = labels_of("foo", "bar")
NODE_LABELLED = [node(name, {"node": name}) for name in ("node-a", "node-b", "node-c")]
FOO_NODES = [
    node("node-a", {"node": "node-a", "foo": ""}),
    node("node-b", {"node": "node-b", "foo": ""}),
    node("node-x", {"node": "node-x", "foo": ""}),
]
POLICY_PODS = on_nodes(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y"))

SINGLE_CONSTRAINT = [
    pytest.param(
        FilterCase(pod("p", P_FOO, constraints=[hard(1, "zone", FOO)]), FOUR, codes(OK, OK, OK, OK)),
        id="no existing pods",
    ),
    pytest.param(
        FilterCase(pod("p", P_FOO, constraints=[hard(1, "zone", BAR)]), FOUR, codes(OK, OK, OK, OK)),
        id="no existing pods, incoming pod doesn't match itself",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", FOO)]),
            FOUR,
            codes(OK, OK, SKEW, SKEW),
            [
                placed("p-a1", "node-a", "foo", namespace="ns1"),
                placed("p-b1", "node-a", "foo", namespace="ns2"),
                placed("p-x1", "node-x", "foo"),
                placed("p-y1", "node-y", "foo"),
            ],
        ),
        id="existing pods in a different namespace do not count",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", None)]),
            FOUR,
            codes(OK, OK, OK, OK),
            on_nodes(("p-x1", "node-x"), ("p-y1", "node-y")),
        ),
        id="existing pods do not match null selector",
    ),
    pytest.param(
        FilterCase(pod("p", P_FOO, constraints=[hard(1, "zone", FOO)]), FOUR, codes(OK, OK, OK, OK), SPREAD_2103),
        id="pods spread across zones as 3/3, all nodes fit",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", FOO)]),
            [
                zoned("node-a", "zone1"),
                node("node-b", {"zon": "zone1", "node": "node-b"}),
                zoned("node-x", "zone2"),
                zoned("node-y", "zone2"),
            ],
            codes(OK, MISSING_LABEL, SKEW, SKEW),
            on_nodes(("p-a1", "node-a"), ("p-b1", "node-b"), ("p-x1", "node-x"), ("p-y1", "node-y")),
        ),
        id="pods spread across zones as 1/2 due to absence of label 'zone' on node-b",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "rack", FOO)]),
            [zoned("node-a", "zone1"), zoned("node-x", "zone2")],
            codes(MISSING_LABEL, MISSING_LABEL, names=("node-a", "node-x")),
        ),
        id="pod cannot be scheduled as all nodes don't have label 'rack'",
    ),
    pytest.param(
        FilterCase(pod("p", P_FOO, constraints=[hard(1, "node", FOO)]), FOUR, codes(SKEW, SKEW, OK, SKEW), SPREAD_2103),
        id="pods spread across nodes as 2/1/0/3, only node-x fits",
    ),
    pytest.param(
        FilterCase(pod("p", P_FOO, constraints=[hard(2, "node", FOO)]), FOUR, codes(SKEW, OK, OK, SKEW), SPREAD_2103),
        id="pods spread across nodes as 2/1/0/3, maxSkew is 2, node-b and node-x fit",
    ),
    pytest.param(
        FilterCase(
            pod("p", labels_of("bar"), constraints=[hard(1, "node", FOO)]), FOUR, codes(SKEW, OK, OK, SKEW), SPREAD_2103
        ),
        id="pods spread across nodes as 2/1/0/3, but pod doesn't match itself",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "node", FOO)], node_affinity=("node", "In", ["node-a", "node-y"])),
            FOUR,
            codes(OK, OK, OK, SKEW),
            SPREAD_2103,
        ),
        id="incoming pod has nodeAffinity, pods spread as 2/~1~/~0~/3, hence node-a fits",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "node", FOO)]),
            [node("node-a", {"node": "node-a"}), node("node-b", {"node": "node-b"})],
            codes(OK, SKEW, names=("node-a", "node-b")),
            [placed("p-a", "node-a", "foo", terminating=True), placed("p-b", "node-b", "foo")],
        ),
        id="terminating Pods should be excluded",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", FOO)], node_affinity=("node", "NotIn", ["node-b"])),
            FOUR,
            codes(OK, OK, SKEW, SKEW),
            on_nodes(("p-b1", "node-b"), ("p-b2", "node-b"), ("p-y1", "node-y")),
        ),
        id="incoming pod has nodeAffinity, pods spread as 0/~2~/0/1, hence node-a fits",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(2, "node", FOO, min_domains=4)]),
            NODE_LABELLED,
            codes(SKEW, SKEW, OK, names=("node-a", "node-b", "node-c")),
            on_nodes(
                ("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"), ("p-b2", "node-b"), ("p-c1", "node-c")
            ),
        ),
        id="pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains < minDomains, then the third "
        "node fits",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(2, "node", FOO, min_domains=2)]),
            NODE_LABELLED,
            codes(OK, OK, OK, names=("node-a", "node-b", "node-c")),
            on_nodes(
                ("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"), ("p-b2", "node-b"), ("p-c1", "node-c")
            ),
        ),
        id="pods spread across nodes as 2/2/1, maxSkew is 2, and the number of domains > minDomains, then the all "
        "nodes fit",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(2, "zone", FOO, min_domains=3)]),
            FOUR,
            codes(SKEW, SKEW, OK, OK),
            on_nodes(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y")),
        ),
        id="pods spread across zone as 2/1, maxSkew is 2 and the number of domains < minDomains, then the third and "
        "fourth nodes fit",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(2, "zone", FOO, min_domains=1)]),
            FOUR,
            codes(OK, OK, OK, OK),
            on_nodes(("p-b1", "node-a"), ("p-b2", "node-b"), ("p-y1", "node-y")),
        ),
        id="pods spread across zone as 2/1, maxSkew is 2 and the number of domains > minDomains, then the all nodes "
        "fit",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "node", FOO)], node_selector={"foo": ""}),
            [*FOO_NODES, node("node-y", {"node": "node-y"})],
            codes(SKEW, SKEW, OK, OK),
            POLICY_PODS,
        ),
        id="NodeAffinityPolicy honored with labelSelectors",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "node", FOO, affinity_policy=IGNORE)], node_selector={"foo": ""}),
            [*FOO_NODES, node("node-y", {"node": "node-y"})],
            codes(SKEW, SKEW, OK, SKEW),
            POLICY_PODS,
        ),
        id="NodeAffinityPolicy ignored with labelSelectors",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "node", FOO)], node_affinity=("foo", "In", [""])),
            [*FOO_NODES, node("node-y", {"node": "node-y"})],
            codes(SKEW, SKEW, OK, OK),
            POLICY_PODS,
        ),
        id="NodeAffinityPolicy honored with nodeAffinity",
    ),
    pytest.param(
        FilterCase(
            pod(
                "p",
                P_FOO,
                constraints=[hard(1, "node", FOO, affinity_policy=IGNORE)],
                node_affinity=("foo", "In", [""]),
            ),
            [*FOO_NODES, node("node-y", {"node": "node-y"})],
            codes(SKEW, SKEW, OK, SKEW),
            POLICY_PODS,
        ),
        id="NodeAffinityPolicy ignored with labelSelectors #2",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "node", FOO, taints_policy=HONOR)]),
            [*FOO_NODES, node("node-y", {"node": "node-y"}, tainted=True)],
            codes(SKEW, SKEW, OK, OK),
            POLICY_PODS,
        ),
        id="NodeTaintsPolicy honored",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "node", FOO)]),
            [*FOO_NODES, node("node-y", {"node": "node-y"}, tainted=True)],
            codes(SKEW, SKEW, OK, SKEW),
            POLICY_PODS,
        ),
        id="NodeTaintsPolicy ignored",
    ),
]

ZONE_AND_NODE = [hard(1, "zone", FOO), hard(1, "node", FOO)]
ZONE_FOO_NODE_BAR = [hard(1, "zone", FOO), hard(1, "node", BAR)]
THREE_ZONE_POLICY_PODS = on_nodes(("p-a1", "node-a"), ("p-b1", "node-b"), ("p-y1", "node-y"))

MULTIPLE_CONSTRAINTS = [
    pytest.param(
        FilterCase(pod("p", P_FOO, constraints=ZONE_AND_NODE), FOUR, codes(SKEW, SKEW, OK, SKEW), SPREAD_2103),
        id="two Constraints on zone and node, spreads = [3/3, 2/1/0/3]",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=ZONE_AND_NODE),
            FOUR,
            codes(SKEW, SKEW, SKEW, SKEW),
            [*SPREAD_2103, placed("p-y4", "node-y", "foo")],
        ),
        id="two Constraints on zone and node, spreads = [3/4, 2/1/0/4]",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO_BAR, constraints=ZONE_FOO_NODE_BAR),
            FOUR,
            codes(SKEW, SKEW, OK, SKEW),
            [placed("p-a1", "node-a", "foo"), placed("p-y1", "node-y", "bar")],
        ),
        id="Constraints hold different labelSelectors, spreads = [1/0, 1/0/0/1]",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO_BAR, constraints=ZONE_FOO_NODE_BAR),
            FOUR,
            codes(SKEW, SKEW, SKEW, SKEW),
            [placed("p-a1", "node-a", "foo"), placed("p-x1", "node-x", "bar"), placed("p-y1", "node-y", "bar")],
        ),
        id="Constraints hold different labelSelectors, spreads = [1/0, 0/0/1/1]",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO_BAR, constraints=ZONE_FOO_NODE_BAR),
            FOUR,
            codes(SKEW, OK, SKEW, SKEW),
            [
                placed("p-a1", "node-a", "foo"),
                placed("p-a2", "node-a", "foo", "bar"),
                placed("p-y1", "node-y", "foo"),
                placed("p-y2", "node-y", "foo", "bar"),
                placed("p-y3", "node-y", "foo"),
            ],
        ),
        id="Constraints hold different labelSelectors, spreads = [2/3, 1/0/0/1]",
    ),
    pytest.param(
        FilterCase(
            pod("p", labels_of("bar"), constraints=ZONE_FOO_NODE_BAR),
            FOUR,
            codes(OK, OK, SKEW, SKEW),
            [placed("p-a1", "node-a", "foo"), placed("p-x1", "node-x", "bar"), placed("p-y1", "node-y", "bar")],
        ),
        id="Constraints hold different labelSelectors but pod doesn't match itself on 'zone' constraint",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=ZONE_AND_NODE),
            [
                zoned("node-a", "zone1"),
                zoned("node-b", "zone1"),
                node("node-x", {"zone": "zone2"}),
                zoned("node-y", "zone2"),
            ],
            codes(SKEW, OK, MISSING_LABEL, SKEW),
            [placed("p-a1", "node-a", "foo"), placed("p-y3", "node-y", "foo")],
        ),
        id="two Constraints on zone and node, absence of label 'node' on node-x, spreads = [1/1, 1/0/0/1]",
    ),
    pytest.param(
        FilterCase(
            pod(
                "p",
                P_FOO,
                node_selector={"foo": ""},
                constraints=[hard(1, "zone", FOO), hard(1, "node", FOO, affinity_policy=IGNORE)],
            ),
            [
                zoned("node-a", "zone1", foo=""),
                zoned("node-b", "zone1", foo=""),
                zoned("node-x", "zone2", foo=""),
                zoned("node-y", "zone2"),
            ],
            codes(SKEW, SKEW, OK, SKEW),
            THREE_ZONE_POLICY_PODS,
        ),
        id="two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", FOO, taints_policy=HONOR), hard(1, "node", FOO)]),
            [
                zoned("node-a", "zone1", foo=""),
                zoned("node-b", "zone1", foo=""),
                zoned("node-x", "zone2", foo=""),
                node("node-y", {"zone": "zone2", "node": "node-y"}, tainted=True),
            ],
            codes(SKEW, SKEW, OK, SKEW),
            THREE_ZONE_POLICY_PODS,
        ),
        id="two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO, node_selector={"foo": ""}, constraints=ZONE_AND_NODE),
            [
                zoned("node-a", "zone1", foo=""),
                zoned("node-b", "zone1"),
                zoned("node-x", "zone2", foo=""),
                node("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, tainted=True),
            ],
            codes(SKEW, OK, OK, SKEW),
            THREE_ZONE_POLICY_PODS,
        ),
        id="two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
    ),
    pytest.param(
        FilterCase(
            pod(
                "p",
                P_FOO,
                node_selector={"foo": ""},
                constraints=[hard(1, "zone", FOO, taints_policy=HONOR), hard(1, "node", FOO, affinity_policy=IGNORE)],
            ),
            [
                zoned("node-a", "zone1", foo=""),
                zoned("node-b", "zone1"),
                zoned("node-x", "zone2", foo=""),
                node("node-y", {"zone": "zone2", "node": "node-y", "foo": ""}, tainted=True),
            ],
            codes(SKEW, SKEW, OK, SKEW),
            THREE_ZONE_POLICY_PODS,
        ),
        id="two node inclusion Constraints, zone: honor/honor, node: ignore/ignore",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO_BAR, constraints=[hard(1, "zone", BAR), hard(1, "zone", FOO)]),
            FOUR,
            codes(SKEW, SKEW, OK, OK),
            [
                placed("p-a1", "node-a", "foo", "bar"),
                placed("p-a2", "node-a", "foo"),
                placed("p-b1", "node-b", "foo", "bar"),
                placed("p-y1", "node-y", "foo"),
                placed("p-y2", "node-y", "foo", "bar"),
                placed("p-y3", "node-y", "foo"),
            ],
        ),
        id="two Constraints on zone, spreads = [3/3, 2/1]",
    ),
    pytest.param(
        FilterCase(
            pod("p", P_FOO_BAR, constraints=[hard(1, "zone", BAR), hard(1, "zone", FOO)]),
            FOUR,
            codes(SKEW, SKEW, SKEW, SKEW),
            [
                placed("p-a1", "node-a", "foo", "bar"),
                placed("p-a2", "node-a", "foo"),
                placed("p-b1", "node-b", "foo", "bar"),
                placed("p-y1", "node-y", "foo"),
                placed("p-y2", "node-y", "foo", "bar"),
                placed("p-y3", "node-y", "foo"),
                placed("p-y4", "node-y", "foo"),
            ],
        ),
        id="two Constraints on zone, spreads = [3/4, 2/1]",
    ),
]


@pytest.mark.parametrize("case", SINGLE_CONSTRAINT + MULTIPLE_CONSTRAINTS)
def test_filter(case: FilterCase) -> None:
    where = cluster(case.nodes, case.pods)
    state = prefilter(case.pod, where)
    assert state is not None
    assert {name: spread.check(state, where.node(name)) for name in case.want} == case.want
    # the pipeline reports the same, as PodTopologySpread's, when only that filter runs
    cycle = filters.prefilter(Pod.parse(case.pod), where.placed, where.index.requested, defaults=())
    for name, reason in case.want.items():
        assert filters.failure(cycle, where.node(name), (filters.TOPOLOGY_SPREAD,)) == (
            (spread.NAME, (reason,)) if reason else ("", ())
        )


# -- PreFilter state (TestPreFilterState) --------------------------------------------------------------------------


@dataclass
class StateCase:
    pod: Raw
    nodes: Sequence[Raw]
    # per constraint: (maxSkew, topologyKey, minDomains, nodeAffinityPolicy, nodeTaintsPolicy), TpValueToMatchNum
    want: Sequence[tuple[tuple[int, str, int, str, str], Mapping[str, int]]] | str
    pods: Sequence[Raw] = ()
    defaults: Sequence[SpreadConstraint] = ()
    selector: Selector | None = None


def c(skew: int, key: str, affinity_policy: str = HONOR, taints_policy: str = IGNORE) -> tuple[int, str, int, str, str]:
    return (skew, key, 1, affinity_policy, taints_policy)


FIVE_FOO = on_nodes(("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"), ("p-y1", "node-y"), ("p-y2", "node-y"))
SEVEN_FOO = [*FIVE_FOO, placed("p-y3", "node-y", "foo"), placed("p-y4", "node-y", "foo")]
BAR_PODS = [
    placed("p-a", "node-a", "bar"),
    placed("p-b", "node-b", "bar"),
    placed("p-c", "node-b", "bar"),
    placed("p-d", "node-c"),
]
ABC_FOO = [
    node("node-a", {"node": "node-a", "foo": ""}),
    node("node-b", {"node": "node-b", "foo": ""}),
    node("node-c", {"node": "node-c", "bar": ""}),
]
ABC_TAINTED = [
    node("node-a", {"node": "node-a"}),
    node("node-b", {"node": "node-b"}),
    node("node-c", {"node": "node-c", "bar": ""}, tainted=True),
]
FOO_A = {"foo": "a"}
FOO_A_PODS = [
    pod(name, FOO_A, on=where)
    for name, where in (
        ("p-a1", "node-a"),
        ("p-a2", "node-a"),
        ("p-b1", "node-b"),
        ("p-y1", "node-y"),
        ("p-y2", "node-y"),
    )
]
FOO_BAR_SERVICE = selects({"foo": "bar"})

PREFILTER_STATE = [
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(5, "zone", {"matchLabels": {"foo": "bar"}})]),
            FOUR,
            [(c(5, "zone"), {"zone1": 0, "zone2": 0})],
        ),
        id="clean cluster with one spreadConstraint",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", FOO)]),
            FOUR,
            [(c(1, "zone"), {"zone1": 3, "zone2": 2})],
            FIVE_FOO,
        ),
        id="normal case with one spreadConstraint",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", None)]),
            FOUR,
            [(c(1, "zone"), {"zone1": 0, "zone2": 0})],
            FIVE_FOO,
        ),
        id="normal case with null label selector",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", FOO)]),
            [*FOUR, zoned("node-o", "zone3"), zoned("node-p", "zone3")],
            [(c(1, "zone"), {"zone1": 3, "zone2": 2, "zone3": 0})],
            FIVE_FOO,
        ),
        id="normal case with one spreadConstraint, on a 3-zone cluster",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", FOO)]),
            FOUR,
            [(c(1, "zone"), {"zone1": 2, "zone2": 1})],
            [
                placed("p-a1", "node-a", "foo"),
                placed("p-a2", "node-a", "foo", namespace="ns1"),
                placed("p-b1", "node-b", "foo"),
                placed("p-y1", "node-y", "foo", namespace="ns2"),
                placed("p-y2", "node-y", "foo"),
            ],
        ),
        id="namespace mismatch doesn't count",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=ZONE_AND_NODE),
            FOUR,
            [
                (c(1, "zone"), {"zone1": 3, "zone2": 4}),
                (c(1, "node"), {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}),
            ],
            SEVEN_FOO,
        ),
        id="normal case with two spreadConstraints",
    ),
    pytest.param(
        StateCase(
            pod(
                "p",
                P_FOO,
                constraints=[soft(1, "zone", FOO), hard(1, "zone", FOO), soft(1, "node", FOO), hard(1, "node", FOO)],
            ),
            [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-y", "zone2")],
            [(c(1, "zone"), {"zone1": 3, "zone2": 4}), (c(1, "node"), {"node-a": 2, "node-b": 1, "node-y": 4})],
            SEVEN_FOO,
        ),
        id="soft spreadConstraints should be bypassed",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO_BAR, constraints=ZONE_FOO_NODE_BAR),
            [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-y", "zone2")],
            [(c(1, "zone"), {"zone1": 1, "zone2": 0}), (c(1, "node"), {"node-a": 0, "node-b": 1, "node-y": 0})],
            [placed("p-a", "node-a", "foo"), placed("p-b", "node-b", "bar")],
        ),
        id="different labelSelectors - simple version",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO_BAR, constraints=ZONE_FOO_NODE_BAR),
            [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-y", "zone2")],
            [(c(1, "zone"), {"zone1": 3, "zone2": 4}), (c(1, "node"), {"node-a": 1, "node-b": 0, "node-y": 2})],
            [
                placed("p-a1", "node-a", "foo"),
                placed("p-a2", "node-a", "foo", "bar"),
                placed("p-b1", "node-b", "foo"),
                placed("p-y1", "node-y", "foo"),
                placed("p-y2", "node-y", "foo", "bar"),
                placed("p-y3", "node-y", "foo"),
                placed("p-y4", "node-y", "foo", "bar"),
            ],
        ),
        id="different labelSelectors - complex pods",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=ZONE_AND_NODE, node_affinity=("node", "NotIn", ["node-x"])),
            FOUR,
            [(c(1, "zone"), {"zone1": 3, "zone2": 4}), (c(1, "node"), {"node-a": 2, "node-b": 1, "node-y": 4})],
            SEVEN_FOO,
        ),
        id="two spreadConstraints, and with podAffinity",
    ),
    pytest.param(
        StateCase(
            pod("p", {"foo": "bar", "baz": "kar"}),
            [],
            [(c(3, "node"), {}), (c(5, "rack"), {})],
            defaults=[
                default(3, "node", DO_NOT_SCHEDULE),
                default(2, "node", SCHEDULE_ANYWAY),
                default(5, "rack", DO_NOT_SCHEDULE),
            ],
            selector=FOO_BAR_SERVICE,
        ),
        id="default constraints and a service",
    ),
    pytest.param(
        StateCase(
            pod("p", {"foo": "bar"}), [], SKIP, defaults=[default(3, "node", DO_NOT_SCHEDULE)], selector=EVERYTHING
        ),
        id="default constraints and a service that doesn't match",
    ),
    pytest.param(
        StateCase(
            pod(
                "p",
                {"foo": "bar", "baz": "tar"},
                constraints=[
                    hard(1, "zone", {"matchLabels": {"baz": "tar"}}),
                    soft(2, "planet", {"matchLabels": {"fot": "rok"}}),
                ],
            ),
            [],
            [(c(1, "zone"), {})],
            defaults=[default(2, "node", DO_NOT_SCHEDULE)],
            selector=FOO_BAR_SERVICE,
        ),
        id="default constraints and a service, but pod has constraints",
    ),
    pytest.param(
        StateCase(
            pod("p", {"foo": "bar"}), [], SKIP, defaults=[default(2, "node", SCHEDULE_ANYWAY)], selector=FOO_BAR_SERVICE
        ),
        id="default soft constraints and a service",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=ZONE_AND_NODE),
            FOUR,
            [
                (c(1, "zone"), {"zone1": 3, "zone2": 4}),
                (c(1, "node"), {"node-a": 2, "node-b": 1, "node-x": 0, "node-y": 4}),
            ],
            SEVEN_FOO,
        ),
        id="TpKeyToDomainsNum is calculated when MinDomains is enabled",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "node", BAR)], node_selector={"foo": ""}),
            ABC_FOO,
            [(c(1, "node"), {"node-a": 1, "node-b": 2})],
            BAR_PODS,
        ),
        id="feature gate disabled with NodeAffinityPolicy (gate off: same with it on)",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "node", BAR)], node_selector={"foo": ""}),
            ABC_FOO,
            [(c(1, "node"), {"node-a": 1, "node-b": 2})],
            BAR_PODS,
        ),
        id="NodeAffinityPolicy honored with labelSelectors",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "node", BAR, affinity_policy=IGNORE)], node_selector={"foo": ""}),
            ABC_FOO,
            [(c(1, "node", IGNORE), {"node-a": 1, "node-b": 2, "node-c": 0})],
            BAR_PODS,
        ),
        id="NodeAffinityPolicy ignored with labelSelectors",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "node", BAR)], node_affinity=("foo", "In", [""])),
            ABC_FOO,
            [(c(1, "node"), {"node-a": 1, "node-b": 2})],
            [
                placed("p-a", "node-a", "bar"),
                placed("p-c", "node-b", "bar"),
                placed("p-d", "node-b", "bar"),
                placed("p-e", "node-c"),
            ],
        ),
        id="NodeAffinityPolicy honored with nodeAffinity",
    ),
    pytest.param(
        StateCase(
            pod(
                "p",
                P_FOO,
                constraints=[hard(1, "node", BAR, affinity_policy=IGNORE)],
                node_affinity=("foo", "In", [""]),
            ),
            ABC_FOO,
            [(c(1, "node", IGNORE), {"node-a": 1, "node-b": 2, "node-c": 0})],
            BAR_PODS,
        ),
        id="NodeAffinityPolicy ignored with nodeAffinity",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "node", BAR)]),
            ABC_TAINTED,
            [(c(1, "node"), {"node-a": 1, "node-b": 2, "node-c": 0})],
            BAR_PODS,
        ),
        id="feature gate disabled with NodeTaintsPolicy (gate off: same with it on)",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "node", BAR)]),
            ABC_TAINTED,
            [(c(1, "node"), {"node-a": 1, "node-b": 2, "node-c": 0})],
            BAR_PODS,
        ),
        id="NodeTaintsPolicy ignored",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "node", BAR, taints_policy=HONOR)]),
            ABC_TAINTED,
            [(c(1, "node", HONOR, HONOR), {"node-a": 1, "node-b": 2})],
            BAR_PODS,
        ),
        id="NodeTaintsPolicy honored",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "node", BAR, taints_policy=HONOR)], tolerate_unschedulable=True),
            ABC_TAINTED,
            [(c(1, "node", HONOR, HONOR), {"node-a": 1, "node-b": 2, "node-c": 0})],
            BAR_PODS,
        ),
        id="NodeTaintsPolicy honored with tolerated taints",
    ),
    pytest.param(
        StateCase(
            pod(
                "p",
                P_FOO,
                node_selector={"foo": ""},
                constraints=[hard(1, "zone", FOO), hard(1, "node", FOO, affinity_policy=IGNORE)],
            ),
            [zoned("node-a", "zone1", foo=""), zoned("node-b", "zone1"), zoned("node-x", "zone2", foo="")],
            [(c(1, "zone"), {"zone1": 0, "zone2": 1}), (c(1, "node", IGNORE), {"node-a": 0, "node-b": 2, "node-x": 1})],
            on_nodes(("p-b1", "node-b"), ("p-b2", "node-b"), ("p-x1", "node-x")),
        ),
        id="two node inclusion Constraints, zone: honor/ignore, node: ignore/ignore",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", FOO, taints_policy=HONOR), hard(1, "node", FOO)]),
            [
                zoned("node-a", "zone1", foo=""),
                node("node-b", {"zone": "zone1", "node": "node-b"}, tainted=True),
                zoned("node-x", "zone2", foo=""),
            ],
            [
                (c(1, "zone", HONOR, HONOR), {"zone1": 0, "zone2": 1}),
                (c(1, "node"), {"node-a": 0, "node-b": 2, "node-x": 1}),
            ],
            on_nodes(("p-b1", "node-b"), ("p-b2", "node-b"), ("p-x1", "node-x")),
        ),
        id="two node inclusion Constraints, zone: honor/honor, node: honor/ignore",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, node_selector={"foo": ""}, constraints=ZONE_AND_NODE),
            [
                zoned("node-a", "zone1"),
                node("node-b", {"zone": "zone1", "node": "node-b", "foo": ""}, tainted=True),
                zoned("node-x", "zone2", foo=""),
                zoned("node-y", "zone2"),
            ],
            [(c(1, "zone"), {"zone1": 0, "zone2": 1}), (c(1, "node"), {"node-b": 0, "node-x": 1})],
            on_nodes(("p-a1", "node-a"), ("p-a2", "node-a"), ("p-x1", "node-x"), ("p-y1", "node-y")),
        ),
        id="two node inclusion Constraints, zone: honor/ignore, node: honor/ignore",
    ),
    pytest.param(
        StateCase(
            pod(
                "p",
                P_FOO,
                node_selector={"foo": ""},
                constraints=[hard(1, "zone", FOO, affinity_policy=IGNORE), hard(1, "node", FOO, taints_policy=HONOR)],
            ),
            [
                zoned("node-a", "zone1"),
                node("node-b", {"zone": "zone1", "node": "node-b", "foo": ""}, tainted=True),
                zoned("node-x", "zone2", foo=""),
                zoned("node-y", "zone2", foo=""),
            ],
            [
                (c(1, "zone", IGNORE), {"zone1": 2, "zone2": 3}),
                (c(1, "node", HONOR, HONOR), {"node-x": 2, "node-y": 1}),
            ],
            on_nodes(
                ("p-a1", "node-a"), ("p-a2", "node-a"), ("p-x1", "node-x"), ("p-x2", "node-x"), ("p-y1", "node-y")
            ),
        ),
        id="two node inclusion Constraints, zone: ignore/ignore, node: honor/honor",
    ),
    pytest.param(
        StateCase(
            pod("p", {"foo": "", "bar": "a"}, constraints=[hard(1, "zone", FOO, match_label_keys=["bar"])]),
            FOUR,
            [(c(1, "zone"), {"zone1": 1, "zone2": 1})],
            [
                placed("p-a1", "node-a", "foo"),
                placed("p-a2", "node-a", "foo", bar="a"),
                placed("p-b1", "node-b", "foo"),
                placed("p-y1", "node-y", "foo", bar="a"),
                placed("p-y2", "node-y", "bar"),
            ],
        ),
        id="matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
    ),
    pytest.param(
        StateCase(
            pod("p", FOO_A, constraints=[hard(1, "zone", {}, match_label_keys=["foo"])]),
            FOUR,
            [(c(1, "zone"), {"zone1": 3, "zone2": 2})],
            FOO_A_PODS,
        ),
        id="matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", None, match_label_keys=["bar"])]),
            FOUR,
            [(c(1, "zone"), {"zone1": 0, "zone2": 0})],
            FOO_A_PODS,
        ),
        id="key in matchLabelKeys is ignored when LabelSelector is nil when feature gate enabled",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", None, match_label_keys=["bar"])]),
            FOUR,
            [(c(1, "zone"), {"zone1": 0, "zone2": 0})],
            FOO_A_PODS,
        ),
        id="no pod is matched when LabelSelector is nil when feature gate disabled (gate off: same with it on)",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO, constraints=[hard(1, "zone", FOO, match_label_keys=["bar"])]),
            FOUR,
            [(c(1, "zone"), {"zone1": 3, "zone2": 2})],
            FOO_A_PODS,
        ),
        id="key in matchLabelKeys is ignored when it isn't exist in pod.labels",
    ),
    pytest.param(
        StateCase(
            pod("p", P_FOO_BAR, constraints=[hard(1, "zone", FOO), hard(1, "zone", BAR)]),
            FOUR,
            [(c(1, "zone"), {"zone1": 2, "zone2": 1}), (c(1, "zone"), {"zone1": 1, "zone2": 3})],
            [
                placed("p-a1", "node-a", "foo", "bar"),
                placed("p-b1", "node-b", "foo"),
                placed("p-x1", "node-x", "bar"),
                placed("p-y1", "node-y", "foo", "bar"),
                placed("p-y2", "node-y", "bar"),
            ],
        ),
        id="two spreadConstraints with the same topologyKey",
    ),
    pytest.param(StateCase(pod("p", P_FOO), [zoned("node-a", "zone1")], SKIP), id="skip if not specified"),
]


def _described(state: SpreadState) -> list[tuple[tuple[int, str, int, str, str], dict[str, int]]]:
    return [
        (
            (
                found.max_skew,
                found.topology_key,
                found.min_domains,
                found.node_affinity_policy,
                found.node_taints_policy,
            ),
            dict(counts),
        )
        for found, counts in zip(state.constraints, state.counts, strict=True)
    ]


@pytest.mark.parametrize("case", PREFILTER_STATE)
def test_prefilter_state(case: StateCase) -> None:
    state = prefilter(case.pod, cluster(case.nodes, case.pods, case.selector), case.defaults)
    if case.want == SKIP:
        assert state is None
        return
    assert state is not None
    assert _described(state) == [(shape, dict(counts)) for shape, counts in case.want]


# -- PreFilter state after AddPod / RemovePod -----------------------------------------------------------------------


@dataclass
class UpdateCase:
    pod: Raw
    nodes: Sequence[Raw]
    existing: Sequence[Raw]
    changed: Raw  # the pod added (or removed) on its node
    want: Sequence[Mapping[str, int]]  # TpValueToMatchNum after AddPod (RemovePod)


ZONE_NODE_AB = [zoned("node-a", "zone1"), zoned("node-b", "zone1")]
AFFINITY_NODES = [
    node("node-a", {"zone": "zone1", "node": "node-a", "foo": "bar"}),
    node("node-b", {"zone": "zone2", "node": "node-b", "foo": ""}),
]
TAINT_NODES = [
    node("node-a", {"zone": "zone1", "node": "node-a"}, tainted=True),
    node("node-b", {"zone": "zone2", "node": "node-b"}),
]
ZONE_ONLY = [hard(1, "zone", FOO)]
NODE_ONLY = [hard(1, "node", FOO)]
NOT_BAR = ("foo", "NotIn", ["bar"])
A2_B1 = [placed("p-a2", "node-a", "foo", zone="zone1"), placed("p-b1", "node-b", "foo", zone="zone2")]
A1_B2 = [placed("p-a1", "node-a", "foo", zone="zone1"), placed("p-b2", "node-b", "foo", zone="zone2")]

ADD_POD = [
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=NODE_ONLY),
            ZONE_NODE_AB,
            [],
            placed("p-a1", "node-a", "foo"),
            [{"node-a": 1, "node-b": 0}],
        ),
        id="node a and b both impact current min match",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=NODE_ONLY),
            ZONE_NODE_AB,
            [placed("p-b1", "node-b", "foo")],
            placed("p-a1", "node-a", "foo"),
            [{"node-a": 1, "node-b": 1}],
        ),
        id="only node a impacts current min match",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=NODE_ONLY),
            ZONE_NODE_AB,
            [placed("p-b1", "node-b", "foo")],
            placed("p-a1", "node-a", "foo", namespace="ns1"),
            [{"node-a": 0, "node-b": 1}],
        ),
        id="add a pod in a different namespace doesn't change topologyKeyToMinPodsMap",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=NODE_ONLY),
            ZONE_NODE_AB,
            [placed("p-b1", "node-b", "foo")],
            placed("p-b2", "node-b", "foo"),
            [{"node-a": 0, "node-b": 2}],
        ),
        id="add pod on non-critical node won't trigger re-calculation",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_AND_NODE),
            [zoned("node-a", "zone1"), zoned("node-x", "zone2")],
            [],
            placed("p-a1", "node-a", "foo"),
            [{"zone1": 1, "zone2": 0}, {"node-a": 1, "node-x": 0}],
        ),
        id="node a and x both impact topologyKeyToMinPodsMap on zone and node",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_AND_NODE),
            [zoned("node-a", "zone1"), zoned("node-x", "zone2")],
            [placed("p-x1", "node-x", "foo")],
            placed("p-a1", "node-a", "foo"),
            [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-x": 1}],
        ),
        id="only node a impacts topologyKeyToMinPodsMap on zone and node",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_AND_NODE),
            [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2")],
            on_nodes(("p-b1", "node-b"), ("p-b2", "node-b"), ("p-x1", "node-x")),
            placed("p-a1", "node-a", "foo"),
            [{"zone1": 3, "zone2": 1}, {"node-a": 1, "node-b": 2, "node-x": 1}],
        ),
        id="node a impacts topologyKeyToMinPodsMap on node, node x impacts topologyKeyToMinPodsMap on zone",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO_BAR, constraints=ZONE_FOO_NODE_BAR),
            [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2")],
            [
                placed("p-b1", "node-b", "foo", "bar"),
                placed("p-x1", "node-x", "foo", "bar"),
                placed("p-x2", "node-x", "bar"),
            ],
            placed("p-a1", "node-a", "foo"),
            [{"zone1": 2, "zone2": 1}, {"node-a": 0, "node-b": 1, "node-x": 2}],
        ),
        id="Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on zone",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO_BAR, constraints=ZONE_FOO_NODE_BAR),
            [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2")],
            [placed("p-b1", "node-b", "bar"), placed("p-x1", "node-x", "foo", "bar"), placed("p-x2", "node-x", "bar")],
            placed("p-a1", "node-a", "foo", "bar"),
            [{"zone1": 1, "zone2": 1}, {"node-a": 1, "node-b": 1, "node-x": 2}],
        ),
        id="Constraints hold different labelSelectors, node a impacts topologyKeyToMinPodsMap on both zone and node",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY, node_affinity=NOT_BAR),
            AFFINITY_NODES,
            A2_B1,
            placed("p-a1", "node-a", "foo", zone="zone1"),
            [{"zone2": 1}],
        ),
        id="add a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy disabled (gate "
        "off: same with it on)",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY, node_affinity=NOT_BAR),
            AFFINITY_NODES,
            A2_B1,
            placed("p-a1", "node-a", "foo", zone="zone1"),
            [{"zone2": 1}],
        ),
        id="add a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy enabled",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY),
            AFFINITY_NODES,
            A1_B2,
            placed("p-b1", "node-b", "foo", zone="zone2"),
            [{"zone1": 1, "zone2": 2}],
        ),
        id="add a pod when scheduling node affinity matched pod with NodeInclusionPolicy disabled (gate off: "
        "same with it on)",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY),
            AFFINITY_NODES,
            A1_B2,
            placed("p-b1", "node-b", "foo", zone="zone2"),
            [{"zone1": 1, "zone2": 2}],
        ),
        id="add a pod when scheduling node affinity matched pod with NodeInclusionPolicy enabled",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY),
            AFFINITY_NODES,
            A1_B2,
            placed("p-b1", "node-b", zone="zone2"),
            [{"zone1": 1, "zone2": 1}],
        ),
        id="add a label selector not matched pod when with NodeInclusionPolicy enabled",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY),
            TAINT_NODES,
            A1_B2,
            placed("p-b1", "node-b", "foo", zone="zone2"),
            [{"zone1": 1, "zone2": 2}],
        ),
        id="add a pod when scheduling taint untolerated pod with NodeInclusionPolicy disabled (gate off: same "
        "with it on)",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY, tolerate_unschedulable=True),
            TAINT_NODES,
            A1_B2,
            placed("p-b1", "node-b", "foo", zone="zone2"),
            [{"zone1": 1, "zone2": 2}],
        ),
        id="add a pod when scheduling taint tolerated pod with NodeInclusionPolicy enabled",
    ),
]

X_NODES = [zoned("node-a", "zone1"), zoned("node-b", "zone1"), zoned("node-x", "zone2")]
FOUR_ONE_EACH = on_nodes(("p-a1", "node-a"), ("p-b1", "node-b"), ("p-x1", "node-x"), ("p-y1", "node-y"))

REMOVE_POD = [
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY),
            X_NODES,
            on_nodes(("p-a1", "node-a"), ("p-b1", "node-b"), ("p-x1", "node-x")),
            placed("p-a1", "node-a", "foo"),
            [{"zone1": 1, "zone2": 1}],
        ),
        id="one spreadConstraint on zone, topologyKeyToMinPodsMap unchanged",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY),
            FOUR,
            FOUR_ONE_EACH,
            placed("p-a1", "node-a", "foo"),
            [{"zone1": 1, "zone2": 2}],
        ),
        id="one spreadConstraint on node, topologyKeyToMinPodsMap changed",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY),
            FOUR,
            [placed("p-a0", "node-a", "bar"), *FOUR_ONE_EACH],
            placed("p-a0", "node-a", "bar"),
            [{"zone1": 2, "zone2": 2}],
        ),
        id="delete an irrelevant pod won't help",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY),
            FOUR,
            FOUR_ONE_EACH,
            placed("p-a0", "node-a", "bar"),
            [{"zone1": 2, "zone2": 2}],
        ),
        id="delete a non-existing pod won't help",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_AND_NODE),
            X_NODES,
            on_nodes(
                ("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"), ("p-x1", "node-x"), ("p-x2", "node-x")
            ),
            placed("p-x1", "node-x", "foo"),
            [{"zone1": 3, "zone2": 1}, {"node-a": 2, "node-b": 1, "node-x": 1}],
        ),
        id="two spreadConstraints",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY, node_affinity=NOT_BAR),
            AFFINITY_NODES,
            A2_B1,
            placed("p-a1", "node-a", "foo", zone="zone1"),
            [{"zone2": 1}],
        ),
        id="remove a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy disabled (gate "
        "off: same with it on)",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY, node_affinity=NOT_BAR),
            AFFINITY_NODES,
            A2_B1,
            placed("p-a1", "node-a", "foo", zone="zone1"),
            [{"zone2": 1}],
        ),
        id="remove a pod when scheduling node affinity unmatched pod with NodeInclusionPolicy enabled",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY),
            AFFINITY_NODES,
            A1_B2,
            placed("p-b1", "node-b", "foo", zone="zone2"),
            [{"zone1": 1, "zone2": 0}],
        ),
        id="remove a pod when scheduling node affinity matched pod with NodeInclusionPolicy disabled (gate "
        "off: same with it on)",
    ),
    pytest.param(
        UpdateCase(
            pod("p", P_FOO, constraints=ZONE_ONLY),
            AFFINITY_NODES,
            A1_B2,
            placed("p-b1", "node-b", "foo", zone="zone2"),
            [{"zone1": 1, "zone2": 0}],
        ),
        id="remove a pod when scheduling node affinity matched pod with NodeInclusionPolicy enabled",
    ),
]


@pytest.mark.parametrize(
    ("case", "sign"),
    [pytest.param(p.values[0], 1, id=p.id) for p in ADD_POD]
    + [pytest.param(p.values[0], -1, id=p.id) for p in REMOVE_POD],
)
def test_prefilter_state_add_remove_pod(case: UpdateCase, sign: int) -> None:
    """TestPreFilterStateAddPod (``sign`` 1) and TestPreFilterStateRemovePod (-1): the counts after upstream's
    AddPod/RemovePod of the pod on its node."""
    where = cluster(case.nodes, case.existing)
    state = prefilter(case.pod, where)
    assert state is not None
    changed = Pod.parse(case.changed)
    spread.add_pod(state, changed, where.node(changed.node_name), sign)
    assert [dict(counts) for counts in state.counts] == [dict(counts) for counts in case.want]


# -- PreScore state (TestPreScoreSkip, TestPreScoreStateEmptyNodes) -------------------------------------------------


@dataclass
class PreScoreCase:
    pod: Raw
    nodes: Sequence[Raw]
    # per constraint (maxSkew, topologyKey, policies) and its weight's size (log(size + 2)); the ignored nodes
    want: Sequence[tuple[tuple[int, str, int, str, str], int]] | str
    ignored: frozenset[str] = frozenset()
    defaults: Sequence[SpreadConstraint] | None = ()
    selector: Selector | None = None


HOSTS_ZONES = [
    node("node-a", {"zone": "zone1", HOSTNAME: "node-a"}),
    node("node-b", {"zone": "zone1", HOSTNAME: "node-b"}),
    node("node-x", {"zone": "zone2", HOSTNAME: "node-x"}),
]
FOO_HOSTS = [
    node("node-a", {"zone": "zone1", "foo": "", HOSTNAME: "node-a"}),
    node("node-b", {"zone": "zone1", "foo": "", HOSTNAME: "node-b"}),
]
RS1_FOO = selects(selector=FOO)  # the ReplicaSet rs1 (selector: foo exists) that owns the pod

PRESCORE_STATE = [
    pytest.param(
        PreScoreCase(pod("p"), [node("node-a", {HOSTNAME: "node-a"}), node("node-b", {HOSTNAME: "node-b"})], SKIP),
        id="the pod doesn't have soft topology spread Constraints",
    ),
    pytest.param(
        PreScoreCase(
            pod("p", {"foo": "bar", "baz": "sup"}),
            [node("node-a", {"planet": "mars"})],
            SKIP,
            defaults=[default(2, "planet", SCHEDULE_ANYWAY)],
            selector=EVERYTHING,
        ),
        id="default constraints and a replicaset that doesn't match",
    ),
    pytest.param(
        PreScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "zone", FOO), soft(1, HOSTNAME, FOO)]),
            HOSTS_ZONES,
            [(c(1, "zone"), 2), (c(1, HOSTNAME), 3)],
        ),
        id="normal case",
    ),
    pytest.param(
        PreScoreCase(pod("p", P_FOO, constraints=[soft(1, "zone", None)]), HOSTS_ZONES, [(c(1, "zone"), 2)]),
        id="null selector",
    ),
    pytest.param(
        PreScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "zone", FOO), soft(1, HOSTNAME, BAR)]),
            [*HOSTS_ZONES[:2], node("node-x", {HOSTNAME: "node-x"})],
            [(c(1, "zone"), 1), (c(1, HOSTNAME), 2)],
            frozenset({"node-x"}),
        ),
        id="node-x doesn't have label zone",
    ),
    pytest.param(
        PreScoreCase(
            pod("p", {"foo": "tar", "baz": "sup"}),
            [
                node("node-a", {HOSTNAME: "node-a", ZONE: "mars"}),
                node("node-b", {HOSTNAME: "node-b", ZONE: "mars"}),
                node("node-c", {HOSTNAME: "node-c"}),
                node("node-d", {HOSTNAME: "node-d"}),
            ],
            [(c(3, HOSTNAME), 4), (c(5, ZONE), 2)],
            defaults=None,
            selector=RS1_FOO,
        ),
        id="system default constraints and a replicaset",
    ),
    pytest.param(
        PreScoreCase(
            pod("p", {"foo": "tar", "baz": "sup"}),
            [node("node-a", {"rack": "rack1", HOSTNAME: "node-a", "planet": "mars"})],
            [(c(1, HOSTNAME), 1), (c(2, "planet"), 1)],
            defaults=[
                default(1, HOSTNAME, SCHEDULE_ANYWAY),
                default(2, "rack", DO_NOT_SCHEDULE),
                default(2, "planet", SCHEDULE_ANYWAY),
            ],
            selector=RS1_FOO,
        ),
        id="default constraints and a replicaset",
    ),
    pytest.param(
        PreScoreCase(
            pod(
                "p",
                {"foo": "bar", "baz": "sup"},
                constraints=[hard(1, "zone", BAR), soft(2, "planet", {"matchLabels": {"baz": "sup"}})],
            ),
            [node("node-a", {"planet": "mars", "galaxy": "andromeda"})],
            [(c(2, "planet"), 1)],
            defaults=[default(2, "galaxy", SCHEDULE_ANYWAY)],
            selector=RS1_FOO,
        ),
        id="default constraints and a replicaset, but pod has constraints",
    ),
    pytest.param(
        PreScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "zone", BAR)], node_selector={"foo": ""}),
            [*FOO_HOSTS, node("node-x", {"zone": "zone2", HOSTNAME: "node-x"})],
            [(c(1, "zone"), 2)],
        ),
        id="NodeAffinityPolicy honored with labelSelectors",
    ),
    pytest.param(
        PreScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "zone", BAR, affinity_policy=IGNORE)], node_selector={"foo": ""}),
            [*FOO_HOSTS, node("node-x", {"zone": "zone2", HOSTNAME: "node-x"})],
            [(c(1, "zone", IGNORE), 2)],
        ),
        id="NodeAffinityPolicy ignored with labelSelectors",
    ),
    pytest.param(
        PreScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "zone", BAR)], node_affinity=("foo", "In", [""])),
            [*FOO_HOSTS, node("node-x", {"zone": "zone2", HOSTNAME: "node-x"})],
            [(c(1, "zone"), 2)],
        ),
        id="NodeAffinityPolicy honored with nodeAffinity",
    ),
    pytest.param(
        PreScoreCase(
            pod(
                "p",
                P_FOO,
                constraints=[soft(1, "zone", BAR, affinity_policy=IGNORE)],
                node_affinity=("foo", "In", [""]),
            ),
            [*FOO_HOSTS, node("node-x", {"zone": "zone2", HOSTNAME: "node-x"})],
            [(c(1, "zone", IGNORE), 2)],
        ),
        id="NodeAffinityPolicy ignored with nodeAffinity",
    ),
    pytest.param(
        PreScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "zone", BAR, taints_policy=HONOR)]),
            [*FOO_HOSTS, node("node-x", {"zone": "zone2", HOSTNAME: "node-x"}, tainted=True)],
            [(c(1, "zone", HONOR, HONOR), 2)],
        ),
        id="NodeTaintsPolicy honored",
    ),
    pytest.param(
        PreScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "zone", BAR)]),
            [*FOO_HOSTS, node("node-x", {"zone": "zone2", HOSTNAME: "node-x"}, tainted=True)],
            [(c(1, "zone"), 2)],
        ),
        id="NodeTaintsPolicy ignored",
    ),
]


@pytest.mark.parametrize("case", PRESCORE_STATE)
def test_prescore_state(case: PreScoreCase) -> None:
    """The nodes are all the cluster's and all passed; no pod is placed (every count 0)."""
    where = cluster(case.nodes, (), case.selector)
    found = Pod.parse(case.pod)
    passed = [where.node(raw["metadata"]["name"]) for raw in case.nodes]
    scores = spread.prescore(found, scheduling_spec(found), where.placed, passed, filters.allows, case.defaults)
    if case.want == SKIP:
        assert scores is None
        return
    assert scores is not None
    shapes = [
        (each.max_skew, each.topology_key, each.min_domains, each.node_affinity_policy, each.node_taints_policy)
        for each in scores.constraints
    ]
    assert shapes == [shape for shape, _ in case.want]
    assert list(scores.weights) == [math.log(size + 2) for _, size in case.want]
    assert scores.ignored == case.ignored
    assert all(not any(counts.values()) for counts in scores.counts)


# -- Score (TestPodTopologySpreadScore) ----------------------------------------------------------------------------


@dataclass
class ScoreCase:
    pod: Raw
    nodes: Sequence[Raw]  # the candidates (passed the filters), in the order scored
    want: Sequence[int]
    pods: Sequence[Raw] = ()
    failed: Sequence[Raw] = ()  # the other nodes of the cluster
    selector: Selector | None = None


def hosts(*names: str, **labels: str) -> list[Raw]:
    return [node(name, {HOSTNAME: name, **labels}) for name in names]


def zone_hosts(*spec: tuple[str, str]) -> list[Raw]:
    return [node(name, {"zone": zone, HOSTNAME: name}) for name, zone in spec]


ON_HOST = [soft(1, HOSTNAME, FOO)]
A4_B3_C2_D1 = on_nodes(
    *((f"p-{n}{i}", f"node-{n}") for n, count in (("a", 4), ("b", 3), ("c", 2), ("d", 1)) for i in range(1, count + 1))
)
A4_B2_X1_Y3 = on_nodes(
    *((f"p-{n}{i}", f"node-{n}") for n, count in (("a", 4), ("b", 2), ("x", 1), ("y", 3)) for i in range(1, count + 1))
)
A2_B1_D3 = on_nodes(
    ("p-a1", "node-a"),
    ("p-a2", "node-a"),
    ("p-b1", "node-b"),
    ("p-d1", "node-d"),
    ("p-d2", "node-d"),
    ("p-d3", "node-d"),
)
ABCD = hosts("node-a", "node-b", "node-c", "node-d")
NODE_ABC_FOO = [
    node("node-a", {"node": "node-a", "foo": ""}),
    node("node-b", {"node": "node-b", "foo": ""}),
    node("node-c", {"node": "node-c"}),
]
ABC_TAINTED_C = [
    node("node-a", {"node": "node-a"}),
    node("node-b", {"node": "node-b"}),
    node("node-c", {"node": "node-c"}, tainted=True),
]
A2_B1_C1 = on_nodes(("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"), ("p-c1", "node-c"))
ZONES_ABCD = zone_hosts(("node-a", "zone1"), ("node-b", "zone1"), ("node-c", "zone2"), ("node-d", "zone2"))
ZONES_ABXY = zone_hosts(("node-a", "zone1"), ("node-b", "zone1"), ("node-x", "zone2"), ("node-y", "zone2"))
DIFFERENT_SELECTORS = [soft(1, "zone", FOO), soft(1, HOSTNAME, BAR)]
FOO_BAR_SPREAD = [
    placed("p-a1", "node-a", "foo"),
    placed("p-b1", "node-b", "foo", "bar"),
    placed("p-y1", "node-y", "foo"),
    placed("p-y2", "node-y", "bar"),
]

SCORE = [
    pytest.param(
        ScoreCase(pod("p", P_FOO, constraints=ON_HOST), hosts("node-a", "node-b"), [100, 100]),
        id="one constraint on node, no existing pods",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=ON_HOST),
            hosts("node-a"),
            [100],
            on_nodes(("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b")),
            hosts("node-b"),
        ),
        id="one constraint on node, only one node is candidate",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=ON_HOST),
            hosts("node-a", "node-b"),
            [100, 100],
            on_nodes(("p-a1", "node-a"), ("p-b1", "node-b")),
        ),
        id="one constraint on node, all nodes have the same number of matching pods",
    ),
    pytest.param(
        ScoreCase(pod("p", P_FOO, constraints=ON_HOST), ABCD, [20, 60, 100, 0], A2_B1_D3),
        id="one constraint on node, all 4 nodes are candidates",
    ),
    pytest.param(
        ScoreCase(pod("p", P_FOO, constraints=[soft(1, HOSTNAME, None)]), ABCD, [100, 100, 100, 100], A2_B1_D3),
        id="one constraint on node, null selector",
    ),
    pytest.param(
        ScoreCase(pod("p", P_FOO, constraints=[soft(2, HOSTNAME, FOO)]), ABCD, [33, 66, 100, 16], A2_B1_D3),
        id="one constraint on node, all 4 nodes are candidates, maxSkew=2",
    ),
    pytest.param(
        ScoreCase(pod("p", P_FOO, constraints=[soft(3, HOSTNAME, FOO)]), ABCD, [44, 66, 77, 100], A4_B3_C2_D1),
        id="one constraint on node, all 4 nodes are candidates, maxSkew=3",
    ),
    pytest.param(
        ScoreCase(pod("p", P_FOO), ABCD, [44, 66, 77, 100], A4_B3_C2_D1, selector=selects({"foo": ""})),
        id="system defaulting, nodes don't have zone, pods match service",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=ON_HOST),
            hosts("node-a", "node-b", "node-x"),
            [33, 83, 100],
            A4_B2_X1_Y3,
            hosts("node-y"),
        ),
        id="one constraint on node, 3 out of 4 nodes are candidates",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=ON_HOST),
            [
                node("node-a", {HOSTNAME: "node-a"}),
                node("node-b", {"n": "node-b"}),
                node("node-x", {HOSTNAME: "node-x"}),
            ],
            [16, 0, 100],
            A4_B2_X1_Y3,
            hosts("node-y"),
        ),
        id="one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "zone", FOO)]),
            ZONES_ABXY[:3],
            [75, 75, 100],
            A4_B2_X1_Y3,
            ZONES_ABXY[3:],
        ),
        id="one constraint on zone, 3 out of 4 nodes are candidates",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "zone", FOO), soft(1, HOSTNAME, FOO)]),
            [ZONES_ABXY[0], ZONES_ABXY[2]],
            [100, 63],
            on_nodes(
                *(
                    (f"p-{n}{i}", f"node-{n}")
                    for n, count in (("a", 2), ("b", 1), ("x", 2), ("y", 4))
                    for i in range(1, count + 1)
                )
            ),
            [ZONES_ABXY[1], ZONES_ABXY[3]],
        ),
        id="two Constraints on zone and node, 2 out of 4 nodes are candidates",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO_BAR, constraints=[soft(1, "zone", FOO), soft(1, "zone", BAR)]),
            [node("node-a", {"zone": "zone1"}), node("node-x", {"zone": "zone2"})],
            [85, 100],
            [
                placed("p-a1", "node-a", "foo", "bar"),
                placed("p-a2", "node-a", "foo"),
                placed("p-b1", "node-b", "foo", "bar"),
                placed("p-y1", "node-y", "foo"),
                placed("p-y2", "node-y", "foo", "bar"),
                placed("p-y3", "node-y", "foo"),
            ],
            [node("node-b", {"zone": "zone1"}), node("node-y", {"zone": "zone2"})],
        ),
        id="two Constraints on zone, 2 out of 4 nodes are candidates",
    ),
    pytest.param(
        ScoreCase(pod("p", P_FOO_BAR, constraints=DIFFERENT_SELECTORS), ZONES_ABXY, [60, 20, 100, 60], FOO_BAR_SPREAD),
        id="two Constraints on zone and node, with different labelSelectors",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO_BAR, constraints=DIFFERENT_SELECTORS),
            ZONES_ABXY,
            [100, 60, 40, 0],
            [placed("p-b1", "node-b", "bar"), placed("p-x1", "node-x", "foo"), placed("p-y1", "node-y", "foo", "bar")],
        ),
        id="two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO_BAR, constraints=DIFFERENT_SELECTORS),
            ZONES_ABXY[:3],
            [50, 25, 100],
            FOO_BAR_SPREAD,
            ZONES_ABXY[3:],
        ),
        id="two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=ON_HOST),
            hosts("node-a", "node-b"),
            [100, 33],
            [
                placed("p-a1", "node-a", "foo", namespace="ns1"),
                placed("p-a2", "node-a", "foo"),
                placed("p-b1", "node-b", "foo"),
                placed("p-b2", "node-b", "foo"),
            ],
        ),
        id="existing pods in a different namespace do not count",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=ON_HOST),
            hosts("node-a", "node-b"),
            [100, 0],
            [placed("p-a", "node-a", "foo", terminating=True), placed("p-b", "node-b", "foo")],
        ),
        id="terminating Pods should be excluded",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=[soft(2, "node", FOO, min_domains=10)]),
            NODE_LABELLED,
            [75, 75, 100],
            on_nodes(
                ("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"), ("p-b2", "node-b"), ("p-c1", "node-c")
            ),
        ),
        id="minDomains has no effect when ScheduleAnyway",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "node", FOO)], node_selector={"foo": ""}),
            NODE_ABC_FOO,
            [0, 33, 100],
            A2_B1_C1,
        ),
        id="NodeAffinityPolicy honoed with labelSelectors",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "node", FOO, affinity_policy=IGNORE)], node_selector={"foo": ""}),
            NODE_ABC_FOO,
            [66, 100, 100],
            A2_B1_C1,
        ),
        id="NodeAffinityPolicy ignored with labelSelectors",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "node", FOO)], node_affinity=("foo", "In", [""])),
            NODE_ABC_FOO,
            [0, 33, 100],
            A2_B1_C1,
        ),
        id="NodeAffinityPolicy honoed with nodeAffinity",
    ),
    pytest.param(
        ScoreCase(
            pod(
                "p",
                P_FOO,
                constraints=[soft(1, "node", FOO, affinity_policy=IGNORE)],
                node_affinity=("foo", "In", [""]),
            ),
            NODE_ABC_FOO,
            [66, 100, 100],
            A2_B1_C1,
        ),
        id="NodeAffinityPolicy ignored with nodeAffinity",
    ),
    pytest.param(
        ScoreCase(
            pod("p", P_FOO, constraints=[soft(1, "node", FOO, taints_policy=HONOR)]),
            ABC_TAINTED_C,
            [0, 33, 100],
            A2_B1_C1,
        ),
        id="NodeTaintsPolicy honored",
    ),
    pytest.param(
        ScoreCase(pod("p", P_FOO, constraints=[soft(1, "node", FOO)]), ABC_TAINTED_C, [66, 100, 100], A2_B1_C1),
        id="NodeTaintsPolicy ignored",
    ),
    pytest.param(
        ScoreCase(
            pod(
                "p",
                P_FOO_BAR,
                constraints=[
                    soft(1, "zone", {}, match_label_keys=["foo"]),
                    soft(1, HOSTNAME, {}, match_label_keys=["bar"]),
                ],
            ),
            ZONES_ABCD,
            [60, 20, 60, 100],
            [
                placed("p-a1", "node-a", "foo"),
                placed("p-b1", "node-b", "foo", "bar"),
                placed("p-y1", "node-c", "foo"),
                placed("p-y2", "node-c", "bar"),
            ],
        ),
        id="matchLabelKeys ANDed with LabelSelector when LabelSelector is empty",
    ),
    pytest.param(
        ScoreCase(
            pod(
                "p",
                labels_of("foo", "bar", "baz"),
                constraints=[soft(1, "zone", FOO), soft(1, HOSTNAME, BAR, match_label_keys=["baz"])],
            ),
            ZONES_ABCD,
            [60, 20, 60, 100],
            [
                placed("p-a1", "node-a", "foo"),
                placed("p-b1", "node-b", "foo", "bar", "baz"),
                placed("p-c1", "node-c", "foo"),
                placed("p-c2", "node-c", "bar"),
                placed("p-d3", "node-c", "bar", "baz"),
            ],
        ),
        id="matchLabelKeys ANDed with LabelSelector when LabelSelector isn't empty",
    ),
]


@pytest.mark.parametrize("case", SCORE)
def test_score(case: ScoreCase) -> None:
    """``defaultingType: System``: the pods without constraints of their own get kube-scheduler's defaults."""
    where = cluster([*case.nodes, *case.failed], case.pods, case.selector)
    found = Pod.parse(case.pod)
    passed = [where.node(raw["metadata"]["name"]) for raw in case.nodes]
    scores = spread.prescore(found, scheduling_spec(found), where.placed, passed, filters.allows, None)
    assert scores is not None
    raw = [spread.score(scores, each) for each in passed]
    assert spread.normalize(scores, passed, raw) == list(case.want)


# -- not rows of upstream's tables: two rules of upstream's code the tables do not reach ----------------------------


def test_an_empty_selector_counts_no_placed_pod() -> None:
    """``labelSelector: {}`` (selects everything): upstream's countPodsMatchSelector returns 0 for an empty selector,
    so PreFilter and PreScore count no placed pod (zone1 0, not 3; every node passes: 0 + 1 (the pod matches) - 0 <= 1;
    every node scores the same, 100), while AddPod (updateWithPod, ``Selector.Matches``) does count one."""
    pods = on_nodes(("p-a1", "node-a"), ("p-a2", "node-a"), ("p-b1", "node-b"))
    where = cluster(FOUR, pods)
    state = prefilter(pod("p", P_FOO, constraints=[hard(1, "zone", {})]), where)
    assert state is not None
    assert [dict(counts) for counts in state.counts] == [{"zone1": 0, "zone2": 0}]
    assert {name: spread.check(state, where.node(name)) for name in codes(OK, OK, OK, OK)} == codes(OK, OK, OK, OK)
    spread.add_pod(state, Pod.parse(placed("p-a3", "node-a", "foo")), where.node("node-a"))
    assert [dict(counts) for counts in state.counts] == [{"zone1": 1, "zone2": 0}]
    scored = cluster(hosts("node-a", "node-b", "node-c"), pods)
    found = Pod.parse(pod("p", P_FOO, constraints=[soft(1, HOSTNAME, {})]))
    passed = [scored.node(name) for name in ("node-a", "node-b", "node-c")]
    scores = spread.prescore(found, scheduling_spec(found), scored.placed, passed, filters.allows, None)
    assert scores is not None
    assert spread.normalize(scores, passed, [spread.score(scores, each) for each in passed]) == [100, 100, 100]


def test_match_label_keys_leave_an_absent_selector_selecting_nothing() -> None:
    """No ``labelSelector`` (nothing) and ``matchLabelKeys`` the pod carries (the API server refuses that pod; a file
    read offline may hold it): upstream's mergeLabelSetWithSelector returns the selector as it is when it has no
    requirements to list (labels.Nothing), so no pod is counted (zone1 0, not 2)."""
    where = cluster(FOUR, [placed("p-a1", "node-a", "foo", bar="x"), placed("p-a2", "node-a", bar="x")])
    state = prefilter(
        pod("p", {"foo": "", "bar": "x"}, constraints=[hard(1, "zone", None, match_label_keys=["bar"])]), where
    )
    assert state is not None
    assert [dict(counts) for counts in state.counts] == [{"zone1": 0, "zone2": 0}]
