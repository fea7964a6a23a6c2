"""The index the AppGroup controller's plans read, kept by delta, equals one built from scratch after any sequence
of watch events: pods created gated or placed at admission (held to a node, not bound), released to a planned node
(not bound yet), bound, finished, deleted; nodes added, resized, deleted. A pass's provisional pods (released by a
plan and not bound, or in flight) are counted on their planned node while the pass lasts, and the kept state is the
cache's again once it is closed."""

from __future__ import annotations

import copy
import gc
from dataclasses import replace
from typing import Any

import jsonpatch
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from operators.api import keys
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.planning import problem
from operators.engine.planning.problem import build_problem
from operators.engine.planning.release import as_released, plan_view, provisional
from operators.engine.scheduling.index import HEADROOM_KEPT, ClusterIndex
from operators.engine.simulation import ordered
from operators.extender.admission import placement_patch
from operators.sources.cache import ClusterCache
from operators.sources.kinds import APPGROUP_SPECS, NETWORKTOPOLOGIES, NODES, PODS
from operators.sources.live_index import LiveIndex, Provisional
from tests.support.planning import CONFIG, node, pod, topology

GROUPS = {"pair": ordered.appgroup("pair", {"a": ["b"], "b": []}), "solo": ordered.appgroup("solo", {"a": []})}
NODE_NAMES = ("n1", "n2", "n3", "n4")
RESOURCES = ("cpu", "memory")

steps = st.lists(
    st.tuples(
        st.sampled_from(
            ["create", "admit", "release", "bind", "finish", "delete", "resize", "add-node", "delete-node"]
        ),
        st.integers(min_value=0, max_value=3),  # which pod (or node size)
        st.sampled_from(list(GROUPS)),
        st.sampled_from(NODE_NAMES),
        st.sampled_from(["100m", "1", "2500m"]),
        st.booleans(),  # a release: seen back (else still in flight)
        st.booleans(),  # check a pass's view after this step
    ),
    max_size=30,
)


def gated(number: int, group: str, cpu: str) -> dict[str, Any]:
    """Pod GROUP-NUMBER, gated; the odd ones keep apart from their workload's other pods (a required
    anti-affinity per hostname: what the existing pods' anti-affinity counts read)."""
    workload = "a" if number % 3 else "b"
    raw = pod(f"{group}-{number}", workload, cpu=cpu, group=group)
    raw["spec"]["schedulingGates"] = [{"name": keys.TOPOLOGY_ORDER_GATE}]
    if number % 2:
        term = {"labelSelector": {"matchLabels": {keys.APPGROUP_WORKLOAD_LABEL: workload}},
                "topologyKey": keys.HOSTNAME_LABEL}  # fmt: skip
        raw["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    raw["metadata"]["uid"] = f"{group}-{number}"
    return raw


def admitted(number: int, group: str, cpu: str, node_name: str) -> dict[str, Any]:
    """Pod GROUP-NUMBER as the extender's placement webhook admits it: no gate, held to ``node_name`` (which the
    usage counts it on until it is bound)."""
    raw = gated(number, group, cpu)
    del raw["spec"]["schedulingGates"]
    return dict(jsonpatch.apply_patch(raw, placement_patch(Pod.parse(raw), node_name, f"token-{group}-{number}")))


def released(raw: dict[str, Any], node_name: str) -> dict[str, Any]:
    return dict(as_released(Pod.parse(raw), node_name).raw)


def view(index: ClusterIndex, snapshot: Snapshot) -> tuple[Any, ...]:
    """What a plan reads of an index: per node what is requested and how many pods, the headroom, the table's
    used columns, every AppGroup's members, and each group's problem (its fixed and pending pods, the room)."""
    nodes = [n.name for n in index.nodes]
    free, pods_free = index.headroom(RESOURCES)
    table = index.table(CONFIG.bandwidth.default_node_bandwidth)
    problems = []
    for group in GROUPS.values():
        problem = build_problem(index, group, CONFIG)
        problems.append((
            sorted((p.key, w, node) for p, w, node in problem.fixed), [p.key for p in problem.pods],
            problem.free.tolist(), problem.pods_free.tolist(), problem.used.tolist(),
        ))  # fmt: skip
    members = {
        label: sorted((key, p.node_name) for key, p in held.items()) for label, held in index.appgroup_pods.items()
    }
    return (
        nodes,
        {term: dict(on_nodes) for term, on_nodes in index.placed.anti_terms()},
        [(dict(index.requested(name)[0]), index.requested(name)[1]) for name in nodes],
        free.tolist(), pods_free.tolist(), list(table.used_in), list(table.used_out),
        {label: held for label, held in members.items() if held}, problems,
    )  # fmt: skip


def scratch(cache: ClusterCache, in_flight: dict[str, Pod] | None = None) -> Snapshot:
    snapshot = cache.snapshot()
    if in_flight:
        snapshot = replace(snapshot, pods=tuple(in_flight.get(p.key, p) for p in snapshot.pods))
    return snapshot


@settings(max_examples=100, deadline=None)
@example([("create", 1, "pair", "n1", "1", False, False), ("release", 1, "pair", "n2", "1", True, True),
          ("bind", 1, "pair", "n2", "1", False, False), ("create", 2, "pair", "n1", "1", False, False),
          ("release", 2, "pair", "n1", "1", False, True)])  # fmt: skip
@example([("create", 0, "pair", "n1", "1", False, False), ("create", 1, "solo", "n1", "1", False, False),
          ("release", 1, "solo", "n4", "1", False, False), ("finish", 1, "solo", "n1", "1", False, True)])  # fmt: skip
@given(steps)
def test_the_kept_plan_index_equals_one_built_from_scratch(
    moves: list[tuple[str, int, str, str, str, bool, bool]],
) -> None:
    cache = ClusterCache((NODES, PODS, APPGROUP_SPECS, NETWORKTOPOLOGIES))
    nodes = {name: node(name, "za" if name in ("n1", "n2") else "zb") for name in NODE_NAMES[:3]}
    for raw in (*nodes.values(), topology(5)):
        cache.apply(NODES if raw["kind"] == "Node" else NETWORKTOPOLOGIES, "ADDED", copy.deepcopy(raw))
    live = LiveIndex(cache, CONFIG.bandwidth.default_node_bandwidth)
    live.current()  # the tables built once, as after the first sync: every change from here on is a delta
    pods: dict[str, dict[str, Any]] = {}
    in_flight: dict[str, Pod] = {}  # releases sent and not seen back: the gated pod as its release leaves it
    for action, number, group, node_name, cpu, seen_back, check in moves:
        key = f"{ordered.NAMESPACE}/{group}-{number}"
        held = pods.get(key)
        if action in ("create", "admit") and held is None:
            pods[key] = gated(number, group, cpu) if action == "create" else admitted(number, group, cpu, node_name)
            cache.apply(PODS, "ADDED", copy.deepcopy(pods[key]))
        elif action == "release" and held is not None and held["spec"].get("schedulingGates"):
            if seen_back:  # the API server holds the released pod
                pods[key] = released(held, node_name)
                cache.apply(PODS, "MODIFIED", copy.deepcopy(pods[key]))
            else:  # still in flight: only the pass knows
                in_flight[key] = Pod.parse(released(held, node_name))
        elif action == "bind" and held is not None and not held["spec"].get("schedulingGates"):
            held["spec"]["nodeName"] = node_name
            held["status"]["phase"] = "Running"
            cache.apply(PODS, "MODIFIED", copy.deepcopy(held))
        elif action == "finish" and held is not None and not held["spec"].get("schedulingGates"):
            # a gated pod never runs, so never finishes (the example above: "finished" while gated, with its
            # release in flight to a node that is gone, it counted as pending from scratch and as done when kept)
            held["status"]["phase"] = "Succeeded"
            cache.apply(PODS, "MODIFIED", copy.deepcopy(held))
        elif action == "delete" and held is not None:
            cache.apply(PODS, "DELETED", pods.pop(key))
            in_flight.pop(key, None)
        elif action == "resize" and node_name in nodes:
            nodes[node_name]["status"]["allocatable"]["cpu"] = str(1 + number)
            cache.apply(NODES, "MODIFIED", copy.deepcopy(nodes[node_name]))
        elif action == "add-node" and node_name not in nodes:
            nodes[node_name] = node(node_name, "zb")
            cache.apply(NODES, "ADDED", copy.deepcopy(nodes[node_name]))
        elif action == "delete-node" and node_name in nodes and len(nodes) > 1:
            cache.apply(NODES, "DELETED", nodes.pop(node_name))
        for key in [k for k in in_flight if k not in pods or not pods[k]["spec"].get("schedulingGates")]:
            del in_flight[key]  # seen back or gone: no longer in flight
        if check:
            pass_view = Provisional(live)
            counted = [p for p in cache.snapshot().pods if p.key not in in_flight] + list(in_flight.values())
            placed = pass_view.place(provisional(counted, pass_view.index.node_by_name))
            expected = plan_view(scratch(cache, in_flight))
            assert view(placed, expected.snapshot) == view(expected, expected.snapshot)
            pass_view.close()
        bound = ClusterIndex.build(cache.snapshot())
        assert view(live.current(), bound.snapshot) == view(bound, bound.snapshot)
    assert live.rebuilds == 1  # every change after the first build applied by delta


def one_cpu_left_on_n1() -> tuple[ClusterCache, dict[str, Any]]:
    """n1 (zone za) and n2 (zb) of 4 cpus, a bound pod of 3 cpus on n1, and pair-1 (1 cpu) gated: the cache, and
    pair-1 as created."""
    cache = ClusterCache((NODES, PODS, APPGROUP_SPECS, NETWORKTOPOLOGIES))
    for raw in (node("n1", "za"), node("n2", "zb"), topology(5)):
        cache.apply(NODES if raw["kind"] == "Node" else NETWORKTOPOLOGIES, "ADDED", raw)
    cache.apply(PODS, "ADDED", pod("bound", "a", on="n1", cpu="3", group="solo"))
    waiting = gated(1, "pair", "1")
    cache.apply(PODS, "ADDED", copy.deepcopy(waiting))
    return cache, waiting


def test_a_pass_counts_each_plans_releases_for_the_next_one() -> None:
    """Hand-derived: n1 has 1 cpu left after the bound pod; pass places pair-1 (1 cpu) there; in the same pass the
    index the next plan reads has 0 cpu left on n1, and after the pass closes, 1 again (pair-1 was never sent)."""
    cache, waiting = one_cpu_left_on_n1()
    live = LiveIndex(cache, CONFIG.bandwidth.default_node_bandwidth)
    assert live.current().headroom(("cpu",))[0].tolist() == [[1000], [4000]]
    pass_view = Provisional(live)
    index = pass_view.place(provisional([Pod.parse(released(waiting, "n1"))], pass_view.index.node_by_name))
    assert index.headroom(("cpu",))[0].tolist() == [[0], [4000]]
    assert index.requested("n1") == ({"cpu": 4000}, 2)
    assert [p.key for p in build_problem(index, GROUPS["pair"], CONFIG).pods] == []  # pair-1 counts as placed
    pass_view.close()
    after = live.current()
    assert after.headroom(("cpu",))[0].tolist() == [[1000], [4000]]
    assert after.requested("n1") == ({"cpu": 3000}, 1)
    assert [p.key for p in build_problem(after, GROUPS["pair"], CONFIG).pods] == ["default/pair-1"]
    assert np.array_equal(after.headroom(("cpu",))[1], [109, 110])


def test_the_kept_index_keeps_the_headroom_a_pass_asked_for_so_later_passes_update_only_their_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hand-derived, rows of headroom computed per pass (n1 has 1 cpu left, n2 4): the first pass asks ("cpu",) of
    its view, both rows computed there. The second opens by computing both on the kept index (the cache's values:
    1000 and 4000, not the first pass's 0 on n1), then placing pair-1 on n1 recomputes n1's row alone. The third
    computes n1's row alone. Computed on each pass's view only, every pass would compute both rows again."""
    computed: list[int] = []
    rows_of = ClusterIndex._headroom_rows

    def counting(index: ClusterIndex, resources: tuple[str, ...], rows: Any, free: Any, pods: Any) -> Any:
        rows = list(rows)
        computed.append(len(rows))
        return rows_of(index, resources, rows, free, pods)

    monkeypatch.setattr(ClusterIndex, "_headroom_rows", counting)
    cache, waiting = one_cpu_left_on_n1()
    live = LiveIndex(cache, CONFIG.bandwidth.default_node_bandwidth)
    per_pass = []
    for _ in range(3):
        computed.clear()
        pass_view = Provisional(live)
        opened = list(computed)
        index = pass_view.place(provisional([Pod.parse(released(waiting, "n1"))], pass_view.index.node_by_name))
        assert index.headroom(("cpu",))[0].tolist() == [[0], [4000]]
        pass_view.close()
        per_pass.append((opened, sum(computed)))
    assert per_pass == [([], 2), ([2], 3), ([], 1)]
    assert live.current().headroom(("cpu",))[0].tolist() == [[1000], [4000]]
    # pods may ask any extended resource: only the latest HEADROOM_KEPT tuples are kept up to date, "cpu" now out
    asked = [("cpu", f"example.com/r{number}") for number in range(HEADROOM_KEPT)]
    for resources in asked:
        live.current().headroom(resources)
    computed.clear()
    cache.apply(PODS, "DELETED", pod("bound", "a", on="n1", cpu="3", group="solo"))  # n1's rows, of the 8 alone
    assert sorted(live.current().headroom_held) == sorted(asked) and computed == [1] * HEADROOM_KEPT


def test_the_volume_filters_over_a_kept_index_see_the_placed_pods() -> None:
    """A kept index's snapshot carries no pods (they are in its usage): the volume filters must still see the pods
    placed on each node. bound uses the ReadWriteOncePod claim `data` on n1; a gated member that uses it too is
    refused on every node with kube-scheduler's words, as over an index built from scratch."""
    from operators.engine.cluster.kube import filters as kube_filters
    from operators.engine.cluster.kube import volumes
    from operators.sources.kinds import PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES

    def with_claim(raw: dict[str, Any]) -> dict[str, Any]:
        raw["spec"]["volumes"] = [{"name": "v", "persistentVolumeClaim": {"claimName": "data"}}]
        return raw

    cache = ClusterCache((NODES, PODS, PERSISTENTVOLUMECLAIMS, PERSISTENTVOLUMES))
    for raw in (node("n1", "za"), node("n2", "zb")):
        cache.apply(NODES, "ADDED", raw)
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
             "metadata": {"name": "data", "namespace": "default",
                          "annotations": {"pv.kubernetes.io/bind-completed": "true"}},
             "spec": {"volumeName": "pv-1", "accessModes": ["ReadWriteOncePod"]}, "status": {}}  # fmt: skip
    volume = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv-1"},
              "spec": {"storageClassName": ""}, "status": {}}  # fmt: skip
    cache.apply(PERSISTENTVOLUMECLAIMS, "ADDED", claim)
    cache.apply(PERSISTENTVOLUMES, "ADDED", volume)
    cache.apply(PODS, "ADDED", with_claim(pod("bound", "a", on="n1", group="solo")))
    cache.apply(PODS, "ADDED", with_claim(gated(1, "pair", "100m")))
    live = LiveIndex(cache, CONFIG.bandwidth.default_node_bandwidth)
    waiting = next(p for p in cache.snapshot().pods if p.name == "pair-1")
    expected = [(volumes.VOLUME_RESTRICTIONS, (volumes.READ_WRITE_ONCE_POD_CONFLICT,))] * 2
    for index in (ClusterIndex.build(cache.snapshot()), live.current()):
        cycle = kube_filters.prefilter(waiting, index.placed, index.requested)
        assert [kube_filters.failure(cycle, n) for n in index.nodes] == expected


def test_a_built_index_holds_the_commonest_pods_masks_so_the_first_plan_evaluates_no_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hand-derived: n1 plain; n2 tainted dedicated=x:NoSchedule; n3 tainted node.kubernetes.io/not-ready:NoExecute;
    n4 unschedulable. A pod asking nothing may go on n1 only; one with the API server's two default tolerations on
    n1 and n3. Both masks are there once the index is built (0.8 s each at 50,000 nodes, which the first plan after a
    start would spend otherwise), frozen with what the cache holds: with every node's evaluation made to fail after
    it, a plan of either pod is still built, with those masks."""
    cache = ClusterCache((NODES, PODS, APPGROUP_SPECS, NETWORKTOPOLOGIES))
    not_ready = node("n3", "zb")
    not_ready["spec"] = {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]}
    cordoned = node("n4", "zb")
    cordoned["spec"] = {"unschedulable": True}
    for raw in (node("n1", "za"), node("n2", "za", taint=True), not_ready, cordoned):
        cache.apply(NODES, "ADDED", raw)
    cache.apply(NETWORKTOPOLOGIES, "ADDED", topology(5))
    live = LiveIndex(cache, CONFIG.bandwidth.default_node_bandwidth)
    gc.unfreeze()  # (another test's command may have frozen this process's objects)
    live.build()
    assert gc.get_freeze_count() > 0  # what the first sync built, out of the collector's sight

    def evaluated(*_: Any) -> bool:
        raise AssertionError("a node evaluated on the plan's path")

    monkeypatch.setattr(problem, "_placeable", evaluated)
    tolerations = [{"key": f"node.kubernetes.io/{taint}", "operator": "Exists", "effect": "NoExecute",
                    "tolerationSeconds": 300} for taint in ("not-ready", "unreachable")]  # fmt: skip
    for number, spec, allowed in ((2, {}, ["n1"]), (4, {"tolerations": tolerations}, ["n1", "n3"])):
        raw = gated(number, "solo", "100m")  # even: no affinity of its own
        raw["spec"].update(spec)
        cache.apply(PODS, "ADDED", raw)
        built = build_problem(live.current(), GROUPS["solo"], CONFIG)
        assert [p.key for p in built.pods][-1] == f"default/solo-{number}"
        assert [name for name, ok in zip(NODE_NAMES, built.eligible[-1], strict=True) if ok] == allowed
