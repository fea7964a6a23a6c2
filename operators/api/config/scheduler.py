"""The scheduler configuration netaware reads: a KubeSchedulerConfiguration (pure, pydantic).

The whole document is validated when it is loaded, with errors naming the field path:

1. ``apiVersion`` is ``kubescheduler.config.k8s.io/v1`` and ``kind`` is ``KubeSchedulerConfiguration``
   (a DeschedulerConfiguration or a Pod is refused, not half-read).
2. The top-level fields and each profile's fields are kube-scheduler's own; an unknown one is an error
   (a typo would otherwise be ignored silently). kube-scheduler's own settings (``extenders``,
   ``leaderElection``, ...) are accepted and not interpreted: the same file can serve both.
3. The first profile's ``plugins`` (``multiPoint``, ``filter``, ``score``) enable netaware's plugins
   with a weight of at least 1 (upstream: "resource weight ... should be a positive value"); of the in-tree
   plugins, the default profile's filters the engine models (:data:`IN_TREE_FILTERS`) are on unless disabled, as
   in kube-scheduler's default profile: ``netaware schedule`` and the planner apply them, the extender never does
   (kube-scheduler ran them before asking).
4. ``pluginConfig`` args of ``NetworkOverhead``, ``NetworkBandwidth``, ``NodeResourcesAllocatable`` and of the
   in-tree ``PodTopologySpread`` (``defaultConstraints``, ``defaultingType``) are read with their upstream
   defaults; unknown args of netaware's plugins are errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import pydantic
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from operators.api import keys
from operators.api.errors import FieldError, from_pydantic, join_path
from operators.api.quantity import BandwidthField, Quantity

NETWORK_OVERHEAD, NETWORK_BANDWIDTH, ALLOCATABLE = "NetworkOverhead", "NetworkBandwidth", "NodeResourcesAllocatable"
PLUGINS = (NETWORK_OVERHEAD, NETWORK_BANDWIDTH, ALLOCATABLE)
FILTER_PLUGINS = (NETWORK_OVERHEAD, NETWORK_BANDWIDTH)
RESOURCES_FIT = "NodeResourcesFit"  # kube-scheduler's own filter, applied by `netaware schedule` (never the extender)
# kube-scheduler's default profile's filters the engine models, in the order it runs them (the extender runs none:
# kube-scheduler did before asking it)
IN_TREE_FILTERS = ("NodeUnschedulable", "TaintToleration", "NodeAffinity", "NodePorts", RESOURCES_FIT,
                   "VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone", "PodTopologySpread",
                   "InterPodAffinity")  # fmt: skip
TOPOLOGY_SPREAD = "PodTopologySpread"
INTER_POD_AFFINITY = "InterPodAffinity"
# kube-scheduler's default profile's scores the engine models, with their default weights (the others it runs —
# NodeResourcesFit's LeastAllocated, BalancedAllocation, TaintToleration, NodeAffinity, ImageLocality,
# VolumeBinding — are not modelled; the extender never computes any: kube-scheduler does)
IN_TREE_SCORES = {TOPOLOGY_SPREAD: 2, INTER_POD_AFFINITY: 2}
ModelT = TypeVar("ModelT", bound=pydantic.BaseModel)

API_VERSION = "kubescheduler.config.k8s.io/v1"


# --- the plugins' arguments as the cycle uses them --------------------------------------------------------


@dataclass(frozen=True)
class NetworkOverheadArgs:
    namespaces: tuple[str, ...] = ("default",)
    weights_name: str = keys.USER_DEFINED_WEIGHT
    network_topology_name: str = "nt-default"


@dataclass(frozen=True)
class NetworkBandwidthArgs:
    accounting_mode: Literal["duplex", "combined"] = "duplex"
    default_node_bandwidth: Quantity | None = None


@dataclass(frozen=True)
class NodeResourcesAllocatableArgs:
    mode: Literal["Least", "Most"] = "Least"
    resources: tuple[tuple[str, int], ...] = (("cpu", 1 << 20), ("memory", 1))  # upstream's defaults


# --- the document as written ----------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")


class PluginRef(_Strict):
    name: str
    # kube-scheduler's rule: any positive int32 (the API type); its total cannot overflow (3 plugins x 2**31 x 100 is
    # far inside int64). No cap at 100: upstream's own NodeResourcesAllocatable configuration uses 50000.
    weight: int | None = Field(default=None, ge=1, le=2**31 - 1)


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


class DefaultConstraintDoc(_Strict):
    max_skew: int = Field(ge=1)
    topology_key: str = Field(min_length=1)
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]


class PodTopologySpreadArgsDoc(_Args):
    default_constraints: list[DefaultConstraintDoc] = []
    defaulting_type: Literal["System", "List"] = "System"


ARGS: dict[str, type[_Args]] = {
    "NetworkOverhead": NetworkOverheadArgsDoc,
    "NetworkBandwidth": NetworkBandwidthArgsDoc,
    "NodeResourcesAllocatable": NodeResourcesAllocatableArgsDoc,
}


@dataclass(frozen=True)
class DefaultSpread:
    """A default topology spread constraint of the configuration (``PodTopologySpreadArgs.defaultConstraints``)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str


@dataclass(frozen=True)
class SchedulerConfig:
    filters: tuple[str, ...] = (*IN_TREE_FILTERS, *FILTER_PLUGINS)
    # None: kube-scheduler's system defaults (defaultingType: System); else the listed ones (List)
    default_spread: tuple[DefaultSpread, ...] | None = None
    weights: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(PLUGINS, 1))
    in_tree_scores: Mapping[str, int] = field(default_factory=lambda: dict(IN_TREE_SCORES))  # plugin -> weight
    overhead: NetworkOverheadArgs = field(default_factory=NetworkOverheadArgs)
    bandwidth: NetworkBandwidthArgs = field(default_factory=NetworkBandwidthArgs)
    allocatable: NodeResourcesAllocatableArgs = field(default_factory=NodeResourcesAllocatableArgs)


def parse_config(document: Any, path: str = "") -> SchedulerConfig:
    """Read a KubeSchedulerConfiguration (its first profile), validated whole at load
    (:mod:`operators.api.config.scheduler`); errors are ``FieldError`` naming the field path."""
    if not isinstance(document, Mapping):
        raise FieldError(path or "<config>", document, "expected a KubeSchedulerConfiguration object")
    config = _validated(KubeSchedulerConfiguration, document, path)
    profile = config.profiles[0] if config.profiles else Profile()
    filters: list[str] = []
    weights: dict[str, int] = {}
    plugins = profile.plugins
    for point in ("multi_point", "filter", "score"):
        plugin_set = getattr(plugins, point) if plugins is not None else None
        for entry in plugin_set.enabled if plugin_set is not None else ():
            if entry.name not in PLUGINS:
                continue  # in-tree plugins are kube-scheduler's business, not the extender's
            if point in ("multi_point", "filter") and entry.name in FILTER_PLUGINS and entry.name not in filters:
                filters.append(entry.name)
            if point in ("multi_point", "score"):
                weights[entry.name] = entry.weight or 1
    if plugins is None:
        filters, weights = list(FILTER_PLUGINS), dict.fromkeys(PLUGINS, 1)
    filters[:0] = [name for name in IN_TREE_FILTERS if _in_tree_enabled(plugins, name)]  # they run before extenders
    in_tree_scores = {name: _in_tree_weight(plugins, name, weight) for name, weight in IN_TREE_SCORES.items()
                      if _in_tree_enabled(plugins, name, "score")}  # fmt: skip
    args: dict[str, Any] = {}
    for index, entry in enumerate(profile.plugin_config):
        if entry.name in ARGS:
            where = join_path(path, f"profiles[0].pluginConfig[{index}].args")
            args[entry.name] = _validated(ARGS[entry.name], entry.args, where)
    spread_args = next((entry for entry in profile.plugin_config if entry.name == TOPOLOGY_SPREAD), None)
    default_spread = None
    if spread_args is not None:
        where = join_path(path, f"profiles[0].pluginConfig[{profile.plugin_config.index(spread_args)}].args")
        spread = _validated(PodTopologySpreadArgsDoc, spread_args.args, where)
        if spread.defaulting_type == "List":
            default_spread = tuple(DefaultSpread(c.max_skew, c.topology_key, c.when_unsatisfiable)
                                   for c in spread.default_constraints)  # fmt: skip
        elif spread.default_constraints:
            raise FieldError(f"{where}.defaultConstraints", [c.model_dump() for c in spread.default_constraints],
                             "must be empty when defaultingType is System")  # fmt: skip
    overhead = args.get(NETWORK_OVERHEAD) or NetworkOverheadArgsDoc()
    bandwidth = args.get(NETWORK_BANDWIDTH) or NetworkBandwidthArgsDoc()
    allocatable = args.get(ALLOCATABLE) or NodeResourcesAllocatableArgsDoc()
    return SchedulerConfig(
        filters=tuple(filters),
        default_spread=default_spread,
        weights=weights,
        in_tree_scores=in_tree_scores,
        overhead=NetworkOverheadArgs(
            namespaces=tuple(overhead.namespaces),
            weights_name=overhead.weights_name,
            network_topology_name=overhead.network_topology_name,
        ),
        bandwidth=NetworkBandwidthArgs(
            accounting_mode=bandwidth.accounting_mode, default_node_bandwidth=bandwidth.default_node_bandwidth
        ),
        allocatable=NodeResourcesAllocatableArgs(
            mode=allocatable.mode,
            resources=tuple((item.name, item.weight) for item in allocatable.resources)
            or NodeResourcesAllocatableArgs.resources,
        ),
    )


def _in_tree_weight(plugins: Plugins | None, name: str, weight: int) -> int:
    """The weight a profile gives the default score plugin ``name`` (``multiPoint`` or ``score``), else its default."""
    for point in (plugins.multi_point, plugins.score) if plugins is not None else ():
        for entry in point.enabled if point is not None else ():
            if entry.name == name and entry.weight:
                weight = entry.weight
    return weight


def _in_tree_enabled(plugins: Plugins | None, name: str, extension: str = "filter") -> bool:
    """Whether kube-scheduler runs the default plugin ``name`` at ``extension`` (filter or score) with these
    ``plugins``: on by default, off when disabled (by name or ``*``) at ``multiPoint`` or that extension point and
    not enabled again there."""
    if plugins is None:
        return True
    enabled = True
    for point in (plugins.multi_point, getattr(plugins, extension)):
        if point is None:
            continue
        if any(entry.name in (name, "*") for entry in point.disabled):
            enabled = False
        if any(entry.name == name for entry in point.enabled):
            enabled = True
    return enabled


def _validated(model: type[ModelT], document: Any, path: str) -> ModelT:
    try:
        return model.model_validate(document)
    except pydantic.ValidationError as error:
        found = from_pydantic(error, path)
        first = found[0]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise FieldError(first.path, first.value, first.reason + more) from None
