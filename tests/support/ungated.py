"""The extender's state for the plan-ungated tests: n1 and n2 in zone za, n3 in zb (5 between the zones), the
dependency a -> b of AppGroup pair, a-0 bound on n1; from a snapshot, or kept live from a cache as the extender
that places pods at admission keeps it; and what those tests read of it."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
from prometheus_client import CollectorRegistry

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.engine.cluster.objects import Pod
from operators.engine.cluster.snapshot import build_snapshot
from operators.engine.simulation import ordered
from operators.extender.admission import AdmittedPods
from operators.extender.answers import ExtenderState
from operators.extender.live import KINDS, LiveIndex
from operators.extender.plans import PlanMetrics
from operators.extender.server import Call, filter_body
from operators.sources.cache import ClusterCache
from operators.sources.kinds import APPGROUP_SPECS, NETWORKTOPOLOGIES, NODES, PODS
from tests.support.planning import CONFIG, node, pod, topology

NAMES = ["n1", "n2", "n3"]


def group_with(mode: str, name: str = "pair", graph: dict[str, list[str]] | None = None) -> AppGroup:
    group = ordered.appgroup(name, graph or {"a": ["b"], "b": []})
    meta = group.metadata.model_copy(update={"annotations": {keys.ORDERED_SCHEDULING: mode}})
    return group.model_copy(update={"metadata": meta})


def state_of(
    *pending: dict[str, Any],
    mode: str = "plan-ungated",
    n1_pods: str = "2",
    placed: tuple[dict[str, Any], ...] = (),
    groups: tuple[AppGroup, ...] = (),
) -> ExtenderState:
    """The module's cluster with a-0 bound on n1, the ``placed`` pods too, and ``pending``; AppGroup pair in
    ``mode``, and ``groups``."""
    objects = [node("n1", "za", pods=n1_pods), node("n2", "za"), node("n3", "zb"), topology(5)]
    snapshot = replace(build_snapshot([*objects, pod("a-0", "a", on="n1"), *placed, *pending]),
                       app_groups=(group_with(mode), *groups))  # fmt: skip
    state = ExtenderState(lambda: snapshot, CONFIG)
    state.follower.metrics = PlanMetrics.create(CollectorRegistry())
    return state


def placing_state_of(
    *pending: dict[str, Any],
    mode: str = "plan-ungated",
    n1_pods: str = "2",
    placed: tuple[dict[str, Any], ...] = (),
    groups: tuple[AppGroup, ...] = (),
) -> tuple[ExtenderState, ClusterCache]:
    """:func:`state_of`'s cluster in a cache, its index kept live (as ``compose.extender`` keeps it), and the pods
    placed at admission counted in it: the state and the cache (apply events to it to show the pods)."""
    cache = ClusterCache(KINDS)
    kinds = {"Node": NODES, "Pod": PODS, "NetworkTopology": NETWORKTOPOLOGIES}
    objects = [node("n1", "za", pods=n1_pods), node("n2", "za"), node("n3", "zb"), topology(5)]
    for raw in [*objects, pod("a-0", "a", on="n1"), *placed, *pending]:
        cache.apply(kinds[raw["kind"]], "ADDED", raw)
    for group in (group_with(mode), *groups):
        cache.apply(APPGROUP_SPECS, "ADDED", group.model_dump(mode="json", by_alias=True, exclude_none=True))
    live = LiveIndex(cache, CONFIG.bandwidth.default_node_bandwidth)
    state = ExtenderState(cache.snapshot, CONFIG, indexes=live.current, live=live)
    state.follower.metrics = PlanMetrics.create(CollectorRegistry())
    state.follower.admitted = AdmittedPods(live.count)
    cache.subscribe(state.follower.admitted.on_changes)
    return state, cache


def filter_of(state: ExtenderState, raw: dict[str, Any], names: list[str] = NAMES) -> dict[str, Any]:
    return dict(orjson.loads(filter_body(Call(state, state.index(), Pod.parse(raw), list(names), None))[0]))


def counted(state: ExtenderState, result: str) -> float:
    assert state.follower.metrics is not None
    return state.follower.metrics.pods.labels(result)._value.get()


def plans_made(state: ExtenderState) -> float:
    assert state.follower.metrics is not None
    return next(s.value for s in state.follower.metrics.plans.collect()[0].samples if s.name.endswith("_count"))
