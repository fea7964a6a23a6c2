"""kube-scheduler's default profile's scores the engine models (pure): PodTopologySpread (the pod's
``ScheduleAnyway`` constraints, else the cluster's default ones) and InterPodAffinity (the pod's preferred terms,
and the placed pods' required affinity — ``hardPodAffinityWeight`` — and preferred terms towards it), each over the
nodes that passed the filters, raw and normalised to 0..100 as upstream does. A plugin with nothing to score
(upstream's PreScore Skip) gives no column."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from operators.api.config.scheduler import INTER_POD_AFFINITY, TOPOLOGY_SPREAD
from operators.api.errors import FieldError
from operators.engine.cluster.kube import interpod, spread
from operators.engine.cluster.kube.filters import allows
from operators.engine.cluster.kube.terms import SpreadConstraint, scheduling_spec
from operators.engine.cluster.kube.view import PlacedPods
from operators.engine.cluster.objects import Node, Pod


def scores(pod: Pod, placed: PlacedPods, nodes: Sequence[Node], enabled: Mapping[str, int],
           defaults: Sequence[SpreadConstraint] | None = None) -> dict[str, tuple[list[int], list[int]]]:  # fmt: skip
    """plugin -> (raw, normalised) per node of ``nodes``, for the plugins of ``enabled`` (``defaults``: the
    configuration's default spread constraints; None: the system's)."""
    try:
        spec = scheduling_spec(pod)
    except FieldError:
        return {}  # the filters refused the pod on every node already
    out: dict[str, tuple[list[int], list[int]]] = {}
    if TOPOLOGY_SPREAD in enabled and nodes:
        state = spread.prescore(pod, spec, placed, nodes, allows, defaults)
        if state is not None:
            raw = [spread.score(state, node) for node in nodes]
            out[TOPOLOGY_SPREAD] = (raw, spread.normalize(state, nodes, raw))
    if INTER_POD_AFFINITY in enabled and nodes:
        counts = interpod.prescore(pod, spec, placed)
        if counts:
            raw = [interpod.score(counts, node) for node in nodes]
            out[INTER_POD_AFFINITY] = (raw, interpod.normalize(raw, True))
    return out
