"""The descheduler's eviction limits, shared by every plugin of a cycle (pure): ``maxNoOfPodsToEvictPerNode``,
``...PerNamespace`` and ``...Total`` count what LowNodeLoad and the rebalancer evict together, as upstream's one
evictor counts for all its plugins."""

from __future__ import annotations

from dataclasses import dataclass, field

from operators.api.config.descheduler import DeschedulerPolicy

TOTAL, NODE, NAMESPACE = "total", "node", "namespace"


@dataclass
class EvictionLimits:
    per_node: int | None = None
    per_namespace: int | None = None
    total: int | None = None
    nodes: dict[str, int] = field(default_factory=dict)
    namespaces: dict[str, int] = field(default_factory=dict)
    count: int = 0

    @classmethod
    def of(cls, policy: DeschedulerPolicy) -> EvictionLimits:
        return cls(
            policy.max_no_of_pods_to_evict_per_node,
            policy.max_no_of_pods_to_evict_per_namespace,
            policy.max_no_of_pods_to_evict_total,
        )

    def refusal(self, namespace: str, node: str) -> tuple[str, str]:
        """("", "") when one more eviction of a pod of ``namespace`` from ``node`` is within every limit, else
        (which limit: total, node or namespace, and a message naming it)."""
        if self.total is not None and self.count >= self.total:
            return TOTAL, f"maxNoOfPodsToEvictTotal {self.total} reached"
        if self.per_node is not None and self.nodes.get(node, 0) >= self.per_node:
            return NODE, f"maxNoOfPodsToEvictPerNode {self.per_node} reached on {node}"
        if self.per_namespace is not None and self.namespaces.get(namespace, 0) >= self.per_namespace:
            return NAMESPACE, f"maxNoOfPodsToEvictPerNamespace {self.per_namespace} reached in {namespace}"
        return "", ""

    def record(self, namespace: str, node: str) -> None:
        self.count += 1
        self.nodes[node] = self.nodes.get(node, 0) + 1
        self.namespaces[namespace] = self.namespaces.get(namespace, 0) + 1
