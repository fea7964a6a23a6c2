"""What every plan on one snapshot reads, kept once in the cluster's index (``ClusterIndex.headroom``): per node,
its allocatable less what its pods request and its pods limit less its pods; read-only, so that two plans on one
index are the plans of two fresh ones."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from operators.engine.planning.plan import plan_appgroup
from operators.engine.scheduling.index import ClusterIndex
from operators.engine.simulation import ordered
from tests.support.planning import CONFIG, group_index, node, pod, topology


def objects() -> list[dict[str, Any]]:
    """n1 (za) with 3 of its 4 cpus and 2 pods used, n2 (za) idle, n3 (zb) with 1 cpu used; a -> b, 2 pods each."""
    load = [pod("load-1", "x", on="n1", cpu="2", group="other"), pod("load-2", "x", on="n1", cpu="1", group="other"),
            pod("load-3", "x", on="n3", cpu="1", group="other")]  # fmt: skip
    return [node("n1", "za"), node("n2", "za"), node("n3", "zb"), topology(5), *load,
            *(pod(f"{w}-{i}", w, cpu="1") for w in "ab" for i in range(2))]  # fmt: skip


def index() -> ClusterIndex:
    group = ordered.appgroup("pair", {"a": ["b"], "b": []})
    return group_index(objects(), group)


def test_the_headroom_is_allocatable_less_requests_per_node() -> None:
    free, pods = index().headroom(("cpu",))
    assert free.tolist() == [[1000], [4000], [3000]]  # millicores: 4000 - 3000, 4000, 4000 - 1000
    assert pods.tolist() == [108, 110, 109]  # a pods limit of 110 less the pods on each node
    with pytest.raises(ValueError, match="read-only"):
        free[0, 0] = 0  # shared by every plan on the snapshot: a plan's state works on its own copy


def test_plans_on_one_index_are_the_plans_of_fresh_indexes() -> None:
    group = ordered.appgroup("pair", {"a": ["b"], "b": []})
    shared = index()
    first, second = (plan_appgroup(shared, group, CONFIG, seed) for seed in (0, 1))
    assert first.pods == plan_appgroup(index(), group, CONFIG, 0).pods
    assert second.pods == plan_appgroup(index(), group, CONFIG, 1).pods
    assert np.array_equal(shared.headroom(("cpu",))[0], index().headroom(("cpu",))[0])
