"""kube-scheduler 1.37's own unit tables for InterPodAffinity, translated: the engine's
:mod:`operators.engine.cluster.kube.interpod` is held to upstream's expected results.

Source: ``k8s.io/kubernetes@v1.37.2/pkg/scheduler/framework/plugins/interpodaffinity/filtering_test.go`` and
``scoring_test.go``; each case is named after upstream's and its expectation (which node passes, with which reason;
the scores after normalisation) is upstream's. Upstream runs the filter tables with the
``InterPodAffinityHostnameFastPath`` gate on and off and expects the same results both ways; the gate is alpha and
off by default in 1.37, and the engine models the default (the hostname terms counted per topology pair like any
other key).

How upstream's fixtures read here:

* a pod without a namespace (upstream's ``""``) is in ``default`` (the engine reads a pod without one so; a term's
  namespace ``""`` names that namespace, ``default``); pods without a name get ``pod-<index>``;
* upstream's ``topologyKey: ""`` (two cases of TestRequiredAffinitySingleNode, where it is not the point of the case)
  is replaced by ``region``, a key the node has: the API server rejects an empty key (the engine refuses such a pod
  as unreadable, :func:`test_an_empty_topology_key_is_refused`), and upstream's Filter returns the same status with
  either key there (no placed pod matches and the pod does not match its own term).

Left out: the cases upstream expects PreFilter/PreScore to fail on an invalid label value (``{{.bad-value.}}``: the
API server rejects such a pod; the engine does not validate label syntax), TestPreFilterDisabled (Filter without
PreFilter is an error upstream; the engine has no such state: no PreFilter state means Skip), TestPreFilterStateClone
and the deferred-resize cases (not modelled), and the score cases with plugin arguments the engine does not model
(``ignorePreferredTermsOfExistingPods: true``, ``hardPodAffinityWeight: 0``; the engine uses the defaults).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from operators.engine.cluster.kube import filters, interpod
from operators.engine.cluster.kube.interpod import AFFINITY, ANTI_AFFINITY, EXISTING_ANTI_AFFINITY, InterPodState
from operators.engine.cluster.kube.terms import HOSTNAME, scheduling_spec
from operators.engine.cluster.kube.view import PlacedPods
from operators.engine.cluster.objects import Node, Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.scheduling.index import ClusterIndex

Raw = dict[str, Any]
SKIP = "PreFilter/PreScore: Skip"  # upstream's Skip status: the plugin has nothing to check or score
FAILS = "Filter: not Success"  # upstream's table asserts only that the node is rejected
MAX = 100  # fwk.MaxNodeScore


# -- builders ------------------------------------------------------------------------------------------------------


def node(name: str, labels: Mapping[str, str] | None = None) -> Raw:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})}}


def namespace(name: str, labels: Mapping[str, str] | None = None) -> Raw:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels or {})}}


def expression(key: str, operator: str, *values: str) -> Raw:
    found: Raw = {"key": key, "operator": operator}
    if values:
        found["values"] = list(values)
    return found


def selector(*expressions: Raw) -> Raw:
    return {"matchExpressions": list(expressions)}


def exists(key: str) -> Raw:
    return selector(expression(key, "Exists"))


def in_(key: str, *values: str) -> Raw:
    return selector(expression(key, "In", *values))


def not_in(key: str, *values: str) -> Raw:
    return selector(expression(key, "NotIn", *values))


def term(
    labels: Raw | None, topology: str, namespaces: Sequence[str] | None = None, namespace_selector: Raw | None = None
) -> Raw:
    """A PodAffinityTerm (upstream's wrappers leave namespaces and namespaceSelector unset)."""
    found: Raw = {"topologyKey": topology}
    if labels is not None:
        found["labelSelector"] = labels
    if namespaces is not None:
        found["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        found["namespaceSelector"] = namespace_selector
    return found


def affinity(
    required: Sequence[Raw] = (),
    anti: Sequence[Raw] = (),
    preferred: Sequence[tuple[int, Raw]] = (),
    preferred_anti: Sequence[tuple[int, Raw]] = (),
) -> Raw:
    """A pod's ``spec.affinity`` with required and preferred (weight, term) pod (anti-)affinity terms."""
    found: Raw = {}
    for name, hard, soft in (("podAffinity", required, preferred), ("podAntiAffinity", anti, preferred_anti)):
        part: Raw = {}
        if hard:
            part["requiredDuringSchedulingIgnoredDuringExecution"] = list(hard)
        if soft:
            part["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": weight, "podAffinityTerm": body} for weight, body in soft
            ]
        if part:
            found[name] = part
    return found


def pod(
    name: str = "",
    namespace: str = "default",
    labels: Mapping[str, str] | None = None,
    on: str = "",
    spec_affinity: Raw | None = None,
) -> Raw:
    spec: Raw = {"containers": [{"name": "c"}]}
    if on:
        spec["nodeName"] = on
    if spec_affinity:
        spec["affinity"] = spec_affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
        "status": {"phase": "Running" if on else "Pending"},
    }


def _named(raw: Raw, index: int) -> Raw:
    if raw["metadata"]["name"]:
        return raw
    return {**raw, "metadata": {**raw["metadata"], "name": f"pod-{index}"}}


@dataclass
class Cluster:
    placed: PlacedPods
    nodes: list[Node]  # in the upstream case's order
    index: ClusterIndex

    def node(self, name: str) -> Node:
        return self.placed.nodes[name]


def cluster(nodes: Sequence[Raw], pods: Sequence[Raw] = (), namespaces: Sequence[Raw] = ()) -> Cluster:
    snapshot = build_snapshot([*namespaces, *nodes, *(_named(raw, i) for i, raw in enumerate(pods))])
    index = ClusterIndex.build(snapshot)
    placed = PlacedPods(index.usage, snapshot.node_by_name, snapshot.namespace_by_name)
    return Cluster(placed, [snapshot.node_by_name[raw["metadata"]["name"]] for raw in nodes], index)


def incoming(raw: Raw) -> Pod:
    return Pod.parse(_named(raw, 999))


def prefilter(raw: Raw, where: Cluster) -> InterPodState | None:
    found = incoming(raw)
    return interpod.prefilter(found, scheduling_spec(found), where.placed)


# upstream's `namespaces` (scoring_test.go), the Namespace objects of TestRequiredAffinitySingleNode and the scores
TEAMS = (
    namespace("subteam1.team1", {"team": "team1"}),
    namespace("subteam2.team1", {"team": "team1"}),
    namespace("subteam1.team2", {"team": "team2"}),
    namespace("subteam2.team2", {"team": "team2"}),
)


# -- Filter --------------------------------------------------------------------------------------------------------


@dataclass
class FilterCase:
    pod: Raw
    nodes: Sequence[Raw]
    want: Mapping[str, str] | str  # node -> reason ("" passes, FAILS: rejected), or SKIP
    pods: Sequence[Raw] = ()
    namespaces: Sequence[Raw] = field(default_factory=tuple)


SERVICE = {"service": "securityscan"}
SECURITY = {"security": "S1"}
NODE1 = node("node1", {"region": "r1", "zone": "z11"})
PLACED = pod(labels=SERVICE, on="node1")  # upstream's `pod` of TestRequiredAffinitySingleNode
IN_SECURITYSCAN = in_("service", "securityscan", "value2")


def single(pod_raw: Raw, want: str, pods: Sequence[Raw] = (PLACED,)) -> FilterCase:
    """A case of TestRequiredAffinitySingleNode: node1 only, with upstream's namespaces."""
    return FilterCase(pod_raw, [NODE1], want if want == SKIP else {"node1": want}, pods, TEAMS)


SINGLE_NODE = [
    pytest.param(
        single(pod(), SKIP, ()),
        id="A pod that has no required pod affinity scheduling rules can schedule onto a node with no existing pods",
    ),
    pytest.param(
        single(pod(labels=SECURITY, spec_affinity=affinity([term(IN_SECURITYSCAN, "region")])), ""),
        id="satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator that "
        "matches the existing pod",
    ),
    pytest.param(
        single(
            pod(
                labels=SECURITY, spec_affinity=affinity([term(not_in("service", "securityscan3", "value3"), "region")])
            ),
            "",
        ),
        id="satisfies the pod with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using not in "
        "operator in labelSelector that matches the existing pod",
    ),
    pytest.param(
        single(
            pod(labels=SECURITY, spec_affinity=affinity([term(IN_SECURITYSCAN, "region", ["DiffNameSpace"])])),
            AFFINITY,
            [pod(namespace="ns", labels=SERVICE, on="node1")],
        ),
        id="Does not satisfy the PodAffinity with labelSelector because of diff Namespace",
    ),
    pytest.param(
        single(
            pod(labels=SERVICE, spec_affinity=affinity([term(in_("service", "antivirusscan", "value2"), "region")])),
            AFFINITY,
        ),
        id="Doesn't satisfy the PodAffinity because of unmatching labelSelector with the existing pod",
    ),
    pytest.param(
        single(
            pod(
                labels=SECURITY,
                spec_affinity=affinity(
                    [
                        term(
                            selector(expression("service", "Exists"), expression("wrongkey", "DoesNotExist")), "region"
                        ),
                        term(
                            selector(
                                expression("service", "In", "securityscan"),
                                expression("service", "NotIn", "WrongValue"),
                            ),
                            "region",
                        ),
                    ]
                ),
            ),
            "",
        ),
        id="satisfies the PodAffinity with different label Operators in multiple "
        "RequiredDuringSchedulingIgnoredDuringExecution",
    ),
    pytest.param(
        single(
            pod(
                labels=SECURITY,
                spec_affinity=affinity(
                    [
                        term(
                            selector(expression("service", "Exists"), expression("wrongkey", "DoesNotExist")), "region"
                        ),
                        term(
                            selector(
                                expression("service", "In", "securityscan2"),
                                expression("service", "NotIn", "WrongValue"),
                            ),
                            "region",
                        ),
                    ]
                ),
            ),
            AFFINITY,
        ),
        id="The labelSelector requirements(items of matchExpressions) are ANDed, the pod cannot schedule onto the "
        "node because one of the matchExpression item don't match.",
    ),
    pytest.param(
        single(
            pod(
                labels=SECURITY,
                spec_affinity=affinity(
                    [term(IN_SECURITYSCAN, "region")], [term(in_("service", "antivirusscan", "value2"), "node")]
                ),
            ),
            "",
        ),
        id="satisfies the PodAffinity and PodAntiAffinity with the existing pod",
    ),
    pytest.param(
        single(
            pod(
                labels=SECURITY,
                spec_affinity=affinity(
                    [term(IN_SECURITYSCAN, "region")], [term(in_("service", "antivirusscan", "value2"), "node")]
                ),
            ),
            "",
            [
                pod(
                    labels=SERVICE,
                    on="node1",
                    spec_affinity=affinity(anti=[term(in_("service", "antivirusscan", "value2"), "node")]),
                )
            ],
        ),
        id="satisfies the PodAffinity and PodAntiAffinity and PodAntiAffinity symmetry with the existing pod",
    ),
    pytest.param(
        single(
            pod(
                labels=SECURITY,
                spec_affinity=affinity(
                    [term(IN_SECURITYSCAN, "region")], [term(in_("service", "securityscan", "value2"), "zone")]
                ),
            ),
            ANTI_AFFINITY,
        ),
        id="satisfies the PodAffinity but doesn't satisfy the PodAntiAffinity with the existing pod",
    ),
    pytest.param(
        single(
            pod(
                labels=SERVICE,
                spec_affinity=affinity(
                    [term(IN_SECURITYSCAN, "region")], [term(in_("service", "antivirusscan", "value2"), "node")]
                ),
            ),
            EXISTING_ANTI_AFFINITY,
            [pod(labels=SERVICE, on="node1", spec_affinity=affinity(anti=[term(IN_SECURITYSCAN, "zone")]))],
        ),
        id="satisfies the PodAffinity and PodAntiAffinity but doesn't satisfy PodAntiAffinity symmetry with the "
        "existing pod",
    ),
    pytest.param(
        single(
            pod(labels=SERVICE, spec_affinity=affinity([term(not_in("service", "securityscan", "value2"), "region")])),
            AFFINITY,
            [pod(labels={"service": "securityscan"}, on="node2")],
        ),
        id="pod matches its own Label in PodAffinity and that matches the existing pod Labels",
    ),
    pytest.param(
        single(
            pod(labels=SERVICE),
            EXISTING_ANTI_AFFINITY,
            [pod(labels=SERVICE, on="node1", spec_affinity=affinity(anti=[term(IN_SECURITYSCAN, "zone")]))],
        ),
        id="verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. "
        "doesn't satisfy PodAntiAffinity symmetry with the existing pod",
    ),
    pytest.param(
        single(
            pod(labels=SERVICE),
            SKIP,
            [
                pod(
                    labels=SERVICE,
                    on="node1",
                    spec_affinity=affinity(anti=[term(not_in("service", "securityscan", "value2"), "zone")]),
                )
            ],
        ),
        id="verify that PodAntiAffinity from existing pod is respected when pod has no AntiAffinity constraints. "
        "satisfy PodAntiAffinity symmetry with the existing pod",
    ),
    pytest.param(
        single(
            pod(
                labels=SERVICE,
                spec_affinity=affinity(anti=[term(exists("service"), "region"), term(exists("security"), "region")]),
            ),
            ANTI_AFFINITY,
            [pod(labels=SECURITY, on="node1", spec_affinity=affinity(anti=[term(exists("security"), "zone")]))],
        ),
        id="satisfies the PodAntiAffinity with existing pod but doesn't satisfy PodAntiAffinity symmetry with "
        "incoming pod",
    ),
    pytest.param(
        single(
            pod(
                labels=SERVICE,
                spec_affinity=affinity(anti=[term(exists("service"), "zone"), term(exists("security"), "zone")]),
            ),
            ANTI_AFFINITY,
            [pod(labels=SECURITY, on="node1", spec_affinity=affinity(anti=[term(exists("security"), "zone")]))],
        ),
        id="PodAntiAffinity symmetry check a1: incoming pod and existing pod partially match each other on "
        "AffinityTerms",
    ),
    pytest.param(
        single(
            pod(labels=SECURITY, spec_affinity=affinity(anti=[term(exists("security"), "zone")])),
            EXISTING_ANTI_AFFINITY,
            [
                pod(
                    labels=SERVICE,
                    on="node1",
                    spec_affinity=affinity(anti=[term(exists("service"), "zone"), term(exists("security"), "zone")]),
                )
            ],
        ),
        id="PodAntiAffinity symmetry check a2: incoming pod and existing pod partially match each other on "
        "AffinityTerms",
    ),
    pytest.param(
        single(
            pod(
                labels={"abc": "", "xyz": ""},
                spec_affinity=affinity(anti=[term(exists("abc"), "zone"), term(exists("def"), "zone")]),
            ),
            ANTI_AFFINITY,
            [
                pod(
                    labels={"def": "", "xyz": ""},
                    on="node1",
                    spec_affinity=affinity(anti=[term(exists("abc"), "zone"), term(exists("def"), "zone")]),
                )
            ],
        ),
        id="PodAntiAffinity symmetry check b1: incoming pod and existing pod partially match each other on "
        "AffinityTerms",
    ),
    pytest.param(
        single(
            pod(
                labels={"def": "", "xyz": ""},
                spec_affinity=affinity(anti=[term(exists("abc"), "zone"), term(exists("def"), "zone")]),
            ),
            ANTI_AFFINITY,
            [
                pod(
                    labels={"abc": "", "xyz": ""},
                    on="node1",
                    spec_affinity=affinity(anti=[term(exists("abc"), "zone"), term(exists("def"), "zone")]),
                )
            ],
        ),
        id="PodAntiAffinity symmetry check b2: incoming pod and existing pod partially match each other on "
        "AffinityTerms",
    ),
    pytest.param(
        single(
            pod(
                labels=SECURITY,
                spec_affinity=affinity([term(IN_SECURITYSCAN, "region", namespace_selector=in_("team", "team1"))]),
            ),
            "",
            [pod(namespace="subteam1.team1", labels=SERVICE, on="node1")],
        ),
        id="affinity with NamespaceSelector",
    ),
    pytest.param(
        single(
            pod(
                labels=SECURITY,
                spec_affinity=affinity([term(IN_SECURITYSCAN, "region", namespace_selector=in_("team", "team1"))]),
            ),
            AFFINITY,
            [pod(namespace="subteam1.team2", labels=SERVICE, on="node1")],
        ),
        id="affinity with non-matching NamespaceSelector",
    ),
    pytest.param(
        single(
            pod(
                namespace="subteam1.team1",
                labels=SECURITY,
                spec_affinity=affinity(anti=[term(IN_SECURITYSCAN, "zone", namespace_selector=in_("team", "team1"))]),
            ),
            ANTI_AFFINITY,
            [pod(namespace="subteam2.team1", labels=SERVICE, on="node1")],
        ),
        id="anti-affinity with matching NamespaceSelector",
    ),
    pytest.param(
        single(
            pod(
                namespace="subteam1.team1",
                labels=SECURITY,
                spec_affinity=affinity(anti=[term(IN_SECURITYSCAN, "zone", namespace_selector={})]),
            ),
            ANTI_AFFINITY,
            [pod(namespace="subteam2.team1", labels=SERVICE, on="node1")],
        ),
        id="anti-affinity with matching all NamespaceSelector",
    ),
    pytest.param(
        single(
            pod(
                namespace="subteam1.team1",
                labels=SECURITY,
                spec_affinity=affinity(anti=[term(IN_SECURITYSCAN, "zone", namespace_selector=in_("team", "team1"))]),
            ),
            "",
            [pod(namespace="subteam1.team2", labels=SERVICE, on="node1")],
        ),
        id="anti-affinity with non-matching NamespaceSelector",
    ),
]

CHINA = {"region": "China"}
CHINA_AZ1 = {"region": "China", "az": "az1"}
INDIA = {"region": "India"}


def hosts(*labels: Mapping[str, str]) -> list[Raw]:
    """nodeA, nodeB, ... with these labels."""
    return [node(f"node{'ABC'[i]}", found) for i, found in enumerate(labels)]


R1Z1A = {"region": "r1", "zone": "z1", "hostname": "nodeA"}
R1Z2B = {"region": "r1", "zone": "z2", "hostname": "nodeB"}


def fails(*reasons: str) -> dict[str, str]:
    return {f"node{'ABC'[i]}": reason for i, reason in enumerate(reasons)}


MULTIPLE_NODES = [
    pytest.param(
        FilterCase(
            pod(spec_affinity=affinity([term(in_("foo", "bar"), "region")])),
            [node("node1", CHINA), node("node2", CHINA_AZ1), node("node3", INDIA)],
            {"node1": "", "node2": "", "node3": AFFINITY},
            [pod("p1", labels={"foo": "bar"}, on="node1")],
        ),
        id="A pod can be scheduled onto all the nodes that have the same topology key & label value with one of them "
        "has an existing pod that matches the affinity rules",
    ),
    pytest.param(
        FilterCase(
            pod(
                labels={"foo": "bar", "service": "securityscan"},
                spec_affinity=affinity([term(in_("foo", "bar"), "zone"), term(in_("service", "securityscan"), "zone")]),
            ),
            hosts({"zone": "az1", "hostname": "h1"}, {"zone": "az2", "hostname": "h2"}),
            fails("", ""),
            [pod("p1", labels={"foo": "bar"}, on="nodeA")],
        ),
        id="The affinity rule is to schedule all of the pods of this collection to the same zone. The first pod of "
        "the collection should not be blocked from being scheduled onto any node, even there's no existing pod that "
        "matches the rule anywhere.",
    ),
    pytest.param(
        FilterCase(
            pod(
                labels={"foo": "bar", "service": "securityscan"},
                spec_affinity=affinity([term(in_("foo", "bar"), "zone"), term(in_("service", "securityscan"), "zone")]),
            ),
            hosts({"zoneLabel": "az1", "hostname": "h1"}, {"zoneLabel": "az2", "hostname": "h2"}),
            fails(AFFINITY, AFFINITY),
            [pod("p1", labels={"foo": "bar"}, on="nodeA")],
        ),
        id="The first pod of the collection can only be scheduled on nodes labelled with the requested topology keys",
    ),
    pytest.param(
        FilterCase(
            pod(spec_affinity=affinity(anti=[term(in_("foo", "abc"), "region")])),
            hosts({"region": "r1", "hostname": "nodeA"}, {"region": "r1", "hostname": "nodeB"}),
            fails(ANTI_AFFINITY, ANTI_AFFINITY),
            [pod(labels={"foo": "abc"}, on="nodeA")],
        ),
        id="NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter "
        "pod affinity rule. The pod can not be scheduled onto nodeA and nodeB.",
    ),
    pytest.param(
        FilterCase(
            pod(
                spec_affinity=affinity(
                    anti=[term(in_("foo", "abc"), "region"), term(in_("service", "securityscan"), "zone")]
                )
            ),
            hosts(R1Z1A, R1Z2B),
            fails(ANTI_AFFINITY, ANTI_AFFINITY),
            [pod(labels={"foo": "abc", "service": "securityscan"}, on="nodeA")],
        ),
        id="This test ensures that anti-affinity matches a pod when any term of the anti-affinity rule matches a pod.",
    ),
    pytest.param(
        FilterCase(
            pod(spec_affinity=affinity(anti=[term(in_("foo", "abc"), "region")])),
            hosts(CHINA, CHINA_AZ1, INDIA),
            fails(ANTI_AFFINITY, ANTI_AFFINITY, ""),
            [pod(labels={"foo": "abc"}, on="nodeA")],
        ),
        id="NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter "
        "pod affinity rule. The pod can not be scheduled onto nodeA and nodeB but can be scheduled onto nodeC",
    ),
    pytest.param(
        FilterCase(
            pod(
                namespace="NS1", labels={"foo": "123"}, spec_affinity=affinity(anti=[term(in_("foo", "bar"), "region")])
            ),
            hosts(CHINA, CHINA_AZ1, INDIA),
            fails(ANTI_AFFINITY, ANTI_AFFINITY, ""),
            [
                pod(namespace="NS1", labels={"foo": "bar"}, on="nodeA"),
                pod(namespace="NS2", on="nodeC", spec_affinity=affinity(anti=[term(in_("foo", "123"), "region")])),
            ],
            [namespace("NS1")],
        ),
        id="NodeA and nodeB have same topologyKey and label value. NodeA has an existing pod that matches the inter "
        "pod affinity rule. The pod can not be scheduled onto nodeA, nodeB, but can be scheduled onto nodeC (NodeC "
        "has an existing pod that match the inter pod affinity rule but in different namespace)",
    ),
    pytest.param(
        FilterCase(
            pod(labels={"foo": ""}),
            hosts(R1Z1A, {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
            SKIP,
            [pod(on="nodeA", spec_affinity=affinity(anti=[term(exists("foo"), "invalid-node-label")]))],
        ),
        id="Test existing pod's anti-affinity: if an existing pod has a term with invalid topologyKey, labelSelector "
        "of the term is firstly checked, and then topologyKey of the term is also checked",
    ),
    pytest.param(
        FilterCase(
            pod(on="nodeA", spec_affinity=affinity(anti=[term(exists("foo"), "invalid-node-label")])),
            hosts(R1Z1A, {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
            fails("", ""),
            [pod(labels={"foo": ""}, on="nodeA")],
        ),
        id="Test incoming pod's anti-affinity: even if labelSelector matches, we still check if topologyKey matches",
    ),
    pytest.param(
        FilterCase(
            pod(labels={"foo": "", "bar": ""}),
            hosts(R1Z1A, R1Z2B),
            fails(EXISTING_ANTI_AFFINITY, EXISTING_ANTI_AFFINITY),
            [
                pod(on="nodeA", spec_affinity=affinity(anti=[term(exists("foo"), "zone")])),
                pod(on="nodeA", spec_affinity=affinity(anti=[term(exists("bar"), "region")])),
            ],
        ),
        id="Test existing pod's anti-affinity: incoming pod wouldn't considered as a fit as it violates each "
        "existingPod's terms on all nodes",
    ),
    pytest.param(
        FilterCase(
            pod(spec_affinity=affinity(anti=[term(exists("foo"), "zone"), term(exists("bar"), "region")])),
            hosts(R1Z1A, R1Z2B),
            fails(ANTI_AFFINITY, ANTI_AFFINITY),
            [pod(labels={"foo": ""}, on="nodeA"), pod(labels={"bar": ""}, on="nodeB")],
        ),
        id="Test incoming pod's anti-affinity: incoming pod wouldn't considered as a fit as it at least violates one "
        "anti-affinity rule of existingPod",
    ),
    pytest.param(
        FilterCase(
            pod(labels={"foo": "", "bar": ""}),
            hosts(R1Z1A, R1Z2B),
            fails(EXISTING_ANTI_AFFINITY, ""),
            [
                pod(
                    on="nodeA",
                    spec_affinity=affinity(
                        anti=[term(exists("foo"), "invalid-node-label"), term(exists("bar"), "zone")]
                    ),
                )
            ],
        ),
        id="Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when one term has invalid topologyKey",
    ),
    pytest.param(
        FilterCase(
            pod(spec_affinity=affinity(anti=[term(exists("foo"), "invalid-node-label"), term(exists("bar"), "zone")])),
            hosts(R1Z1A, R1Z2B),
            fails(ANTI_AFFINITY, ""),
            [pod("podA", labels={"foo": "", "bar": ""}, on="nodeA")],
        ),
        id="Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when one term has invalid topologyKey",
    ),
    pytest.param(
        FilterCase(
            pod(labels={"foo": "", "bar": ""}),
            hosts(R1Z1A, R1Z2B),
            fails(EXISTING_ANTI_AFFINITY, EXISTING_ANTI_AFFINITY),
            [
                pod(
                    on="nodeA",
                    spec_affinity=affinity(anti=[term(exists("foo"), "region"), term(exists("bar"), "zone")]),
                )
            ],
        ),
        id="Test existing pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when all terms have valid topologyKey",
    ),
    pytest.param(
        FilterCase(
            pod(spec_affinity=affinity(anti=[term(exists("foo"), "region"), term(exists("bar"), "zone")])),
            hosts(R1Z1A, R1Z2B),
            fails(ANTI_AFFINITY, ANTI_AFFINITY),
            [pod(labels={"foo": "", "bar": ""}, on="nodeA")],
        ),
        id="Test incoming pod's anti-affinity: only when labelSelector and topologyKey both match, it's counted as a "
        "single term match - case when all terms have valid topologyKey",
    ),
    pytest.param(
        FilterCase(
            pod(labels={"foo": "", "bar": ""}),
            hosts(R1Z1A, R1Z2B, {"region": "r1", "zone": "z3", "hostname": "nodeC"}),
            fails(EXISTING_ANTI_AFFINITY, EXISTING_ANTI_AFFINITY, ""),
            [
                pod(
                    on="nodeA",
                    spec_affinity=affinity(anti=[term(exists("foo"), "zone"), term(exists("labelA"), "zone")]),
                ),
                pod(
                    on="nodeB",
                    spec_affinity=affinity(anti=[term(exists("bar"), "zone"), term(exists("labelB"), "zone")]),
                ),
            ],
        ),
        id="Test existing pod's anti-affinity: existingPod on nodeA and nodeB has at least one anti-affinity term "
        "matches incoming pod, so incoming pod can only be scheduled to nodeC",
    ),
    pytest.param(
        FilterCase(
            pod(spec_affinity=affinity([term(exists("foo"), "region"), term(exists("bar"), "zone")])),
            hosts(R1Z1A, {"region": "r1", "zone": "z1", "hostname": "nodeB"}),
            fails("", ""),
            [pod("pod1", labels={"foo": "", "bar": ""}, on="nodeA")],
        ),
        id="Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all "
        "topologyKeys match",
    ),
    pytest.param(
        FilterCase(
            pod(spec_affinity=affinity([term(exists("foo"), "region"), term(exists("bar"), "zone")])),
            hosts(R1Z1A, R1Z2B),
            fails(AFFINITY, AFFINITY),
            [pod("pod1", labels={"foo": ""}, on="nodeA"), pod("pod2", labels={"bar": ""}, on="nodeB")],
        ),
        id="Test incoming pod's affinity: firstly check if all affinityTerms match, and then check if all "
        "topologyKeys match, and the match logic should be satisfied on the same pod",
    ),
    pytest.param(
        FilterCase(
            pod(spec_affinity=affinity([term(exists("foo"), HOSTNAME)])),
            hosts({HOSTNAME: "nodeA"}, {HOSTNAME: "nodeB"}),
            fails("", AFFINITY),
            [pod("pod1", labels={"foo": ""}, on="nodeA")],
        ),
        id="Test incoming pod's host-scoped affinity (fast path)",
    ),
    pytest.param(
        FilterCase(
            pod(spec_affinity=affinity(anti=[term(exists("foo"), HOSTNAME)])),
            hosts({HOSTNAME: "nodeA"}, {HOSTNAME: "nodeB"}),
            fails(ANTI_AFFINITY, ""),
            [pod("pod1", labels={"foo": ""}, on="nodeA")],
        ),
        id="Test incoming pod's host-scoped anti-affinity (fast path)",
    ),
]

# TestMultipleAffinityTermsRequireSingleMatchingPod and TestFastTrackInterPodAffinity: one pod, checked on some nodes
NODES_123 = [node(f"node-{i}", {HOSTNAME: f"node-{i}"}) for i in (1, 2, 3)]
TWO_TERMS = affinity([term(in_("foo", "bar"), HOSTNAME), term(in_("baz", "qux"), HOSTNAME)])
POD_A = pod("podA", labels={"foo": "bar"}, on="node-1")
POD_B = pod("podB", labels={"baz": "qux"}, on="node-1")
POD_C = pod("podC", labels={"foo": "bar", "baz": "qux"}, on="node-3")
ZONE = "topology.kubernetes.io/zone"
FAST_TRACK_NODES = [
    node("node-1", {HOSTNAME: "node-1", ZONE: "zone-a"}),
    node("node-2", {HOSTNAME: "node-2", ZONE: "zone-b"}),
]
FAST_TRACK_PODS = [
    pod("pod-no-rules-foo", labels={"app": "foo"}, on="node-1"),
    pod("pod-no-rules-bar", labels={"app": "bar"}, on="node-2"),
    pod("pod-in-ns-with-team-label", namespace="blue-ns", labels={"app": "blocked", "team": "blue"}, on="node-1"),
]
FAST_TRACK_NAMESPACES = [namespace("default"), namespace("other"), namespace("blue-ns", {"team": "blue"})]

OTHER_TABLES = [
    pytest.param(
        FilterCase(
            pod("pod-1", spec_affinity=TWO_TERMS),
            NODES_123,
            {"node-1": FAILS, "node-2": FAILS, "node-3": ""},
            [POD_A, POD_B, POD_C],
            [namespace("default")],
        ),
        id="TestMultipleAffinityTermsRequireSingleMatchingPod",
    ),
    pytest.param(
        FilterCase(
            pod("pod-1", labels={"foo": "bar", "baz": "qux"}, spec_affinity=TWO_TERMS),
            NODES_123,
            {"node-1": ""},
            [POD_A, POD_B],
            [namespace("default")],
        ),
        id="TestMultipleAffinityTermsRequireSingleMatchingPod/self-affinity",
    ),
    pytest.param(
        FilterCase(
            pod("pod-1", labels={"app": "foo"}, spec_affinity=affinity(anti=[term(in_("app", "foo"), ZONE)])),
            FAST_TRACK_NODES,
            {"node-1": FAILS, "node-2": ""},
            FAST_TRACK_PODS,
            FAST_TRACK_NAMESPACES,
        ),
        id="TestFastTrackInterPodAffinity/zone anti-affinity",
    ),
    pytest.param(
        FilterCase(
            pod("pod-2", labels={"app": "bar"}, spec_affinity=affinity(anti=[term(in_("app", "bar"), HOSTNAME)])),
            FAST_TRACK_NODES,
            {"node-1": "", "node-2": FAILS},
            FAST_TRACK_PODS,
            FAST_TRACK_NAMESPACES,
        ),
        id="TestFastTrackInterPodAffinity/host anti-affinity",
    ),
    pytest.param(
        FilterCase(
            pod(
                "pod-3",
                namespace="other",
                labels={"app": "baz"},
                spec_affinity=affinity(
                    anti=[
                        term(
                            in_("app", "blocked"), ZONE, namespace_selector=selector(expression("team", "DoesNotExist"))
                        )
                    ]
                ),
            ),
            FAST_TRACK_NODES,
            {"node-1": ""},
            FAST_TRACK_PODS,
            FAST_TRACK_NAMESPACES,
        ),
        id="TestFastTrackInterPodAffinity/namespace anti-affinity",
    ),
]


@pytest.mark.parametrize("case", SINGLE_NODE + MULTIPLE_NODES + OTHER_TABLES)
def test_filter(case: FilterCase) -> None:
    where = cluster(case.nodes, case.pods, case.namespaces)
    state = prefilter(case.pod, where)
    if case.want == SKIP:
        assert state is None
        return
    assert isinstance(case.want, Mapping)
    got = {name: interpod.check(state, where.node(name)) for name in case.want}
    want = {name: (got[name] or FAILS) if reason == FAILS else reason for name, reason in case.want.items()}
    assert got == want
    # the pipeline reports the same, as InterPodAffinity's, when only that filter runs
    cycle = filters.prefilter(incoming(case.pod), where.placed, where.index.requested)
    for name, reason in got.items():
        assert filters.failure(cycle, where.node(name), (filters.INTER_POD_AFFINITY,)) == (
            (interpod.NAME, (reason,)) if reason else ("", ())
        )


def test_an_empty_topology_key_is_refused() -> None:
    """What upstream's two cases with ``topologyKey: ""`` become here (see the module docstring)."""
    raw = pod(labels=SERVICE, spec_affinity=affinity([term(in_("service", "antivirusscan", "value2"), "")]))
    where = cluster([NODE1], [PLACED], TEAMS)
    cycle = filters.prefilter(incoming(raw), where.placed, where.index.requested)
    plugin, reasons = filters.failure(cycle, where.node("node1"))
    assert plugin == "" and reasons[0].startswith(filters.UNREADABLE) and "topologyKey" in reasons[0]


# -- PreFilter state after AddPod / RemovePod ------------------------------------------------------------------------

LABEL1, LABEL2, LABEL3 = (
    {"region": "r1", "zone": "z11"},
    {"region": "r1", "zone": "z12"},
    {"region": "r2", "zone": "z21"},
)
FOO_BAR = {"foo": "bar"}
ANTI_FOO_BAR = [term(in_("foo", "bar"), "region")]
COMPLEX = [term(in_("foo", "bar", "buzz"), "region"), term(not_in("service", "bar", "security", "test"), "zone")]
ABC_NODES = [node("nodeA", LABEL1), node("nodeB", LABEL2), node("nodeC", LABEL3)]


@dataclass
class AddRemoveCase:
    pending: Raw
    existing: Sequence[Raw]
    added: Raw
    nodes: Sequence[Raw]
    anti: Mapping[tuple[str, str], int]  # clusterWideAntiAffinityCounts after AddPod
    affinity: Mapping[tuple[str, str], int]  # clusterWideAffinityCounts after AddPod


ADD_REMOVE = [
    pytest.param(
        AddRemoveCase(
            pod("pending", labels=FOO_BAR, spec_affinity=affinity(anti=ANTI_FOO_BAR)),
            [pod("p1", labels=FOO_BAR, on="nodeA"), pod("p2", on="nodeC", spec_affinity=affinity(anti=ANTI_FOO_BAR))],
            pod("addedPod", labels=FOO_BAR, on="nodeB", spec_affinity=affinity(anti=ANTI_FOO_BAR)),
            ABC_NODES,
            {("region", "r1"): 2},
            {},
        ),
        id="preFilterState anti-affinity terms are updated correctly after adding and removing a pod",
    ),
    pytest.param(
        AddRemoveCase(
            pod("pending", labels=FOO_BAR, spec_affinity=affinity(anti=COMPLEX)),
            [pod("p1", labels=FOO_BAR, on="nodeA"), pod("p2", on="nodeC", spec_affinity=affinity(anti=ANTI_FOO_BAR))],
            pod("addedPod", labels=FOO_BAR, on="nodeA", spec_affinity=affinity(anti=COMPLEX)),
            ABC_NODES,
            {("region", "r1"): 2, ("zone", "z11"): 2, ("zone", "z21"): 1},
            {},
        ),
        id="preFilterState anti-affinity terms are updated correctly after adding and removing a pod #2",
    ),
    pytest.param(
        AddRemoveCase(
            pod("pending", labels=FOO_BAR, spec_affinity=affinity(COMPLEX)),
            [
                pod("p1", labels=FOO_BAR, on="nodeA"),
                pod("p2", on="nodeC", spec_affinity=affinity(COMPLEX, ANTI_FOO_BAR)),
            ],
            pod("addedPod", labels=FOO_BAR, on="nodeA", spec_affinity=affinity(anti=COMPLEX)),
            ABC_NODES,
            {},
            {("region", "r1"): 2, ("zone", "z11"): 2},
        ),
        id="preFilterState matching pod affinity and anti-affinity are updated correctly after adding and removing "
        "a pod",
    ),
    pytest.param(
        AddRemoveCase(
            pod("pending", labels=FOO_BAR, spec_affinity=affinity(anti=ANTI_FOO_BAR)),
            [pod("p1", labels=FOO_BAR, on="nodeA")],
            pod(
                "addedPod",
                labels=FOO_BAR,
                on="nodeA",
                spec_affinity=affinity(anti=[term(in_("foo", "bar"), "region"), term(in_("foo", "bar"), HOSTNAME)]),
            ),
            [node("nodeA", {**LABEL1, HOSTNAME: "nodeA"}), node("nodeB", {**LABEL2, HOSTNAME: "nodeB"})],
            {("region", "r1"): 2},
            {},
        ),
        id="preFilterState anti-affinity terms with both hostname and non-hostname are updated correctly after "
        "adding and removing a pod",
    ),
]


def _counts(state: InterPodState) -> tuple[Counter[tuple[str, str]], ...]:
    return (+state.existing_anti, +state.affinity, +state.anti)


@pytest.mark.parametrize("case", ADD_REMOVE)
def test_prefilter_state_add_remove_pod(case: AddRemoveCase) -> None:
    """TestPreFilterStateAddRemovePod: AddPod reaches the state PreFilter computes with the pod placed, RemovePod
    the state without it."""
    before = cluster(case.nodes, case.existing)
    after = cluster(case.nodes, [*case.existing, case.added])
    original, with_added = prefilter(case.pending, before), prefilter(case.pending, after)
    assert original is not None and with_added is not None
    state = original.copy()
    added = Pod.parse(case.added)
    where = before.node(added.node_name)
    interpod.add_pod(state, added, where)
    assert (+state.anti, +state.affinity) == (Counter(case.anti), Counter(case.affinity))
    assert _counts(state) == _counts(with_added)
    interpod.add_pod(state, added, where, -1)
    assert _counts(state) == _counts(original)
    interpod.add_pod(with_added, added, after.node(added.node_name), -1)
    assert _counts(with_added) == _counts(original)


# -- the counts of the incoming pod's terms (getIncomingAffinityAntiAffinityCounts) ---------------------------------

NODE_A = node("nodeA", {HOSTNAME: "nodeA"})
HOST_A = (HOSTNAME, "nodeA")


def normal(*keys: str) -> Raw:
    return pod("normal", labels=dict.fromkeys(keys, ""), on="nodeA")


def on_host(required: Sequence[str], anti: Sequence[str]) -> Raw:
    return pod(
        spec_affinity=affinity(
            [term(exists(key), HOSTNAME) for key in required], [term(exists(key), HOSTNAME) for key in anti]
        )
    )


INCOMING_COUNTS = [
    pytest.param(pod("aaa-normal"), [], {}, {}, id="nil test"),
    pytest.param(
        pod("aaa-normal"), [normal("aaa")], {}, {}, id="incoming pod without affinity/anti-affinity causes a no-op"
    ),
    pytest.param(
        on_host(["aaa"], ["aaa"]),
        [normal("bbb")],
        {},
        {},
        id="no pod has label that violates incoming pod's affinity and anti-affinity",
    ),
    pytest.param(
        on_host(["aaa"], ["aaa"]),
        [normal("aaa")],
        {HOST_A: 1},
        {HOST_A: 1},
        id="existing pod matches incoming pod's affinity and anti-affinity - single term case",
    ),
    pytest.param(
        on_host(["aaa", "bbb"], ["aaa"]),
        [normal("aaa", "bbb")],
        {HOST_A: 2},
        {HOST_A: 1},
        id="existing pod matches incoming pod's affinity and anti-affinity - multiple terms case",
    ),
    pytest.param(
        on_host(["aaa", "bbb"], ["aaa", "bbb"]),
        [normal("aaa")],
        {},
        {HOST_A: 1},
        id="existing pod not match incoming pod's affinity but matches anti-affinity",
    ),
    pytest.param(
        on_host(["aaa", "ccc"], ["aaa", "ccc"]),
        [normal("aaa", "bbb")],
        {},
        {HOST_A: 1},
        id="incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 1",
    ),
    pytest.param(
        on_host(["aaa", "bbb"], ["aaa", "bbb"]),
        [normal("bbb")],
        {},
        {HOST_A: 1},
        id="incoming pod's anti-affinity has more than one term - existing pod violates partial term - case 2",
    ),
]


@pytest.mark.parametrize(("raw", "existing", "want_affinity", "want_anti"), INCOMING_COUNTS)
def test_incoming_affinity_anti_affinity_counts(
    raw: Raw,
    existing: Sequence[Raw],
    want_affinity: Mapping[tuple[str, str], int],
    want_anti: Mapping[tuple[str, str], int],
) -> None:
    """TestGetTPMapMatchingIncomingAffinityAntiAffinity (a pod without terms: no state, both counts empty)."""
    state = prefilter(raw, cluster([NODE_A], existing))
    got = (Counter(), Counter()) if state is None else (+state.affinity, +state.anti)
    assert got == (Counter(want_affinity), Counter(want_anti))


def test_remove_pod_host_scoped_affinity_count() -> None:
    """TestRemovePodHostScopedAffinityCount: once the only matching pod is removed (RemovePod), the pending pod's
    self-affinity lets it on every node."""
    pending = pod("pending", labels=FOO_BAR, spec_affinity=affinity([term(in_("foo", "bar"), HOSTNAME)]))
    existing = pod("existing", labels=FOO_BAR, on="nodeA")
    where = cluster([node("nodeA", {HOSTNAME: "nodeA"}), node("nodeB", {HOSTNAME: "nodeB"})], [existing])
    state = prefilter(pending, where)
    assert state is not None
    assert interpod.check(state, where.node("nodeA")) == ""
    assert interpod.check(state, where.node("nodeB")) != ""
    interpod.add_pod(state, Pod.parse(existing), where.node("nodeA"), -1)
    assert interpod.check(state, where.node("nodeA")) == ""
    assert interpod.check(state, where.node("nodeB")) == ""


# -- Score ---------------------------------------------------------------------------------------------------------


@dataclass
class ScoreCase:
    pod: Raw
    nodes: Sequence[Raw]
    want: Sequence[int] | str  # normalised scores in the nodes' order, or SKIP
    pods: Sequence[Raw] = ()


S1, S2 = {"security": "S1"}, {"security": "S2"}
AZ1, AZ2 = {"az": "az1"}, {"az": "az2"}


def weighted(weight: int, labels: Raw, topology: str, **extra: Any) -> tuple[int, Raw]:
    return (weight, term(labels, topology, **extra))


STAY_WITH_S1_IN_REGION = affinity(preferred=[weighted(5, in_("security", "S1"), "region")])
STAY_WITH_S2_IN_REGION = affinity(preferred=[weighted(6, in_("security", "S2"), "region")])
AFFINITY3 = affinity(
    preferred=[
        weighted(8, selector(expression("security", "NotIn", "S1"), expression("security", "In", "S2")), "region"),
        weighted(2, selector(expression("security", "Exists"), expression("wrongkey", "DoesNotExist")), "region"),
    ]
)
HARD_AFFINITY = affinity(
    [
        term(in_("security", "S1", "value2"), "region"),
        term(selector(expression("security", "Exists"), expression("wrongkey", "DoesNotExist")), "region"),
    ]
)
AWAY_FROM_S1_IN_AZ = affinity(preferred_anti=[weighted(5, in_("security", "S1"), "az")])
AWAY_FROM_S2_IN_AZ = affinity(preferred_anti=[weighted(5, in_("security", "S2"), "az")])
STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ = affinity(
    preferred=[weighted(8, in_("security", "S1"), "region")], preferred_anti=[weighted(5, in_("security", "S2"), "az")]
)
NAMESPACES_TEAM1 = {"namespaces": ["subteam2.team2"], "namespace_selector": in_("team", "team1")}
AFFINITY_NAMESPACE_SELECTOR = affinity(preferred=[weighted(5, in_("security", "S1"), "region", **NAMESPACES_TEAM1)])
ANTI_AFFINITY_NAMESPACE_SELECTOR = affinity(
    preferred_anti=[weighted(5, in_("security", "S1"), "region", **NAMESPACES_TEAM1)]
)
NOT_TEAM1 = {"namespace_selector": not_in("team", "team1")}
AFFINITY_NEGATIVE_NAMESPACE_SELECTOR = affinity(preferred=[weighted(5, in_("security", "S1"), "region", **NOT_TEAM1)])
ANTI_AFFINITY_NEGATIVE_NAMESPACE_SELECTOR = affinity(
    preferred_anti=[weighted(5, in_("security", "S1"), "region", **NOT_TEAM1)]
)


def nodes(*labels: Mapping[str, str]) -> list[Raw]:
    """node1, node2, ... with these labels."""
    return [node(f"node{i + 1}", found) for i, found in enumerate(labels)]


def placed(
    on: str, labels: Mapping[str, str] | None = None, spec_affinity: Raw | None = None, ns: str = "default"
) -> Raw:
    return pod(namespace=ns, labels=labels, on=on, spec_affinity=spec_affinity)


PREFERRED = [
    pytest.param(
        ScoreCase(pod(labels=S1), nodes(CHINA, INDIA, AZ1), SKIP),
        id="all nodes are same priority as Affinity is nil",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S1, spec_affinity=STAY_WITH_S1_IN_REGION),
            nodes(CHINA, INDIA, AZ1),
            [MAX, 0, 0],
            [placed("node1", S1), placed("node2", S2), placed("node3", S1)],
        ),
        id="Affinity: pod that matches topology key & pods in nodes will get high score comparing to others"
        "which doesn't match either pods in nodes or in topology key",
    ),
    pytest.param(
        ScoreCase(
            pod(spec_affinity=STAY_WITH_S1_IN_REGION),
            nodes(CHINA, CHINA_AZ1, INDIA),
            [MAX, MAX, 0],
            [placed("node1", S1)],
        ),
        id="All the nodes that have the same topology key & label value with one of them has an existing pod that "
        "match the affinity rules, have the same score",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S1, spec_affinity=STAY_WITH_S2_IN_REGION),
            nodes(CHINA, INDIA, CHINA, CHINA, INDIA),
            [MAX, 0, MAX, MAX, 0],
            [placed(f"node{i}", S2) for i in (1, 1, 2, 3, 4, 5)],
        ),
        id="Affinity: nodes in one region has more matching pods comparing to other region, so the region which has "
        "more matches will get high score",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S1, spec_affinity=AFFINITY3),
            nodes(CHINA, INDIA, AZ1),
            [20, MAX, 0],
            [placed("node1", S1), placed("node2", S2), placed("node3", S1)],
        ),
        id="Affinity: different Label operators and values for pod affinity scheduling preference, including some "
        "match failures",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S2),
            nodes(CHINA, INDIA, AZ1),
            [0, MAX, 0],
            [placed("node1", S1, STAY_WITH_S1_IN_REGION), placed("node2", S2, STAY_WITH_S2_IN_REGION)],
        ),
        id="Affinity symmetry: considered only the preferredDuringSchedulingIgnoredDuringExecution in pod affinity "
        "symmetry",
    ),
    pytest.param(
        ScoreCase(
            pod(namespace="subteam1.team1", labels=S1),
            nodes(CHINA, INDIA, AZ1),
            [MAX, 0, 0],
            [placed("node1", S1, AFFINITY_NAMESPACE_SELECTOR), placed("node2", S2, STAY_WITH_S2_IN_REGION)],
        ),
        id="Affinity symmetry with namespace selector",
    ),
    pytest.param(
        ScoreCase(
            pod(namespace="subteam1.team1", labels=S1),
            nodes(CHINA, INDIA, AZ1),
            [0, MAX, MAX],
            [placed("node1", S1, ANTI_AFFINITY_NAMESPACE_SELECTOR), placed("node2", S2, STAY_WITH_S2_IN_REGION)],
        ),
        id="AntiAffinity symmetry with namespace selector",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S1),
            nodes(CHINA, INDIA, AZ1),
            [MAX, MAX, 0],
            [placed("node1", S1, HARD_AFFINITY), placed("node2", S2, HARD_AFFINITY)],
        ),
        id="Affinity symmetry: considered RequiredDuringSchedulingIgnoredDuringExecution in pod affinity symmetry",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S1, spec_affinity=AWAY_FROM_S1_IN_AZ),
            nodes(AZ1, CHINA),
            [0, MAX],
            [placed("node1", S1), placed("node2", S2)],
        ),
        id="Anti Affinity: pod that does not match existing pods in node will get high score",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S1, spec_affinity=AWAY_FROM_S1_IN_AZ),
            nodes(AZ1, CHINA),
            [0, MAX],
            [placed("node1", S1), placed("node2", S1)],
        ),
        id="Anti Affinity: pod that does not match topology key & match the pods in nodes will get higher score "
        "comparing to others",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S1, spec_affinity=AWAY_FROM_S1_IN_AZ),
            nodes(AZ1, INDIA),
            [0, MAX],
            [placed("node1", S1), placed("node1", S1), placed("node2", S2)],
        ),
        id="Anti Affinity: one node has more matching pods comparing to other node, so the node which has more "
        "unmatches will get high score",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S2),
            nodes(AZ1, AZ2),
            [0, MAX],
            [placed("node1", S1, AWAY_FROM_S2_IN_AZ), placed("node2", S2, AWAY_FROM_S1_IN_AZ)],
        ),
        id="Anti Affinity symmetry: the existing pods in node which has anti affinity match will get high score",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S1, spec_affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
            nodes(CHINA, AZ1),
            [MAX, 0],
            [placed("node1", S1), placed("node2", S1)],
        ),
        id="Affinity and Anti Affinity: considered only preferredDuringSchedulingIgnoredDuringExecution in both pod "
        "affinity & anti affinity",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S1, spec_affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
            nodes(CHINA_AZ1, INDIA, CHINA, CHINA, INDIA),
            [MAX, 0, MAX, MAX, 0],
            [placed(f"node{i}", S1) for i in (1, 1, 2, 3, 3, 4, 5)],
        ),
        id="Affinity and Anti Affinity: considering both affinity and anti-affinity, the pod to schedule and existing "
        "pods have the same labels",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S1, spec_affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
            nodes(CHINA, AZ1, INDIA, AZ2),
            [MAX, 0, MAX, 0],
            [
                placed("node1", S1),
                placed("node2", S2),
                placed("node3", spec_affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
                placed("node4", spec_affinity=AWAY_FROM_S1_IN_AZ),
            ],
        ),
        id="Affinity and Anti Affinity and symmetry: considered only preferredDuringSchedulingIgnoredDuringExecution "
        "in both pod affinity & anti affinity & symmetry",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S1),
            nodes(CHINA, CHINA),
            [0, 0],
            [placed("node1", S1), placed("node2", spec_affinity=STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ)],
        ),
        id="Avoid panic when partial nodes in a topology don't have pods with affinity",
    ),
    pytest.param(
        ScoreCase(
            pod(namespace="subteam1.team1", labels=S1, spec_affinity=AFFINITY_NAMESPACE_SELECTOR),
            nodes(CHINA, INDIA),
            [MAX, 0],
            [
                placed("node1", S1, ns="subteam1.team1"),
                placed("node1", S1, ns="subteam1.team1"),
                placed("node1", S1, ns="subteam1.team2"),
                placed("node2", S1, ns="subteam2.team1"),
            ],
        ),
        id="Affinity with pods matching NamespaceSelector",
    ),
    pytest.param(
        ScoreCase(
            pod(namespace="subteam1.team1", labels=S1, spec_affinity=AFFINITY_NAMESPACE_SELECTOR),
            nodes(CHINA, INDIA),
            [MAX, 0],
            [
                placed("node1", S1, ns="subteam1.team1"),
                placed("node1", S1, ns="subteam1.team1"),
                placed("node1", S1, ns="subteam2.team2"),
                placed("node2", S1, ns="subteam2.team1"),
            ],
        ),
        id="Affinity with pods matching both NamespaceSelector and Namespaces fields",
    ),
    pytest.param(
        ScoreCase(
            pod(namespace="subteam1.team1", labels=S1, spec_affinity=ANTI_AFFINITY_NAMESPACE_SELECTOR),
            nodes(CHINA, INDIA),
            [0, MAX],
            [
                placed("node1", S1, ns="subteam1.team1"),
                placed("node1", S1, ns="subteam1.team1"),
                placed("node1", S1, ns="subteam1.team2"),
                placed("node2", S1, ns="subteam2.team1"),
            ],
        ),
        id="Affinity with pods matching NamespaceSelector #2",
    ),
    pytest.param(
        ScoreCase(
            pod(namespace="subteam1.team1", labels=S1, spec_affinity=ANTI_AFFINITY_NAMESPACE_SELECTOR),
            nodes(CHINA, INDIA),
            [0, MAX],
            [
                placed("node1", S1, ns="subteam1.team1"),
                placed("node1", S1, ns="subteam1.team1"),
                placed("node1", S1, ns="subteam2.team2"),
                placed("node2", S1, ns="subteam2.team1"),
            ],
        ),
        id="Affinity with pods matching both NamespaceSelector and Namespaces fields #2",
    ),
    pytest.param(
        ScoreCase(
            pod(namespace="subteam1.team1", labels=S1, spec_affinity=AFFINITY_NEGATIVE_NAMESPACE_SELECTOR),
            nodes(CHINA, INDIA),
            [0, MAX],
            [
                placed("node1", S1, ns="subteam1.team1"),
                placed("node1", S1, ns="subteam1.team1"),
                placed("node2", S1, ns="subteam1.team2"),
            ],
        ),
        id="Affinity with pods correctly enforcing negative NamespaceSelector",
    ),
    pytest.param(
        ScoreCase(
            pod(namespace="subteam1.team1", labels=S1, spec_affinity=ANTI_AFFINITY_NEGATIVE_NAMESPACE_SELECTOR),
            nodes(CHINA, INDIA),
            [MAX, 0],
            [
                placed("node1", S1, ns="subteam1.team1"),
                placed("node1", S1, ns="subteam1.team1"),
                placed("node2", S1, ns="subteam1.team2"),
            ],
        ),
        id="AntiAffinity with pods correctly enforcing negative NamespaceSelector",
    ),
    pytest.param(
        ScoreCase(
            pod(labels=S2),
            nodes(CHINA, INDIA),
            [0, MAX],
            [
                placed("node1", S1, STAY_WITH_S1_IN_REGION_AWAY_FROM_S2_IN_AZ),
                placed("node2", S2, STAY_WITH_S2_IN_REGION),
            ],
        ),
        id="Do not ignore preferred terms of existing pods",
    ),
    pytest.param(ScoreCase(pod(labels=S2), [], SKIP), id="No nodes to score"),
]

# TestPreferredAffinityWithHardPodAffinitySymmetricWeight: hardPodAffinityWeight 1 (the default, as the engine's)
HARD_POD_AFFINITY = affinity(
    [term(in_("service", "S1"), "region", ["default", "subteam2.team2"], in_("team", "team1"))]
)
HARD_PLACED = [placed("node1", spec_affinity=HARD_POD_AFFINITY), placed("node2", spec_affinity=HARD_POD_AFFINITY)]
SERVICE_S1 = {"service": "S1"}
HARD_WEIGHT = [
    pytest.param(
        ScoreCase(pod(labels=SERVICE_S1), nodes(CHINA, INDIA, AZ1), [MAX, MAX, 0], HARD_PLACED),
        id="with default weight",
    ),
    pytest.param(
        ScoreCase(pod(namespace="subteam1.team2", labels=SERVICE_S1), nodes(CHINA, INDIA, AZ1), SKIP, HARD_PLACED),
        id="with no matching namespace",
    ),
    pytest.param(
        ScoreCase(
            pod(namespace="subteam1.team1", labels=SERVICE_S1), nodes(CHINA, INDIA, AZ1), [MAX, MAX, 0], HARD_PLACED
        ),
        id="with matching NamespaceSelector",
    ),
    pytest.param(
        ScoreCase(
            pod(namespace="subteam2.team2", labels=SERVICE_S1), nodes(CHINA, INDIA, AZ1), [MAX, MAX, 0], HARD_PLACED
        ),
        id="with matching Namespaces",
    ),
]


@pytest.mark.parametrize("case", PREFERRED + HARD_WEIGHT)
def test_score(case: ScoreCase) -> None:
    where = cluster(case.nodes, case.pods, TEAMS)
    found = incoming(case.pod)
    scores = interpod.prescore(found, scheduling_spec(found), where.placed)
    if case.want == SKIP:
        assert not scores
        return
    assert scores
    raw = [interpod.score(scores, each) for each in where.nodes]
    assert interpod.normalize(raw, True) == list(case.want)
