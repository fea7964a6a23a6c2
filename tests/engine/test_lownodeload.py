"""LowNodeLoad planner: the netBandwidth table case, cpu/memory, deviation, numberOfNodes, namespaces,
limits, anomaly detection, pod protections, policy validation, and a property over random clusters."""

from __future__ import annotations

import copy
import datetime
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from operators.api.config.descheduler import DEFAULT_POLICY, DeschedulerPolicy, parse_policy
from operators.api.errors import FieldError
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.descheduling.lownodeload import HIGH, LOW, NORMAL, EvictionPlan, EvictionPlanner, plan
from operators.engine.descheduling.sources import prometheus_samples
from operators.engine.descheduling.usage import node_loads
from tests.support.lownodeload import NOW, UNIT, hot_cluster, node, pod

GI = 1024**3


def policy(args: dict[str, Any] | None = None, **top: Any) -> DeschedulerPolicy:
    document = copy.deepcopy(DEFAULT_POLICY)
    document["profiles"][0]["pluginConfig"][0]["args"] = {
        "lowThresholds": {"netBandwidth": 30},
        "highThresholds": {"netBandwidth": 70},
        "accountingMode": "combined",
        **(args or {}),
    }
    document.update(top)
    return parse_policy(document)


def protected_pods(on: str) -> list[dict[str, Any]]:
    """Big pods that must never be picked, whatever the load."""
    return [
        pod(f"{on}-daemon", on, 2, owner="DaemonSet"),
        pod(f"{on}-mirror", on, 2, owner="Node", annotations={"kubernetes.io/config.mirror": "abc"}),
        pod(f"{on}-critical", on, 2, spec={"priorityClassName": "system-node-critical"}),
        pod(f"{on}-bare", on, 2, owner=None),
    ]


def table_cluster() -> list[dict[str, Any]]:
    """10 nodes at 1Gi: n0-n2 hot (87.9 % with the protected pods' 8 units + 1 evictable unit), n3-n5 at
    48.8 %, n6-n9 cold (9.8 % or idle)."""
    objects = [node(f"n{i}") for i in range(10)]
    for hot in ("n0", "n1", "n2"):
        objects += protected_pods(hot)
        objects.append(pod(f"{hot}-app-1", hot, 1))
    for middle in ("n3", "n4", "n5"):
        objects += [pod(f"{middle}-app-{k}", middle, 1) for k in range(5)]
    objects += [pod("n6-app-1", "n6", 1), pod("n7-app-1", "n7", 1)]
    return objects


def final_usage(
    objects: list[dict[str, Any]], result: EvictionPlan, chosen: DeschedulerPolicy, resource: str = "netBandwidth"
) -> dict[str, float]:
    """Percent per node once the plan's evictions land on their targets."""
    moved = copy.deepcopy(objects)
    by_key = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in moved if o["kind"] == "Pod"}
    for eviction in result.evictions:
        by_key[eviction.pod.key]["spec"]["nodeName"] = eviction.target
    loads = node_loads(build_snapshot(moved), chosen.args, NOW)
    return {name: load.percent(resource) for name, load in loads.nodes.items()}


def run(objects: list[dict[str, Any]], chosen: DeschedulerPolicy, **kwargs: Any) -> EvictionPlan:
    return plan(build_snapshot(objects), chosen, NOW, **kwargs)


def test_net_bandwidth_table_case() -> None:
    objects = hot_cluster()
    chosen = policy()
    result = run(objects, chosen)
    classes = result.classes
    assert [classes[f"n{i}"] for i in range(10)] == [HIGH] * 3 + [NORMAL] * 3 + [LOW] * 4
    assert result.usage["n0"]["netBandwidth"] == pytest.approx(100 * 9 * 2 * UNIT / GI)
    usage = final_usage(objects, result, chosen)
    assert all(usage[hot] <= 70 for hot in ("n0", "n1", "n2")), usage
    assert all(usage[f"n{i}"] <= 70 for i in range(6, 10)), usage
    assert {e.target for e in result.evictions} <= {"n6", "n7", "n8", "n9"}
    assert {e.node for e in result.evictions} == {"n0", "n1", "n2"}
    assert all("daemon" not in e.pod.name for e in result.evictions)
    # 9 units -> 7 units (68.4 %) needs 2 evictions per hot node.
    assert len(result.evictions) == 6
    assert result.evictions[0].reason == "node is overutilized, node netBandwidth usage(87.89%)>threshold(70.00%)"


def test_protected_pods_are_never_picked_even_when_nothing_else_helps() -> None:
    result = run(table_cluster(), policy())
    assert [classes for classes in (result.classes["n0"], result.classes["n6"])] == [HIGH, LOW]
    picked = [e.pod.name for e in result.evictions]
    assert picked == ["n0-app-1", "n1-app-1", "n2-app-1"]  # the only evictable pods on the hot nodes


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ({"metadata": {"deletionTimestamp": "2026-11-22T00:00:00Z"}}, "terminating"),
        ({"annotations": {"kubernetes.io/config.source": "file"}}, "static"),
        ({"spec": {"priority": 2_000_000_000}}, "critical"),
        ({"spec": {"volumes": [{"name": "scratch", "emptyDir": {}}]}}, "local storage"),
    ],
)
def test_other_protections(extra: dict[str, Any], why: str) -> None:
    objects = [node("hot"), node("cold")]
    objects.append(pod("daemon", "hot", 4, owner="DaemonSet"))
    victim = pod("victim-1", "hot", 5, annotations=extra.get("annotations", {}), spec=extra.get("spec", {}))
    victim["metadata"].update(extra.get("metadata", {}))
    objects.append(victim)
    assert run(objects, policy()).evictions == [], why
    if why == "local storage":
        allowed = run(objects, policy({"evictLocalStoragePods": True}))
        assert [e.pod.name for e in allowed.evictions] == ["victim-1"]


def test_cpu_and_memory_thresholds() -> None:
    objects = [node(f"n{i}", cpu="10", memory="10Gi") for i in range(4)]
    objects += [pod(f"cpu-{k}", "n0", 0, cpu="2", memory="100Mi") for k in range(5)]  # n0: cpu 100 %
    objects += [pod(f"mem-{k}", "n1", 0, cpu="100m", memory="2Gi") for k in range(5)]  # n1: memory 100 %
    chosen = policy({"lowThresholds": {"cpu": 20, "memory": 20}, "highThresholds": {"cpu": 60, "memory": 60}})
    result = run(objects, chosen)
    assert result.classes == {"n0": HIGH, "n1": HIGH, "n2": LOW, "n3": LOW}
    for resource in ("cpu", "memory"):
        usage = final_usage(objects, result, chosen, resource)
        assert all(value <= 60 for value in usage.values()), (resource, usage)
    assert {e.node for e in result.evictions} == {"n0", "n1"}
    assert "node cpu usage(100.00%)>threshold(60.00%)" in next(e.reason for e in result.evictions if e.node == "n0")


def test_deviation_mode_balances_around_the_mean() -> None:
    # Utilisation 9.8 % x (8, 4, 4, 0): mean 39 %; low band mean-10, high band mean+10 -> n0 high, n3 low.
    objects = [node(f"n{i}") for i in range(4)]
    for name, count in (("n0", 8), ("n1", 4), ("n2", 4)):
        objects += [pod(f"{name}-app-{k}", name, 1) for k in range(count)]
    chosen = policy(
        {
            "useDeviationThresholds": True,
            "lowThresholds": {"netBandwidth": 10},
            "highThresholds": {"netBandwidth": 10},
        }
    )
    result = run(objects, chosen)
    assert result.classes == {"n0": HIGH, "n1": NORMAL, "n2": NORMAL, "n3": LOW}
    assert result.thresholds["n0"]["netBandwidth"] == pytest.approx((29.0, 49.0), abs=0.1)
    assert len(result.evictions) == 3 and {e.target for e in result.evictions} == {"n3"}
    usage = final_usage(objects, result, chosen)
    assert usage["n0"] <= 49 and usage["n3"] <= 49


def test_number_of_nodes_gate() -> None:
    objects = hot_cluster()  # four low nodes
    assert run(objects, policy({"numberOfNodes": 4})).evictions == []
    assert "numberOfNodes 4" in run(objects, policy({"numberOfNodes": 4})).note
    assert run(objects, policy({"numberOfNodes": 3})).evictions


def test_namespace_filters() -> None:
    objects = [node("hot"), node("cold")]
    objects += [pod(f"a-{k}", "hot", 1, namespace="team-a") for k in range(5)]
    objects += [pod(f"b-{k}", "hot", 1, namespace="team-b") for k in range(4)]
    include = run(objects, policy({"evictableNamespaces": {"include": ["team-b"]}}))
    assert include.evictions and {e.pod.namespace for e in include.evictions} == {"team-b"}
    exclude = run(objects, policy({"evictableNamespaces": {"exclude": ["team-b"]}}))
    assert exclude.evictions and {e.pod.namespace for e in exclude.evictions} == {"team-a"}


def test_pod_selectors_and_node_selector() -> None:
    objects = [node("hot", labels={"pool": "a"}), node("cold", labels={"pool": "a"}), node("other")]
    objects += [pod(f"web-{k}", "hot", 1, labels={"app": "web"}) for k in range(5)]
    objects += [pod(f"db-{k}", "hot", 1, labels={"app": "db"}) for k in range(4)]
    only_db = run(objects, policy({"podSelectors": [{"name": "db", "selector": {"matchLabels": {"app": "db"}}}]}))
    assert only_db.evictions and {e.pod.labels["app"] for e in only_db.evictions} == {"db"}
    pool = run(objects, policy({"nodeSelector": "pool=a"}))
    assert set(pool.classes) == {"hot", "cold"}


@pytest.mark.parametrize(
    ("limits", "check"),
    [
        ({"maxNoOfPodsToEvictPerNode": 1}, lambda by_node, by_ns, total: max(by_node.values()) == 1),
        ({"maxNoOfPodsToEvictTotal": 2}, lambda by_node, by_ns, total: total == 2),
        ({"maxNoOfPodsToEvictPerNamespace": 3}, lambda by_node, by_ns, total: max(by_ns.values()) == 3),
    ],
)
def test_limits(limits: dict[str, int], check: Any) -> None:
    objects = hot_cluster()
    for index, document in enumerate(o for o in objects if o["kind"] == "Pod"):
        document["metadata"]["namespace"] = f"ns{index % 2}"
    result = run(objects, policy(**limits))
    by_node: dict[str, int] = {}
    by_ns: dict[str, int] = {}
    for eviction in result.evictions:
        by_node[eviction.node] = by_node.get(eviction.node, 0) + 1
        by_ns[eviction.pod.namespace] = by_ns.get(eviction.pod.namespace, 0) + 1
    assert check(by_node, by_ns, len(result.evictions)), result.evictions


def test_refused_evictions_are_skipped_and_the_next_pod_is_taken() -> None:
    objects = hot_cluster()
    steps = EvictionPlanner(build_snapshot(objects), policy(), NOW).steps()
    wanted = [next(steps)]
    try:
        while True:
            wanted.append(steps.send(len(wanted) != 1))  # the first eviction is refused (a PDB's 429)
    except StopIteration as finished:
        result: EvictionPlan = finished.value
    assert [e.pod.key for e in result.refused] == [wanted[0].pod.key]
    assert wanted[0].pod.key not in {e.pod.key for e in result.evictions}
    assert len(result.evictions) == 6  # still two per hot node: another pod took the refused one's place


def test_anomaly_needs_consecutive_high_observations() -> None:
    objects = hot_cluster()
    chosen = policy({"anomalyCondition": {"consecutiveAbnormalities": 3}})
    first = run(objects, chosen)
    assert first.evictions == [] and first.observations == {"n0": 1, "n1": 1, "n2": 1}
    second = run(objects, chosen, observations=first.observations)
    assert second.evictions == [] and second.observations["n0"] == 2
    third = run(objects, chosen, observations=second.observations)
    assert third.evictions and third.observations["n0"] == 0  # acted on: observed afresh


def test_lower_priority_goes_first() -> None:
    objects = [node("hot"), node("cold")]
    objects += [pod(f"important-{k}", "hot", 1, spec={"priority": 1000}) for k in range(5)]
    objects += [pod(f"cheap-{k}", "hot", 1, spec={"priority": 10}) for k in range(4)]
    result = run(objects, policy())
    assert result.evictions and all(e.pod.name.startswith("cheap") for e in result.evictions)


def test_node_fit_respects_taints_and_requests() -> None:
    objects = [node("hot"), node("tainted", spec={"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]})]
    objects += [pod(f"app-{k}", "hot", 1) for k in range(9)]
    assert run(objects, policy()).evictions == []
    assert run(objects, policy({"nodeFit": False})).evictions  # thresholds still reserved, taints ignored
    small = [node("hot"), node("cold", cpu="150m")]
    small += [pod(f"app-{k}", "hot", 1) for k in range(9)]
    assert [e.target for e in run(small, policy()).evictions] == ["cold"]  # room for one 100m pod only


def test_node_fit_runs_kube_schedulers_filters_between_pods() -> None:
    # The same hot node as above, the cold node free: the app pods are anti-affine to the "guard" pods per hostname
    # and a guard runs on the cold node. kube-scheduler would refuse the cold node to every app pod's replacement
    # (its own anti-affinity), so nodeFit evicts none; without the guard there, the pods move as before.
    apart = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "guard"}}, "topologyKey": "kubernetes.io/hostname"}]}}}  # fmt: skip
    apps = [pod(f"app-{k}", "hot", 1, spec=apart) for k in range(9)]
    guard = pod("guard", "cold", 0, labels={"app": "guard"})
    assert run([node("hot"), node("cold"), guard, *apps], policy()).evictions == []
    assert run([node("hot"), node("cold"), guard, *apps], policy({"nodeFit": False})).evictions
    assert {e.target for e in run([node("hot"), node("cold"), *apps], policy()).evictions} == {"cold"}


def test_unknown_usage_is_skipped_not_idle() -> None:
    objects = hot_cluster()
    objects[9]["metadata"]["annotations"] = {}  # n9: no bandwidth capacity
    result = run(objects, policy())
    assert "n9" not in result.classes and "bandwidth capacity" in result.skipped["n9"]
    metric_policy = policy(
        {"lowThresholds": {"cpu": 20}, "highThresholds": {"cpu": 60}, "usage": {"cpu": "nodeMetric"}}
    )
    assert set(run(objects, metric_policy).skipped) == {f"n{i}" for i in range(10)}


def test_node_metric_and_prometheus_sources() -> None:
    objects: list[dict[str, Any]] = [node("n0", cpu="10"), node("n1", cpu="10")]
    objects += [pod(f"app-{k}", "n0", 0, cpu="100m") for k in range(4)]
    objects.append(
        {
            "apiVersion": "slo.koordinator.sh/v1alpha1",
            "kind": "NodeMetric",
            "metadata": {"name": "n0"},
            "status": {
                "updateTime": "2026-11-22T11:59:00Z",
                "nodeMetric": {"nodeUsage": {"resources": {"cpu": "9", "memory": "1Gi"}}},
                "podsMetric": [
                    {"namespace": "default", "name": f"app-{k}", "podUsage": {"resources": {"cpu": "2"}}}
                    for k in range(4)
                ],
            },
        }
    )
    objects.append({**copy.deepcopy(objects[-1]), "metadata": {"name": "n1"}})
    objects[-1]["status"] = {
        "updateTime": "2026-11-22T11:59:00Z",
        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1"}}},
    }
    chosen = policy({"lowThresholds": {"cpu": 20}, "highThresholds": {"cpu": 60}, "usage": {"cpu": "nodeMetric"}})
    result = run(objects, chosen)
    assert result.usage["n0"]["cpu"] == 90.0 and result.classes == {"n0": HIGH, "n1": LOW}
    assert len(result.evictions) == 2  # 9 - 2 - 2 = 5 cores (50 %) <= 60 %
    stale = plan(build_snapshot(objects), chosen, NOW + datetime.timedelta(hours=1))
    assert set(stale.skipped) == {"n0", "n1"} and "old" in stale.skipped["n0"]

    answer = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"node": "n0"}, "value": [NOW.timestamp() - 30, str(0.9 * GI)]},
                {"metric": {"node": "n1"}, "value": [NOW.timestamp() - 30, "0"]},
            ],
        },
    }
    samples = prometheus_samples(answer, "node")
    net = policy({"usage": {"netBandwidth": "prometheus"}})
    measured = plan(build_snapshot(objects), net, NOW, prometheus=samples)
    assert measured.classes == {"n0": HIGH, "n1": LOW}
    assert measured.usage["n0"]["netBandwidth"] == pytest.approx(90.0)
    assert set(plan(build_snapshot(objects), net, NOW, prometheus={}).skipped) == {"n0", "n1"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"lowThresholds": {"netBandwidth": 80}}, "lowThresholds.netBandwidth: above highThresholds.netBandwidth"),
        ({"highThresholds": {"netBandwidth": 170}}, "highThresholds.netBandwidth: a percentage must lie in 0..100"),
        ({"lowThresholds": {"netBandwidth": -1}}, "lowThresholds.netBandwidth: a percentage must lie in 0..100"),
        (
            {"lowThresholds": {"gpu": 1}, "highThresholds": {"gpu": 2}},
            "lowThresholds.gpu: unknown resource; expected one of cpu, memory, pods, netBandwidth or an extended"
            ' resource (example.com/gpu) (got "gpu")',
        ),
        ({"evictableNamespaces": {"include": ["a"], "exclude": ["b"]}}, "evictableNamespaces: set include or exclude"),
        ({"lowThresholds": {"cpu": 10}}, "lowThresholds and highThresholds must name the same resources"),
        ({"nodeFitt": True}, "nodeFitt"),
        (
            {"lowThresholds": {"kubernetes.io/foo": 1}, "highThresholds": {"kubernetes.io/foo": 2}},
            "lowThresholds.kubernetes.io/foo: unknown resource",
        ),
        # selectors are checked when the policy is loaded, not when a plan first runs
        (
            {"nodeSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus", "values": ["x"]}]}},
            'nodeSelector.matchExpressions[0].operator: expected one of In, NotIn, Exists, DoesNotExist (got "Bogus")',
        ),
        ({"nodeSelector": "zone in (a"}, "nodeSelector: not a label selector"),
        (
            {"podSelectors": [{"selector": {"matchLabels": {"app": 1}}}]},
            "podSelectors[0].selector.matchLabels: expected a map of strings",
        ),
        ({"defaultNodeBandwidth": "-1G"}, "defaultNodeBandwidth: negative bandwidth"),
    ],
)
def test_policy_validation_names_the_field(args: dict[str, Any], message: str) -> None:
    with pytest.raises(FieldError) as caught:
        policy(args)
    assert message in str(caught.value)
    assert str(caught.value).startswith("profiles[0].pluginConfig[0].args.")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"kind": "DeschedulerConfiguration", "profiles": {"name": "x"}}, "profiles: expected a list"),
        ({"kind": "DeschedulerConfiguration", "profiles": ["x"]}, "profiles[0]: expected a profile object"),
        ({"kind": "DeschedulerConfiguration", "profiles": [{"pluginConfig": "x"}]}, "profiles[0].pluginConfig"),
        (
            {"kind": "DeschedulerConfiguration", "profiles": [{"pluginConfig": [{"name": "LowNodeLoad", "args": []}]}]},
            "profiles[0].pluginConfig[0].args: expected an object",
        ),
    ],
)
def test_policy_shapes_are_errors_not_tracebacks(document: dict[str, Any], message: str) -> None:
    with pytest.raises(FieldError, match=re.escape(message)):
        parse_policy(document)


def test_policy_plugins_enabled_by_name_as_upstream_writes_them() -> None:
    document = {
        "kind": "DeschedulerConfiguration",
        "profiles": [
            {
                "name": "p",
                "pluginConfig": [
                    {
                        "name": "LowNodeLoad",
                        "args": {"lowThresholds": {"netBandwidth": 30}, "highThresholds": {"netBandwidth": 70}},
                    }
                ],
                "plugins": {"balance": {"enabled": ["LowNodeLoad"]}},
            }
        ],
    }
    assert parse_policy(document).args.high_thresholds == {"netBandwidth": 70}


def test_policy_top_level_fields() -> None:
    chosen = policy(deschedulingInterval="1m30s", dryRun=True, maxNoOfPodsToEvictPerNode=2)
    assert (chosen.descheduling_interval, chosen.dry_run, chosen.max_no_of_pods_to_evict_per_node) == (90.0, True, 2)
    with pytest.raises(FieldError, match="deschedulingInterval: expected a duration"):
        policy(deschedulingInterval="soon")
    with pytest.raises(FieldError, match="maxNoOfPodsToEvictTotal"):
        policy(maxNoOfPodsToEvictTotal=-1)


@st.composite
def random_cluster(draw: st.DrawFn) -> tuple[list[dict[str, Any]], DeschedulerPolicy]:
    count = draw(st.integers(2, 8))
    objects: list[dict[str, Any]] = [
        node(f"n{i}", bandwidth=draw(st.sampled_from(["1Gi", "2Gi", "500Mi"]))) for i in range(count)
    ]
    for i in range(count):
        for k in range(draw(st.integers(0, 12))):
            objects.append(pod(f"n{i}-p{k}", f"n{i}", draw(st.integers(0, 3)), namespace=f"ns{k % 3}"))
    low = draw(st.integers(0, 60))
    high = draw(st.integers(low, 100))
    limits = {
        key: draw(st.none() | st.integers(0, 4))
        for key in ("maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal")
    }
    mode = draw(st.sampled_from(["duplex", "combined"]))
    chosen = policy(
        {"lowThresholds": {"netBandwidth": low}, "highThresholds": {"netBandwidth": high}, "accountingMode": mode},
        **{key: value for key, value in limits.items() if value is not None},
    )
    return objects, chosen


@settings(max_examples=150, deadline=None)
@given(random_cluster())
def test_no_plan_pushes_a_target_above_high_or_breaks_a_limit(
    case: tuple[list[dict[str, Any]], DeschedulerPolicy],
) -> None:
    objects, chosen = case
    result = run(objects, chosen)
    before = {name: values["netBandwidth"] for name, values in result.usage.items()}
    after = final_usage(objects, result, chosen)
    for target in {e.target for e in result.evictions}:
        high = result.thresholds[target]["netBandwidth"][1]
        assert after[target] <= high + 1e-9, (target, before[target], after[target], high)
        assert result.classes[target] == LOW
    counts: dict[tuple[str, str], int] = {}
    for eviction in result.evictions:
        for key in (("node", eviction.node), ("namespace", eviction.pod.namespace), ("total", "")):
            counts[key] = counts.get(key, 0) + 1
    for (kind, _), count in counts.items():
        limit = {
            "node": chosen.max_no_of_pods_to_evict_per_node,
            "namespace": chosen.max_no_of_pods_to_evict_per_namespace,
            "total": chosen.max_no_of_pods_to_evict_total,
        }[kind]
        assert limit is None or count <= limit
    assert all(result.classes[e.node] == HIGH for e in result.evictions)


def test_an_unusable_bandwidth_skips_its_node_and_the_cycle_goes_on() -> None:
    """A node annotated 1e308 (used to break every cycle) and a node with an unreadable pod are skipped with
    the reason; the other nodes are classified and the hot one still gets its evictions."""
    objects = [node("hot"), node("cold"), node("huge", bandwidth="1e308"), node("dirty")]
    objects += [pod(f"web-{k}", "hot", 1) for k in range(9)]
    broken = pod("broken", "dirty", 1)
    broken["metadata"]["annotations"]["kubernetes.io/ingress-bandwidth"] = "-1G"
    objects.append(broken)
    result = plan(build_snapshot(objects), policy({"accountingMode": "combined"}), NOW)
    assert "metadata.annotations[node.koordinator.sh/network-bandwidth]: out of range" in result.skipped["huge"]
    assert "pod default/broken" in result.skipped["dirty"] and "negative bandwidth" in result.skipped["dirty"]
    assert result.classes == {"hot": HIGH, "cold": LOW}
    assert result.evictions


# --- conformance with upstream's tables: configured thresholds, raw-allocatable, extended resources -------------


def test_eviction_reason_prints_the_threshold_as_configured() -> None:
    # 29 % of 10 pods truncates to 2 pods (Koordinator's arithmetic); the reason says 29 %, not 2/10 = 20 %.
    objects = [node("hot"), node("cold")]
    for each in objects:
        each["status"]["allocatable"]["pods"] = "10"
    objects += [pod(f"app-{k}", "hot", 0) for k in range(3)]  # 3 of 10 pods: 30 % > 2 pods
    result = run(objects, policy({"lowThresholds": {"pods": 10}, "highThresholds": {"pods": 29}}))
    assert result.classes == {"hot": HIGH, "cold": LOW}
    assert result.thresholds["hot"]["pods"] == (10.0, 29.0)
    assert [e.reason for e in result.evictions] == ["node is overutilized, node pods usage(30.00%)>threshold(29.00%)"]


def test_raw_allocatable_is_the_capacity_usage_is_a_percentage_of() -> None:
    # An amplified node reports 20 cpus; Koordinator's raw-allocatable says 10 are real: 7 requested is 70 %.
    objects = [node("amplified", cpu="20"), node("cold", cpu="20")]
    objects[0]["metadata"]["annotations"]["node.koordinator.sh/raw-allocatable"] = '{"cpu": "10", "memory": "64Gi"}'
    objects += [pod(f"app-{k}", "amplified", 0, cpu="1") for k in range(7)]
    chosen = policy({"lowThresholds": {"cpu": 20}, "highThresholds": {"cpu": 60}})
    loads = node_loads(build_snapshot(objects), chosen.args, NOW)
    assert loads.nodes["amplified"].capacity == {"cpu": 10_000}
    assert loads.nodes["amplified"].percent("cpu") == 70.0
    assert run(objects, chosen).classes == {"amplified": HIGH, "cold": LOW}
    # As in Koordinator, an annotation that does not parse is ignored: status.allocatable counts (7 of 20: 35 %).
    objects[0]["metadata"]["annotations"]["node.koordinator.sh/raw-allocatable"] = "{not json"
    assert node_loads(build_snapshot(objects), chosen.args, NOW).nodes["amplified"].percent("cpu") == 35.0


def with_foo(raw: dict[str, Any], amount: str) -> dict[str, Any]:
    if raw["kind"] == "Node":
        raw["status"]["allocatable"]["example.com/foo"] = amount
    else:
        raw["spec"]["containers"][0]["resources"]["requests"]["example.com/foo"] = amount
    return raw


def test_extended_resources_are_threshold_resources() -> None:
    objects = [with_foo(node("hot"), "10"), with_foo(node("cold"), "10"), node("none")]
    objects += [with_foo(pod(f"app-{k}", "hot", 0), "4") for k in range(2)]  # 8 of 10: 80 %
    chosen = policy({"lowThresholds": {"example.com/foo": 20}, "highThresholds": {"example.com/foo": 60}})
    result = run(objects, chosen)
    assert result.classes == {"hot": HIGH, "cold": LOW}
    assert result.skipped == {"none": "no allocatable example.com/foo"}
    assert [(e.node, e.target) for e in result.evictions] == [("hot", "cold")]
    assert result.evictions[0].reason == "node is overutilized, node example.com/foo usage(80.00%)>threshold(60.00%)"
    assert final_usage(objects, result, chosen, "example.com/foo") == {"hot": 40.0, "cold": 40.0}


def test_node_fit_counts_extended_resources() -> None:
    # The cold node is under its threshold in cpu, but has no example.com/foo left for the pod: nodeFit refuses it.
    objects = [with_foo(node("hot", cpu="10"), "4"), with_foo(node("cold", cpu="10"), "4")]
    objects += [with_foo(pod(f"app-{k}", "hot", 0, cpu="4"), "2") for k in range(2)]  # hot: 80 % cpu
    objects.append(with_foo(pod("hog", "cold", 0, cpu="100m", owner="DaemonSet"), "4"))  # cold: foo all taken
    chosen = policy({"lowThresholds": {"cpu": 20}, "highThresholds": {"cpu": 60}})
    assert run(objects, chosen).evictions == []
    objects[-1] = with_foo(pod("hog", "cold", 0, cpu="100m", owner="DaemonSet"), "1")
    assert [e.target for e in run(objects, chosen).evictions] == ["cold"]
