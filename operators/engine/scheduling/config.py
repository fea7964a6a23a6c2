"""The scheduler configuration netaware reads: a KubeSchedulerConfiguration (pure, pydantic).

The whole document is validated when it is loaded, with errors naming the field path:

1. ``apiVersion`` is ``kubescheduler.config.k8s.io/v1`` and ``kind`` is ``KubeSchedulerConfiguration``
   (a DeschedulerConfiguration or a Pod is refused, not half-read).
2. The top-level fields and each profile's fields are kube-scheduler's own; an unknown one is an error
   (a typo would otherwise be ignored silently). kube-scheduler's own settings (``extenders``,
   ``leaderElection``, ...) are accepted and not interpreted: the same file can serve both.
3. The first profile's ``plugins`` (``multiPoint``, ``filter``, ``score``) enable netaware's plugins
   with a weight of at least 1 (upstream: "resource weight ... should be a positive value"); in-tree
   plugins are kube-scheduler's business and are skipped.
4. ``pluginConfig`` args of ``NetworkOverhead``, ``NetworkBandwidth`` and ``NodeResourcesAllocatable``
   are read with their upstream defaults; unknown args are errors.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from operators.api.quantity import BandwidthField

API_VERSION = "kubescheduler.config.k8s.io/v1"


class _Strict(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")


class PluginRef(_Strict):
    name: str
    weight: int | None = Field(default=None, ge=1, le=100)


class PluginSet(_Strict):
    enabled: list[PluginRef] = []
    disabled: list[PluginRef] = []


class Plugins(_Strict):
    pre_enqueue: PluginSet | None = None
    queue_sort: PluginSet | None = None
    pre_filter: PluginSet | None = None
    filter: PluginSet | None = None
    post_filter: PluginSet | None = None
    pre_score: PluginSet | None = None
    score: PluginSet | None = None
    reserve: PluginSet | None = None
    permit: PluginSet | None = None
    pre_bind: PluginSet | None = None
    bind: PluginSet | None = None
    post_bind: PluginSet | None = None
    multi_point: PluginSet | None = None


class PluginConfig(_Strict):
    name: str
    args: dict[str, Any] = {}


class Profile(_Strict):
    scheduler_name: str | None = None
    percentage_of_nodes_to_score: int | None = Field(default=None, ge=0, le=100)
    plugins: Plugins | None = None
    plugin_config: list[PluginConfig] = []


class KubeSchedulerConfiguration(_Strict):
    api_version: Literal["kubescheduler.config.k8s.io/v1"]
    kind: Literal["KubeSchedulerConfiguration"]
    profiles: list[Profile] = []
    # kube-scheduler's own settings: accepted, not interpreted
    parallelism: int | None = None
    leader_election: dict[str, Any] | None = None
    client_connection: dict[str, Any] | None = None
    healthz_bind_address: str | None = None
    metrics_bind_address: str | None = None
    enable_profiling: bool | None = None
    enable_contention_profiling: bool | None = None
    percentage_of_nodes_to_score: int | None = Field(default=None, ge=0, le=100)
    pod_initial_backoff_seconds: int | None = None
    pod_max_backoff_seconds: int | None = None
    extenders: list[dict[str, Any]] | None = None
    delay_cache_until_active: bool | None = None


class _Args(_Strict):
    # upstream args documents may carry their own apiVersion and kind
    api_version: str | None = None
    kind: str | None = None


class NetworkOverheadArgsDoc(_Args):
    namespaces: list[str] = Field(default=["default"], min_length=1)
    weights_name: str = "UserDefined"
    network_topology_name: str = "nt-default"


class NetworkBandwidthArgsDoc(_Args):
    accounting_mode: Literal["duplex", "combined"] = "duplex"
    default_node_bandwidth: BandwidthField | None = None


class ResourceWeight(_Strict):
    name: str
    weight: int = Field(default=1, ge=1)


class NodeResourcesAllocatableArgsDoc(_Args):
    mode: Literal["Least", "Most"] = "Least"
    resources: list[ResourceWeight] = []


ARGS: dict[str, type[_Args]] = {
    "NetworkOverhead": NetworkOverheadArgsDoc,
    "NetworkBandwidth": NetworkBandwidthArgsDoc,
    "NodeResourcesAllocatable": NodeResourcesAllocatableArgsDoc,
}
