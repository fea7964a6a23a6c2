"""State kept by delta equals state computed from scratch, whatever the sequence of watch events: the cluster
cache's pods (what the controllers read) and the pod usage the extender keeps (used bandwidth, counts, nodes
whose usage is unknown, AppGroup members). Upstream's networktopology-controller instead adds a pod's bandwidth
again on every update."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
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
