"""NodeResourcesAllocatable (seed 001), as upstream computes it: per node, the weighted sum of its allocatable
resources (cpu in millicores, memory in bytes), negated in ``Least`` mode, divided by the sum of the weights and
truncated toward zero (Go's integer division); then min-max normalised to 0..100 (``(s - min) * 100 // (max -
min)``, all equal: 0).
"""

from __future__ import annotations

from operators.api.config.scheduler import NodeResourcesAllocatableArgs
from operators.engine.scheduling.normalize import normalize_min_max
from operators.engine.scheduling.table import Ints, NodeTable, allocatable_score

NAME = "NodeResourcesAllocatable"
__all__ = ["NAME", "allocatable_score", "normalize", "score"]


def score(table: NodeTable, args: NodeResourcesAllocatableArgs) -> Ints:
    return table.allocatable(args)


normalize = normalize_min_max
