"""State kept by delta equals state computed from scratch, whatever the sequence of watch events: the cluster
cache's pods (what the controllers read) and the pod usage the extender keeps (used bandwidth, counts, nodes
whose usage is unknown, AppGroup members). Upstream's networktopology-controller instead adds a pod's bandwidth
again on every update."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from operators.api import keys
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.cluster.usage import PodUsage
from operators.engine.scheduling.index import ClusterIndex
from operators.sources.cache import ClusterCache
from operators.sources.kinds import PODS
from operators.sources.store import Change

BANDWIDTHS = ["10M", "250M", "1G", "not-a-quantity", None]


def pod(uid: str, group: str, node: str | None, bandwidth: str | None) -> dict[str, Any]:
    annotations = {keys.INGRESS_REQUEST: bandwidth, keys.EGRESS_REQUEST: bandwidth} if bandwidth else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pod-{uid}",
            "namespace": "default",
            "uid": uid,
            "resourceVersion": "1",
            "labels": {keys.APPGROUP_LABEL: group, keys.APPGROUP_WORKLOAD_LABEL: "w"},
            "annotations": annotations,
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]} if node else {},
        "status": {"phase": "Running"},
    }


operations = st.lists(
    st.tuples(
        st.sampled_from(["create", "move", "delete", "finish", "unschedule", "annotate", "relabel", "touch"]),
        st.integers(min_value=0, max_value=6),
        st.sampled_from(["a1", "a2"]),
        st.sampled_from(["n-1", "n-2", "n-3"]),
        st.sampled_from(BANDWIDTHS),
    ),
    max_size=40,
)


def scratch_usage(pods: list[dict[str, Any]]) -> PodUsage:
    return ClusterIndex.build(build_snapshot(copy.deepcopy(pods))).usage


def view(usage: PodUsage) -> tuple[Any, ...]:
    return (
        {node: usage.used(node) for node in usage.sums},
        dict(usage.count),
        {node: dict(problems) for node, problems in usage.problems.items()},
        {group: sorted(members) for group, members in usage.members.items()},
    )


@settings(max_examples=80, deadline=None)
@given(operations)
def test_state_kept_by_delta_equals_state_from_scratch(steps: list[tuple[str, int, str, str, str | None]]) -> None:
    cache = ClusterCache((PODS,))
    usage = PodUsage()

    def listen(changes: list[Change]) -> None:
        for change in changes:
            usage.apply(change.old, change.new)

    cache.subscribe(listen)
    truth: dict[str, dict[str, Any]] = {}
    for action, number, group, node, bandwidth in steps:
        uid = str(number)
        if action == "create" and uid not in truth:
            truth[uid] = pod(uid, group, node, bandwidth)
            cache.apply(PODS, "ADDED", copy.deepcopy(truth[uid]))
            continue
        if uid not in truth or action == "create":
            continue
        if action == "delete":
            cache.apply(PODS, "DELETED", truth.pop(uid))
            continue
        current = copy.deepcopy(truth[uid])
        if action == "move":
            current["spec"] = {"nodeName": node}
        elif action == "finish":
            current["status"]["phase"] = "Succeeded"
        elif action == "unschedule":
            current["spec"] = {}
        elif action == "annotate":
            current["metadata"]["annotations"] = pod(uid, group, node, bandwidth)["metadata"]["annotations"]
        elif action == "relabel":
            current["metadata"]["labels"][keys.APPGROUP_LABEL] = group
        else:  # a change the engine does not read
            current["metadata"]["resourceVersion"] = str(int(current["metadata"]["resourceVersion"]) + 1)
            current["status"]["podIP"] = "10.0.0.1"
        truth[uid] = current
        cache.apply(PODS, "MODIFIED", copy.deepcopy(current))
        assert [p.uid for p in cache.snapshot().pods] == [
            truth[key]["metadata"]["uid"] for key in sorted(truth, key=lambda key: truth[key]["metadata"]["name"])
        ]
        assert view(usage) == view(scratch_usage(list(truth.values())))
    assert view(usage) == view(scratch_usage(list(truth.values())))


def test_hostile_events_are_ignored_not_fatal() -> None:
    """An object without a readable name, a non-object event or object: ignored, the cache goes on."""
    cache = ClusterCache((PODS,))
    store = cache._stores["pods"]
    for raw in ({"metadata": ["x"]}, {"metadata": {"name": 5}}, {"metadata": None}, {}):
        assert cache.apply(PODS, "ADDED", raw) is None  # type: ignore[arg-type]
    assert cache._event(store, ["not", "an", "event"], "7") == "7"
    assert cache._event(store, {"type": "ADDED", "object": "text"}, "7") == "7"
    assert cache._event(store, {"type": "ADDED", "object": {"metadata": "x"}}, "8") == "8"
    good = pod("1", "a1", "n-1", "10M")
    assert cache._event(store, {"type": "ADDED", "object": good}, "8") == "1"
    assert [p.name for p in cache.snapshot().pods] == ["pod-1"]
    unreadable = pod("2", "a1", "n-1", "10M")
    unreadable["spec"]["priority"] = "high"  # not an integer: left out, named in unreadable()
    cache.apply(PODS, "ADDED", unreadable)
    assert [p.name for p in cache.snapshot().pods] == ["pod-1"]
    assert "spec.priority" in cache.unreadable(PODS)[("default", "pod-2")]


node_edits = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=5),  # which node
        st.sampled_from(["zone", "region", "bandwidth", "unreadable", "cpu", "taint", "slo", "add", "delete"]),
        st.integers(min_value=0, max_value=3),  # the new value's pick
    ),
    min_size=1,
    max_size=12,
)


def node(index: int) -> dict[str, Any]:
    """Node ``n-INDEX``; n-5's bandwidth is unreadable (a capacity problem from the start)."""
    labels = {keys.REGION_LABEL: f"r{index % 2}", keys.ZONE_LABEL: f"z{index % 3}"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"n-{index}", "labels": labels,
                         "annotations": {keys.NODE_BANDWIDTH_KOORDINATOR: "lots" if index == 5 else "1G"}},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}  # fmt: skip


def node_slo(name: str, total: str) -> dict[str, Any]:
    return {"apiVersion": f"{keys.SLO_GROUP}/{keys.V1ALPHA1}", "kind": "NodeSLO", "metadata": {"name": name},
            "spec": {"systemStrategy": {"totalNetworkBandwidth": total}}}  # fmt: skip


def edit(nodes: list[dict[str, Any]], slos: dict[str, dict[str, Any]], which: int, what: str, pick: int) -> str:
    """One edit of the nodes (or of a NodeSLO); the name of the node whose row must be computed ("" for a node
    deleted: it has no row any more, and need not be named)."""
    if what == "add":
        added = node(10 + which * 4 + pick)
        added["metadata"]["labels"][keys.ZONE_LABEL] = f"z{pick + 3}"
        if all(n["metadata"]["name"] != added["metadata"]["name"] for n in nodes):
            nodes.append(added)
        return str(added["metadata"]["name"])
    target = nodes[which % len(nodes)]
    name = str(target["metadata"]["name"])
    if what == "delete":
        if len(nodes) > 1:
            nodes.remove(target)
        return ""
    if what == "zone":
        target["metadata"]["labels"][keys.ZONE_LABEL] = f"z{pick + 2}"  # z4, z5: places no node had
    elif what == "region":
        target["metadata"]["labels"][keys.REGION_LABEL] = f"r{pick}"
    elif what == "bandwidth":
        target["metadata"]["annotations"][keys.NODE_BANDWIDTH_KOORDINATOR] = ("100M", "1G", "10G", "2.5G")[pick]
    elif what == "unreadable":
        target["metadata"]["annotations"][keys.NODE_BANDWIDTH_KOORDINATOR] = "lots"
    elif what == "cpu":
        target["status"]["allocatable"]["cpu"] = str(pick * 4 + 1)
    elif what == "taint":
        target.setdefault("spec", {})["taints"] = [{"key": "k", "value": str(pick), "effect": "NoSchedule"}]
    else:  # the node's NodeSLO total (its annotation first wins: take it away to let the NodeSLO count)
        target["metadata"]["annotations"].pop(keys.NODE_BANDWIDTH_KOORDINATOR, None)
        slos[name] = node_slo(name, ("200M", "3G", "40G", "1")[pick])
    return name


@settings(max_examples=150, deadline=None)
@example([(5, "delete", 0)])  # a node with a capacity problem deleted: its problem goes with it
@given(node_edits)
def test_nodes_added_deleted_or_changed_give_the_tables_of_a_rebuild(edits: list[tuple[int, str, int]]) -> None:
    """A table derived after nodes were added, deleted or changed in place (ClusterIndex.with_nodes) equals the
    table built from scratch from the same nodes: names and order, places (renumbered when a node moves to a place
    no node had, or the last node of a place goes), capacities and their problems, allocatable scores, the used
    columns (a new node on which pods are bound already counts them)."""
    from operators.api.config.scheduler import NodeResourcesAllocatableArgs
    from operators.api.quantity import Quantity

    default = Quantity.parse("1G")
    args = NodeResourcesAllocatableArgs()
    nodes = [node(index) for index in range(6)]
    slos: dict[str, dict[str, Any]] = {}
    pods = [pod("p1", "a1", "n-1", "250M"), pod("p2", "a2", "n-4", "10M"), pod("p3", "a1", "n-14", "1G")]
    index = ClusterIndex.build(build_snapshot(copy.deepcopy([*nodes, *pods])))
    index.table(default).allocatable(args)
    changed = {edit(nodes, slos, which, what, pick) for which, what, pick in edits}
    fresh = build_snapshot(copy.deepcopy([*nodes, *slos.values()]))
    updated = index.with_nodes(fresh, changed, default).table(default)
    rebuilt = ClusterIndex(fresh, index.usage).table(default)
    assert updated.names == rebuilt.names
    assert [updated.places[i] for i in updated.place] == [rebuilt.places[i] for i in rebuilt.place]
    assert updated.capacity.tolist() == rebuilt.capacity.tolist()
    assert dict(updated.capacity_problems) == dict(rebuilt.capacity_problems)
    assert updated.allocatable(args).tolist() == rebuilt.allocatable(args).tolist()
    assert (updated.used_in.tolist(), updated.used_out.tolist()) == (
        rebuilt.used_in.tolist(),
        rebuilt.used_out.tolist(),
    )
    assert [n.raw for n in updated.nodes] == [n.raw for n in rebuilt.nodes]
