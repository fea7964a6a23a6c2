"""The probe's pure rules: P90, reported milliseconds, peer rotation, the row and its ConfigMap."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from operators.engine.measurement.probe import (
    Peer,
    RttWindow,
    chosen_peers,
    configmap,
    configmap_name,
    p90,
    reported_ms,
    row,
)


def test_p90_is_the_nearest_rank() -> None:
    assert p90([float(i) for i in range(1, 11)]) == 9.0  # ceil(0.9 * 10) = 9th of 10
    assert p90([5.0]) == 5.0
    assert p90([float(i) for i in range(1, 101)]) == 90.0
    window = RttWindow(size=3)
    for value in (9.0, 1.0, 2.0, 3.0):  # the oldest (9) falls out
        window.add(value)
    assert window.p90() == 3.0
    assert RttWindow().p90() is None


def test_milliseconds_as_upstreams_producer_writes_them() -> None:
    assert reported_ms(0.000050) == 1  # 50 µs: floor of 1 ms
    assert reported_ms(0.0259) == 25  # 25,900 µs // 1000, truncated
    assert reported_ms(0.002) == 2


def peers(zone: str, count: int, first: int = 0) -> list[Peer]:
    return [Peer(f"{zone}-n{i}", zone, f"10.0.0.{i}", 8765) for i in range(first, first + count)]


def test_own_zone_always_other_zones_rotate() -> None:
    cluster = peers("a", 3) + peers("b", 5) + peers("c", 2)
    chosen = chosen_peers("a-n0", "a", cluster, 2, 0)
    assert [p.node for p in chosen] == ["a-n1", "a-n2", "b-n0", "b-n1", "c-n0", "c-n1"]
    assert [p.node for p in chosen_peers("a-n0", "a", cluster, 2, 1)][2:4] == ["b-n2", "b-n3"]
    assert [p.node for p in chosen_peers("a-n0", "a", cluster, 2, 2)][2:4] == ["b-n4", "b-n0"]  # wraps
    assert len(chosen_peers("a-n0", "a", cluster, None, 0)) == 9  # everyone but itself


@given(zone_sizes=st.lists(st.integers(1, 9), min_size=1, max_size=4), per_zone=st.integers(1, 4))
def test_rotation_covers_every_pair(zone_sizes: list[int], per_zone: int) -> None:
    cluster = [peer for index, size in enumerate(zone_sizes) for peer in peers(f"z{index}", size)]
    me = cluster[0]
    rounds = math.ceil(max(zone_sizes) / per_zone)
    seen = {p.node for r in range(rounds) for p in chosen_peers(me.node, me.zone, cluster, per_zone, r)}
    assert seen == {p.node for p in cluster} - {me.node}
    for r in range(rounds):  # O(zones x K) per round, own zone aside
        others = [p for p in chosen_peers(me.node, me.zone, cluster, per_zone, r) if p.zone != me.zone]
        assert len(others) <= per_zone * (len(zone_sizes) - 1)


def test_the_row_in_upstreams_key_format_without_stale_peers() -> None:
    data = row("n1", {"n2": 0.0031, "n3": 0.0004, "n4": 0.020}, {"n2": 100.0, "n3": 95.0, "n4": 10.0}, 100.0, 60.0)
    assert data == {
        "netperf.p90.latency.milliseconds.origin.n1.destination.n2": "3",
        "netperf.p90.latency.milliseconds.origin.n1.destination.n3": "1",
    }  # n4 last measured 90 s ago, beyond the 60 s TTL


def test_the_configmap_is_labelled_for_the_topology_and_owned_by_the_node() -> None:
    body = configmap("net", "nt", "n1", "uid-1", {"k": "1"})
    assert body["metadata"]["name"] == "netperf-nt-n1"
    assert body["metadata"]["labels"]["networktopology.diktyo.x-k8s.io/netperf"] == "nt"
    assert body["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "uid-1"}]
    long = configmap_name("nt", "n" * 300)
    assert len(long) == 253 and long.startswith("netperf-nt-nnn")
