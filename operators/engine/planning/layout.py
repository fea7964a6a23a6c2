"""The rebalancer's layout of an AppGroup, as the plan's release follows it (pure).

The descheduler's rebalancer moves an AppGroup's pods toward a target layout (per workload, how many pods on each
node) and writes it, with the moves it made, on the AppGroup (annotation ``netaware.io/rebalance``) before it evicts.
Until the layout's ``until``, a pending pod of a workload with fewer pods on some layout node than the layout says
(a *deficit*) is planned on those nodes only — so an evicted pod's replacement lands where the move said. Pods
beyond the deficits (a scale-up) and pods after ``until`` are planned as usual. An unreadable annotation is ignored
(the plan then decides alone) and reported by ``explain appgroup``.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from operators.api import keys
from operators.api.appgroup import AppGroup
from operators.api.meta import format_time, parse_time

Layout = Mapping[str, Mapping[str, int]]  # workload selector -> node -> pods


@dataclass(frozen=True)
class Rebalancing:
    """What the annotation holds: the layout, until when it holds (seconds since the epoch), the moves made."""

    layout: Layout
    until: float
    moves: tuple[Mapping[str, Any], ...] = ()

    def to_annotation(self) -> str:
        until = format_time(datetime.datetime.fromtimestamp(self.until, datetime.UTC))
        layout = {workload: dict(sorted(nodes.items())) for workload, nodes in sorted(self.layout.items())}
        return json.dumps({"until": until, "layout": layout, "moves": list(self.moves)}, separators=(",", ":"))


def rebalancing_of(group: AppGroup) -> Rebalancing | None:
    """The annotation read (None when absent or unreadable)."""
    text = (group.metadata.annotations or {}).get(keys.REBALANCE)
    if not text:
        return None
    try:
        document = json.loads(text)
        until = parse_time(document["until"]).timestamp()
        layout = {
            str(workload): {str(node): int(count) for node, count in nodes.items()}
            for workload, nodes in document["layout"].items()
        }
        moves = tuple(move for move in document.get("moves") or () if isinstance(move, dict))
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    return Rebalancing(layout, until, moves)


def layout_at(group: AppGroup, now: float) -> Layout | None:
    """The layout the release follows at ``now``: the annotation's, until its time."""
    found = rebalancing_of(group)
    return found.layout if found is not None and now < found.until else None
