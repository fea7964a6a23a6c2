"""The controllers' options (pure, pydantic): one model per controller, grouped in ``ControllerOptions``.

Each is frozen and refuses unknown fields, like the scheduler's and the descheduler's configuration; the CLI
and the chart set them through flags (``--nodeslo-spec-owner``) and the defaults are upstream's where there
is an upstream.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from operators.api import keys
from operators.api.config.scheduler import SchedulerConfig
from operators.api.quantity import Quantity


class _Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


class NodeSLOOptions(_Options):
    """Where Koordinator's slo-controller-config lives, the total of a node with no other source, and who
    owns the NodeSLO spec (``koordinator``: netaware writes status only)."""

    config_namespace: str = keys.SLO_CONFIG_NAMESPACE
    config_name: str = keys.SLO_CONFIG_NAME
    default_total: Quantity | None = None  # bits/s for nodes with no other source; None: unknown
    spec_owner: Literal["netaware", "koordinator"] = "netaware"


class NetworkTopologyOptions(_Options):
    """How often a NetworkTopology's status is recomputed: at most once per ``debounce_seconds`` after a
    change, and every ``resync_seconds`` regardless; ``default_capacity`` is a zone pair's bandwidth when the
    topology names none."""

    debounce_seconds: float = Field(10.0, ge=0)
    resync_seconds: float = Field(300.0, gt=0)
    default_capacity: Quantity = Field(default_factory=lambda: Quantity.parse("1G"))


class AppGroupOptions(_Options):
    """How often an AppGroup's status may be written: at most once per ``status_interval_seconds`` (the latest
    state is always written at the end of the interval), so that pods starting by the thousand cost a few
    writes per AppGroup, not one per pod."""

    status_interval_seconds: float = Field(1.0, ge=0)
    # ... and at most this many status writes a second in all, the AppGroups marked longest first (0: no limit)
    status_writes_per_second: float = Field(20.0, ge=0)
    # Topology-ordered scheduling: a gated pod is released this long after its creation whatever the order.
    gate_timeout_seconds: float = Field(60.0, gt=0, le=86400)
    # Releases by whole-group plans (AppGroups annotated ordered-scheduling: plan): on, the cache follows every
    # pod and the NetworkTopologies (a plan counts what each node has left); off, such AppGroups are released
    # dependencies first. The KubeSchedulerConfiguration whose NetworkOverhead/NetworkBandwidth arguments the
    # plans follow (the extender's), and each plan's search budget.
    plans: bool = False
    plan_config: SchedulerConfig = Field(default_factory=SchedulerConfig)
    plan_budget_seconds: float = Field(0.1, gt=0, le=60)
    # How a released pod carries its planned node: a required node affinity (kube-scheduler must follow it) or a
    # preferred one (weight 100: it may not).
    plan_affinity: Literal["required", "preferred"] = "required"
    # A group's first gated pods are planned once every workload has a pod and none arrived for 50 ms, or, while
    # a workload has none, once none arrived for this long (at most 30 s after the first); later arrivals are
    # planned against the placed ones. 1 s, was 0.1: an API server under load paused a 300-pod group's creations
    # for 0.65 s after its first pod, and the plan of that one pod fixed where the 299 others went.
    plan_window_seconds: float = Field(1.0, gt=0, le=10)


class NodeBandwidthOptions(_Options):
    """The bandwidth extended resources nodes advertise: per direction (``duplex``) or ingress + egress as one
    (``combined``), and the capacity of a node with no other source (the extender's ``defaultNodeBandwidth``)."""

    accounting_mode: Literal["duplex", "combined"] = "duplex"
    default_node_bandwidth: Quantity | None = None


class ControllerOptions(_Options):
    """The options of every controller of one ``netaware run`` process."""

    appgroup: AppGroupOptions = Field(default_factory=AppGroupOptions)
    networktopology: NetworkTopologyOptions = Field(default_factory=NetworkTopologyOptions)
    nodeslo: NodeSLOOptions = Field(default_factory=NodeSLOOptions)
    nodebandwidth: NodeBandwidthOptions = Field(default_factory=NodeBandwidthOptions)
