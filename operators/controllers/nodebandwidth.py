"""The ``nodebandwidth`` controller: every node advertises netaware's bandwidth extended resources, a thin shell
over :mod:`operators.engine.status.node_bandwidth` (the rule).

* Nodes, NodeSLOs and pods come from the process's cluster cache. A node is queued when it comes, when its
  capacity inputs or its advertised resources change (someone else wrote them: they are put back), when its
  NodeSLO changes, and when the bandwidth of its unaccounted pods changes (pods that request none of the
  resources: created before them, or while the webhook was down). Pods that carry the resources change nothing
  here: kube-scheduler counts them itself.
* A queued node's wanted resources are compared with its status and written only when they differ, as one
  JSON merge patch of ``nodes/<name>/status`` (``capacity`` and ``allocatable``; the documented way to advertise
  an extended resource). Its own write comes back as a node change that asks for nothing.
* A node that advertises 0 because its capacity or usage is unknown gets a Warning Event
  ``NetworkBandwidthUnknown`` naming why, once per reason.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

import kopf
from kubernetes_asyncio.client.exceptions import ApiException

from operators.api.config.controllers import NodeBandwidthOptions
from operators.api.quantity import Quantity
from operators.controllers.metrics import reconciler
from operators.controllers.workqueue import WorkQueue
from operators.engine.cluster.bandwidth import CAPACITY_ANNOTATIONS, Accounting, slo_network_total
from operators.engine.cluster.objects import Node
from operators.engine.cluster.usage import PodUsage
from operators.engine.status.node_bandwidth import advertised, advertisement, status_patch, unaccounted_usage
from operators.kube import MERGE_PATCH, post_event, send_json
from operators.sources.cache import ClusterCache
from operators.sources.kinds import NODES, NODESLOS, PODS
from operators.sources.store import Change
from operators.supervision import Supervisor

logger = logging.getLogger("netaware.nodebandwidth")
WORKERS = 4  # nodes written at once (the first sync of a large cluster writes each node once)


@dataclass
class _State:
    options: NodeBandwidthOptions
    accounting: Accounting
    usage: PodUsage
    nodes: dict[str, Node] = dataclasses.field(default_factory=dict)
    slo_totals: dict[str, Quantity | None] = dataclasses.field(default_factory=dict)
    reported: dict[str, str] = dataclasses.field(default_factory=dict)  # node -> the problem last posted
    work: WorkQueue = dataclasses.field(
        default_factory=lambda: WorkQueue(logger, "node %s: advertising failed", "nodebandwidth")
    )

    def enqueue(self, name: str) -> None:
        self.work.enqueue(name)

    def on_changes(self, changes: list[Change]) -> None:
        for change in changes:
            if change.kind == PODS.name:
                for name in self.usage.apply(change.old, change.new):
                    self.enqueue(name)
            elif change.kind == NODESLOS.name:
                name = (change.new or change.old).metadata.name
                total = slo_network_total(change.new) if change.new is not None else None
                if total != self.slo_totals.get(name):
                    self.slo_totals[name] = total
                    self.enqueue(name)
            elif change.kind == NODES.name:
                if change.new is None:
                    self.nodes.pop(change.old.name, None)
                    self.reported.pop(change.old.name, None)
                    continue
                node: Node = change.new
                previous = self.nodes.get(node.name)
                self.nodes[node.name] = node
                if previous is None or _inputs(previous) != _inputs(node):
                    self.enqueue(node.name)


def _inputs(node: Node) -> tuple[Any, ...]:
    """What a node's advertisement depends on, or shows, of the node itself."""
    return (tuple(node.annotations.get(key) for key in CAPACITY_ANNOTATIONS), advertised(node), dict(node.capacity))


@reconciler("nodebandwidth")
async def advertise(api: Any, state: _State, name: str) -> None:
    """Bring one node's advertised bandwidth to what the rule wants."""
    node = state.nodes.get(name)
    if node is None:
        return
    wanted = advertisement(
        node, state.slo_totals.get(name), state.options.default_node_bandwidth, state.usage, state.accounting
    )
    patch = status_patch(node, wanted)
    if patch is not None:
        try:
            await send_json(api, "PATCH", f"/api/v1/nodes/{name}/status", patch, MERGE_PATCH)
        except ApiException as error:
            if error.status != 404:  # a node deleted meanwhile needs nothing
                raise
            return
    if wanted.problem and state.reported.get(name) != wanted.problem:
        state.reported[name] = wanted.problem
        involved = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node.uid}
        message = f"{wanted.problem}; the node advertises 0 bandwidth: pods that ask for bandwidth do not fit it"
        await post_event(api, involved, "Warning", "NetworkBandwidthUnknown", message, "netaware-nodebandwidth")
    elif not wanted.problem:
        state.reported.pop(name, None)


def register(
    registry: kopf.OperatorRegistry,
    cache: ClusterCache,
    options: NodeBandwidthOptions,
    supervisor: Supervisor | None = None,
) -> None:
    """Add the node bandwidth advertiser to ``registry``; nodes, NodeSLOs and pods are read from ``cache``."""

    @kopf.on.startup(id="nodebandwidth_state", registry=registry)
    async def init_state(memo: kopf.Memo, **_: Any) -> None:
        accounting = Accounting(options.accounting_mode)
        state = _State(options, accounting, unaccounted_usage(accounting))
        memo.nodebandwidth = state
        state.on_changes(cache.subscribe(state.on_changes, asyncio.get_running_loop()))

        state.work.start(WORKERS, cache.wait_synced, lambda name: advertise(memo.api, state, name), supervisor)

    @kopf.on.cleanup(id="nodebandwidth_workers", registry=registry)
    async def stop_workers(memo: kopf.Memo, **_: Any) -> None:
        state: _State | None = getattr(memo, "nodebandwidth", None)
        if state is not None:
            await state.work.stop()
