"""The descheduler's metrics: evictions, node utilization, the rebalancer's moves, costs and imbalance. The series
labelled by node, namespace or AppGroup are removed with their objects (:meth:`DeschedulerMetrics.prune`, once per
cycle), so they do not grow with every object that ever existed."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge

from operators.engine.cluster.snapshot import Snapshot
from operators.series import Series


@dataclass
class DeschedulerMetrics:
    """The descheduler's metrics; the series labelled by node, namespace or AppGroup go with their objects
    (:meth:`prune`)."""

    registry: CollectorRegistry
    evicted: Series  # (result, node, namespace)
    utilization: Series  # (node, resource): deprecated, percent
    ratio: Series  # (node, resource)
    moves: Counter
    cost: Series  # (appgroup, when)
    imbalance: Gauge

    def prune(self, snapshot: Snapshot) -> None:
        """Remove the series of nodes, namespaces (no pod left) and AppGroups the cluster no longer has."""
        nodes = snapshot.node_by_name
        namespaces = {pod.namespace for pod in snapshot.pods}
        groups = {f"{group.metadata.namespace}/{group.metadata.name}" for group in snapshot.app_groups}
        self.evicted.prune(lambda values: values[1] not in nodes or values[2] not in namespaces)
        self.utilization.prune(lambda values: values[0] not in nodes)
        self.ratio.prune(lambda values: values[0] not in nodes)
        self.cost.prune(lambda values: values[0] not in groups)

    @classmethod
    def create(cls, registry: CollectorRegistry | None = None) -> DeschedulerMetrics:
        registry = registry or CollectorRegistry()
        return cls(
            registry,
            Series(
                Counter(
                    "descheduler_pods_evicted",
                    "Eviction attempts by the descheduler, by result (success, refused, gone, error, dry-run).",
                    ["result", "node", "namespace"],
                    registry=registry,
                )
            ),
            Series(
                Gauge(
                    "netaware_node_utilization_percent",
                    "Deprecated (0.2.0, removed in 0.3.0): netaware_node_utilization_ratio x 100.",
                    ["node", "resource"],
                    registry=registry,
                )
            ),
            Series(
                Gauge(
                    "netaware_node_utilization_ratio",
                    "Each node's usage of the policy's resources (netBandwidth included) over its capacity, as of the "
                    "last cycle (1: full).",
                    ["node", "resource"],
                    registry=registry,
                )
            ),
            Counter(
                "netaware_rebalance_moves",
                "The rebalancer's moves, by result (proposed, applied, refused, landed, missed, dry-run).",
                ["result"],
                registry=registry,
            ),
            Series(
                Gauge(
                    "netaware_rebalance_appgroup_cost",
                    "A plan-mode AppGroup's dependency-edge cost as the last cycle found it (before), after its "
                    "moves, and the planner's from scratch (planned).",
                    ["appgroup", "when"],
                    registry=registry,
                )
            ),
            Gauge(
                "netaware_rebalance_imbalance",
                "Sum over nodes of (free bandwidth / 100 Mbit/s) squared, before and after the last cycle's moves.",
                ["when"],
                registry=registry,
            ),
        )
