"""Hostile inputs shared by the fuzz tests: the classes an attacker and an unlucky operator produced."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

# Values that froze, crashed or overflowed something once (issue 14), and their neighbours.
HOSTILE_QUANTITIES = [
    "1e99999999",
    "1e9999999",
    "1e-999999999",
    "-1e99999999",
    "1e30",
    "1e308",
    "9223372036854775808",
    "8Ei",
    "-5G",
    "-0",
    "0.000000000000000000000001",
    "1" * 5000,
    "9" * 64,
    "1e",
    "NaN",
    "Infinity",
    "١٢",  # Arabic-Indic digits
    "1\u00a0G",
    "",
    " ",
]

quantity_like = st.from_regex(r"\A[+-]?[0-9]{0,30}(\.[0-9]{0,12})?([eE][+-]?[0-9]{1,12}|[KMGTPE]i|[numkMGTPE])?\Z")
quantities = st.one_of(st.sampled_from(HOSTILE_QUANTITIES), quantity_like, st.text(max_size=20))

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
    quantities,
)
json_values: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)

BANDWIDTH_KEYS = [
    "kubernetes.io/ingress-bandwidth",
    "kubernetes.io/egress-bandwidth",
    "kubernetes.io/ingress-request",
    "kubernetes.io/egress-request",
]
koordinator_qos = st.one_of(
    st.dictionaries(
        st.sampled_from(["ingressLimit", "egressLimit", "ingressRequest", "egressRequest"]), quantities | json_values
    ).map(lambda d: __import__("json").dumps(d)),
    st.text(max_size=30),
)
bandwidth_annotations = st.dictionaries(
    st.sampled_from(BANDWIDTH_KEYS), quantities, max_size=4
) | st.fixed_dictionaries({"koordinator.sh/networkQOS": koordinator_qos})
node_annotations = st.dictionaries(
    st.sampled_from(["node.koordinator.sh/network-bandwidth", "node.kubernetes.io/network-limit"]),
    quantities,
    max_size=2,
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """The value, or (now and then) a value of any other shape in its place."""
    return st.one_of(strategy, strategy, strategy, json_values)


pod_metadata = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["p-a", "p-b", "p-c"]),
        "namespace": maybe(st.sampled_from(["default", "team"])),
        "annotations": maybe(bandwidth_annotations),
        "labels": maybe(
            st.fixed_dictionaries(
                {
                    "appgroup.diktyo.x-k8s.io": st.sampled_from(["a1", "x"]),
                    "appgroup.diktyo.x-k8s.io.workload": st.sampled_from(["p1", "p2", "p3"]),
                }
            )
        ),
    }
)
requests = st.fixed_dictionaries({"requests": maybe(st.dictionaries(st.sampled_from(["cpu", "memory"]), quantities))})
containers = st.lists(st.fixed_dictionaries({"resources": maybe(requests)}), max_size=2)


@st.composite
def pods(draw: st.DrawFn, node_names: tuple[str, ...] = ("n-1", "n-2", "n-3")) -> dict[str, Any]:
    spec = st.fixed_dictionaries(
        {
            "nodeName": st.sampled_from(node_names),
            "priority": maybe(st.integers(min_value=-(2**40), max_value=2**40)),
            "containers": maybe(containers),
        }
    )
    phase = st.fixed_dictionaries({"phase": st.sampled_from(["Running", "Pending", "Succeeded"])})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": draw(maybe(pod_metadata)),
        "spec": draw(maybe(spec)),
        "status": draw(maybe(phase)),
    }


@st.composite
def nodes(draw: st.DrawFn, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": draw(
            maybe(
                st.fixed_dictionaries(
                    {
                        "name": st.just(name),
                        "labels": maybe(
                            st.fixed_dictionaries(
                                {
                                    "topology.kubernetes.io/region": st.sampled_from(["r1", "r2"]),
                                    "topology.kubernetes.io/zone": st.sampled_from(["z1", "z2", "z3"]),
                                }
                            )
                        ),
                        "annotations": maybe(node_annotations),
                    }
                )
            )
        ),
        "status": draw(
            maybe(
                st.fixed_dictionaries(
                    {"allocatable": maybe(st.dictionaries(st.sampled_from(["cpu", "memory", "pods"]), quantities))}
                )
            )
        ),
    }
