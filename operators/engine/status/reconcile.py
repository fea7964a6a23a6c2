"""Everything the controllers would write, computed from one snapshot.

``reconcile(snapshot, now)`` is what ``netaware reconcile`` prints and what the live
controllers write, object by object; that is how the offline CLI and the operator
agree by construction. Each controller contributes one pure function here as it lands;
objects whose controller has not landed yet are returned as they came.
"""

from __future__ import annotations

import datetime
from typing import Any

from operators.api.config.controllers import NodeSLOOptions
from operators.api.nodeslo import NodeSLO
from operators.engine.cluster.objects import Node
from operators.engine.cluster.snapshot import Snapshot
from operators.engine.status.appgroup import appgroup_status
from operators.engine.status.networktopology import networktopology_result
from operators.engine.status.nodeslo import as_written, render_all, render_nodeslo
from operators.engine.status.sloconfig import ConfigState, update_config


def reconcile(
    snapshot: Snapshot, now: datetime.datetime, nodeslo: NodeSLOOptions | None = None
) -> list[dict[str, Any]]:
    """The AppGroups, NetworkTopologies and NodeSLOs of the snapshot, as the controllers would write them."""
    objects: list[dict[str, Any]] = []
    for group in snapshot.app_groups:
        objects.append(group.model_copy(update={"status": appgroup_status(group, snapshot, now)}).to_wire())
    objects.extend(
        networktopology_result(topology, snapshot, now).topology.to_wire() for topology in snapshot.network_topologies
    )
    options = nodeslo or NodeSLOOptions()
    state = slo_config_state(snapshot, options)
    existing = {slo.metadata.name: slo for slo in snapshot.node_slos}
    for slo in render_all(snapshot.nodes, state, existing, options, now):
        found = existing.get(slo.metadata.name)
        objects.append(as_written(found.to_wire() if found is not None else None, slo, options))
    return objects


def slo_config_state(snapshot: Snapshot, options: NodeSLOOptions) -> ConfigState:
    """The network QoS configuration in force: the snapshot's ``slo-controller-config`` (none: empty)."""
    config_map = snapshot.config_map_by_key.get((options.config_namespace, options.config_name))
    return update_config(ConfigState(), config_map.data if config_map else None, snapshot.nodes)


def node_slo_as_written(
    snapshot: Snapshot, node: Node, options: NodeSLOOptions, now: datetime.datetime
) -> NodeSLO | None:
    """``node``'s NodeSLO as the controller would write it from ``snapshot`` (what ``reconcile`` prints for it): the
    snapshot's NodeSLO with the configuration applied, or one rendered from the configuration; None when the
    snapshot has neither a NodeSLO for the node nor a ``slo-controller-config``."""
    found = next((slo for slo in snapshot.node_slos if slo.metadata.name == node.name), None)
    if (options.config_namespace, options.config_name) not in snapshot.config_map_by_key:
        return found
    rendered = render_nodeslo(node, slo_config_state(snapshot, options), found, options, now)
    return NodeSLO.model_validate(as_written(found.to_wire() if found is not None else None, rendered, options))
