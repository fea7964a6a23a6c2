"""The agent's measurements as the node's published usage (pure): NodeSLO ``status.networkUsage`` from the rates of
two counter readings, and when a new report is worth an API write.

A report is written when the node's rate in a direction moved by more than :data:`SIGNIFICANT` of the node's
total (or of its last value, whichever is larger: a quiet node's small changes are not news), or when the last
report is older than ``max_age`` (so readers can tell a steady node from a dead agent). The agent measures once
per report interval, so there is at most one write per node per interval, and none while nothing changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from operators.api.nodeslo import DirectionUsage, NetworkUsage

SIGNIFICANT = 0.05


@dataclass(frozen=True)
class Rates:
    """bits/s per direction: the node's (root class), per class name, per pod key; over ``seconds``."""

    node: Mapping[str, int]
    classes: Mapping[str, Mapping[str, int]]  # direction -> class -> bits/s
    pods: Mapping[str, Mapping[str, int]]  # direction -> pod key -> bits/s
    seconds: float


def usage_report(rates: Rates, now: datetime) -> NetworkUsage:
    def by_name(table: Mapping[str, Mapping[str, int]]) -> dict[str, DirectionUsage]:
        names = sorted(set(table.get("ingress", {})) | set(table.get("egress", {})))
        return {
            name: DirectionUsage(
                ingress=table.get("ingress", {}).get(name, 0), egress=table.get("egress", {}).get(name, 0)
            )
            for name in names
        }

    return NetworkUsage(
        ingress=rates.node.get("ingress", 0),
        egress=rates.node.get("egress", 0),
        classes=by_name(rates.classes),
        pods={key: usage for key, usage in by_name(rates.pods).items() if usage.ingress or usage.egress},
        update_time=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        window_seconds=round(rates.seconds, 3),
    )


def worth_writing(last: NetworkUsage | None, new: NetworkUsage, total: int, now: datetime, max_age: float) -> bool:
    """Whether ``new`` should replace ``last`` in the API (see the module docstring)."""
    if last is None:
        return True
    try:
        written = datetime.fromisoformat(last.update_time.replace("Z", "+00:00"))
    except ValueError:
        return True
    if (now - written).total_seconds() >= max_age:
        return True
    for before, after in ((last.ingress, new.ingress), (last.egress, new.egress)):
        if abs(after - before) > SIGNIFICANT * max(total, before):
            return True
    return False
