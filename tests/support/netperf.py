"""The seeds' netperf measurements as a ConfigMap's data (the NetworkTopology tests' input)."""

from __future__ import annotations

KEY = "netperf.p90.latency.milliseconds.origin.{}.destination.{}"


def seeds_matrix() -> dict[str, str]:
    """A synthetic netperf matrix for the seeds' 8 nodes with hand-picked values."""
    zone = {f"n-{i}": f"Z{(i + 1) // 2}" for i in range(1, 9)}
    region = {f"n-{i}": "us-west-1" if i <= 4 else "us-east-1" for i in range(1, 9)}
    special = {("n-1", "n-3"): 4, ("n-1", "n-4"): 6, ("n-2", "n-3"): 5, ("n-2", "n-4"): 7, ("n-1", "n-5"): 100}
    data = {}
    for a, zone_a in zone.items():
        for b, zone_b in zone.items():
            if a == b:
                continue
            if zone_a == zone_b:
                value = 1
            elif region[a] == region[b]:
                value = special.get((a, b), 5 if region[a] == "us-west-1" else 10)
            else:
                value = special.get((a, b), 20 if region[a] == "us-west-1" else 30)
            data[KEY.format(a, b)] = str(value)
    return data
