"""NodeResourcesAllocatable (seed 001): the weighted sum of a node's allocatable cpu (millicores) and memory
(bytes), negated in ``Least`` mode; min-max normalised to 0..100.

Departure from upstream, documented: upstream divides the weighted sum by the total weight (truncating);
here the sum is not divided — min-max normalisation over the candidates makes the two orderings and the
normalised scores the same except for truncation at the last unit.
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
