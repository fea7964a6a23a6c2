"""The descheduler's policy: a ``DeschedulerConfiguration`` (``descheduler/v1alpha2``) with one
``LowNodeLoad`` profile, shaped like Koordinator's so its users feel at home.

Validated on load; every error names the field and the value (``FieldError``). Differences from
Koordinator, on purpose: ``lowThresholds`` and ``highThresholds`` must name the same resources
(Koordinator silently sets a high threshold without a low one to 100 %), percentages must lie in
0..100, and ``anomalyCondition.consecutiveAbnormalities: N`` means N consecutive high observations
(Koordinator needs N+1, except for N = 1); its default is 1 so a one-shot plan acts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from operators.api.errors import FieldError, from_pydantic
from operators.api.quantity import parse_bandwidth
from operators.api.selectors import from_label_selector, parse_selector

RESOURCES = ("cpu", "memory", "pods", "netBandwidth")
# An extended resource (``example.com/foo``, ``nvidia.com/gpu``): usage from pod requests, capacity from the node's
# allocatable, as upstream's descheduler and Koordinator accept them.
_EXTENDED = re.compile(
    r"^(?=.{1,253}/)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LOW_NODE_LOAD = "LowNodeLoad"
NETWORK_REBALANCE = "NetworkRebalance"
_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)(h|m|s|ms))+$")
_PART = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def is_extended(name: str) -> bool:
    """An extended resource name: a DNS-subdomain prefix outside ``kubernetes.io``, a slash, a name."""
    return bool(_EXTENDED.match(name)) and not name.split("/", 1)[0].endswith("kubernetes.io")


def parse_duration(text: str | int | float) -> float:
    """Seconds from a Go duration (``90s``, ``1m30s``, ``500ms``) or a plain number of seconds."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        if text < 0:
            raise ValueError("must not be negative")
        return float(text)
    if not isinstance(text, str) or not _DURATION.match(text):
        raise ValueError("expected a duration such as 60s, 5m or 1m30s")
    return sum(float(number) * _SECONDS[unit] for number, unit in _PART.findall(text))


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True, extra="forbid")


class Namespaces(_Model):
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _one_of(self) -> Namespaces:
        if self.include and self.exclude:
            raise ValueError("set include or exclude, not both")
        return self

    def allows(self, namespace: str) -> bool:
        if self.include:
            return namespace in self.include
        return namespace not in self.exclude


class PodSelector(_Model):
    name: str = ""
    selector: dict[str, Any] = Field(default_factory=dict)

    @field_validator("selector")
    @classmethod
    def _readable(cls, value: dict[str, Any]) -> dict[str, Any]:
        from_label_selector(value, "")  # checked at load, not when a plan first runs
        return value


class AnomalyCondition(_Model):
    consecutive_abnormalities: int = Field(1, ge=1)


class PrometheusSource(_Model):
    """An instant query whose result has one sample per node (``nodeLabel`` names the node), in bits/s."""

    url: str = ""
    query: str = 'sum by (node) (rate(node_network_transmit_bytes_total{device!="lo"}[5m])) * 8'
    node_label: str = "node"
    max_age_seconds: float = Field(300.0, gt=0)


class UsageSources(_Model):
    """Where usage comes from per resource: pod ``requests`` (default), Koordinator ``NodeMetric`` CRs (cpu,
    memory), a Prometheus query or the node agent's ``measured`` NodeSLO ``status.networkUsage`` (netBandwidth)."""

    cpu: Literal["requests", "nodeMetric"] = "requests"
    memory: Literal["requests", "nodeMetric"] = "requests"
    net_bandwidth: Literal["requests", "prometheus", "measured"] = "requests"
    node_metric_expiration_seconds: float = Field(180.0, gt=0)
    measured_max_age_seconds: float = Field(600.0, gt=0)  # an agent's report older than this: the node is unknown
    prometheus: PrometheusSource = Field(default_factory=PrometheusSource)


class LowNodeLoadArgs(_Model):
    low_thresholds: dict[str, float] = Field(default_factory=dict)
    high_thresholds: dict[str, float] = Field(default_factory=dict)
    use_deviation_thresholds: bool = False
    number_of_nodes: int = Field(0, ge=0)
    evictable_namespaces: Namespaces = Field(default_factory=Namespaces)
    node_selector: dict[str, Any] | str | None = None
    pod_selectors: tuple[PodSelector, ...] = ()
    node_fit: bool = True
    resource_weights: dict[str, int] = Field(default_factory=dict)
    anomaly_condition: AnomalyCondition = Field(default_factory=AnomalyCondition)
    evict_local_storage_pods: bool = False
    accounting_mode: Literal["duplex", "combined"] = "duplex"
    default_node_bandwidth: str | None = None
    usage: UsageSources = Field(default_factory=UsageSources)

    @field_validator("node_selector")
    @classmethod
    def _node_selector(cls, value: dict[str, Any] | str | None) -> dict[str, Any] | str | None:
        if isinstance(value, str):
            parse_selector(value, "")
        elif value:
            from_label_selector(value, "")
        return value

    @field_validator("default_node_bandwidth")
    @classmethod
    def _bandwidth(cls, value: str | None) -> str | None:
        if value is not None:
            parse_bandwidth(value)
        return value

    @field_validator("low_thresholds", "high_thresholds", "resource_weights")
    @classmethod
    def _known_resources(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in value:
            if name not in RESOURCES and not is_extended(name):
                expected = f"{', '.join(RESOURCES)} or an extended resource (example.com/gpu)"
                raise FieldError(name, name, f"unknown resource; expected one of {expected}")
        return value

    @field_validator("low_thresholds", "high_thresholds")
    @classmethod
    def _percent(cls, value: dict[str, float]) -> dict[str, float]:
        for name, percent in value.items():
            if not 0 <= percent <= 100:
                raise FieldError(name, percent, "a percentage must lie in 0..100")
        return value

    @field_validator("resource_weights")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        for name, weight in value.items():
            if weight < 1:
                raise FieldError(name, weight, "a weight must be >= 1")
        return value

    @model_validator(mode="after")
    def _thresholds(self) -> LowNodeLoadArgs:
        if not self.high_thresholds:
            raise FieldError("highThresholds", {}, "name at least one resource")
        if set(self.low_thresholds) != set(self.high_thresholds):
            only = sorted(set(self.low_thresholds) ^ set(self.high_thresholds))
            raise FieldError("lowThresholds", only, "lowThresholds and highThresholds must name the same resources")
        if not self.use_deviation_thresholds:
            for name, low in self.low_thresholds.items():
                if low > self.high_thresholds[name]:
                    shown = int(low) if low.is_integer() else low
                    raise FieldError(
                        f"lowThresholds.{name}", shown, f"above highThresholds.{name} ({self.high_thresholds[name]:g})"
                    )
        return self

    @property
    def resources(self) -> tuple[str, ...]:
        """The threshold resources, in a fixed order: cpu, memory, pods, netBandwidth, then extended ones by name."""
        known = tuple(name for name in RESOURCES if name in self.high_thresholds)
        return known + tuple(sorted(name for name in self.high_thresholds if name not in RESOURCES))

    @property
    def extended(self) -> tuple[str, ...]:
        """The extended threshold resources (counted from pod requests and node allocatable)."""
        return tuple(name for name in self.resources if name not in RESOURCES)

    def weight(self, resource: str) -> int:
        """Koordinator's defaults: cpu and memory 1, every threshold resource 1, unless configured."""
        return self.resource_weights.get(resource, 1)


class RebalanceWeights(_Model):
    """The rebalancer's objective: ``networkCost`` x the plan-mode AppGroups' edge cost (the planner's units) +
    ``bandwidthBalance`` x the thesis' imbalance, the sum over nodes and directions of (free bandwidth in units of
    100 Mbit/s) squared."""

    network_cost: float = Field(1.0, ge=0)
    bandwidth_balance: float = Field(0.1, ge=0)


class RebalanceArgs(_Model):
    """The ``NetworkRebalance`` plugin: running pods moved to better places (see docs: descheduler)."""

    weights: RebalanceWeights = Field(default_factory=RebalanceWeights)
    min_gain_per_move: float = Field(1.0, gt=0)
    min_gain_per_cycle: float = Field(1.0, gt=0)
    cooldown_seconds: float = Field(600.0, ge=0)  # a moved workload (and pod) is not moved again within it
    max_moves_per_cycle: int = Field(10, ge=0)
    max_moves_per_hour: int = Field(60, ge=0)
    layout_seconds: float = Field(600.0, gt=0)  # how long an AppGroup's replacements follow the rebalancer's layout
    plan_budget_seconds: float = Field(1.0, gt=0, le=10)  # 0.2 before the work model was calibrated (0.2.0)
    breadth: int = Field(8, ge=1, le=1000)  # the fullest nodes whose pods a bandwidth move may take
    seed: int = Field(0, ge=0)
    evictable_namespaces: Namespaces = Field(default_factory=Namespaces)
    evict_local_storage_pods: bool = False


_REBALANCE_DURATIONS = {"cooldown": "cooldownSeconds", "layoutTTL": "layoutSeconds", "planBudget": "planBudgetSeconds"}


class DeschedulerPolicy(_Model):
    descheduling_interval: float = 60.0
    dry_run: bool = False
    max_no_of_pods_to_evict_per_node: int | None = Field(None, ge=0)
    max_no_of_pods_to_evict_per_namespace: int | None = Field(None, ge=0)
    max_no_of_pods_to_evict_total: int | None = Field(None, ge=0)
    profile: str = "default"
    args: LowNodeLoadArgs
    rebalance: RebalanceArgs | None = None  # the NetworkRebalance plugin, when configured


DEFAULT_POLICY: dict[str, Any] = {
    "apiVersion": "descheduler/v1alpha2",
    "kind": "DeschedulerConfiguration",
    "deschedulingInterval": "60s",
    "profiles": [
        {
            "name": "netaware",
            "plugins": {"balance": {"enabled": [{"name": LOW_NODE_LOAD}]}},
            "pluginConfig": [
                {
                    "name": LOW_NODE_LOAD,
                    "args": {"lowThresholds": {"netBandwidth": 30}, "highThresholds": {"netBandwidth": 70}},
                }
            ],
        }
    ],
}


def parse_policy(document: Any) -> DeschedulerPolicy:
    """Read a DeschedulerConfiguration; raises ``FieldError`` naming the field (the first of its errors)."""
    if not isinstance(document, Mapping):
        raise FieldError("", document, "expected a DeschedulerConfiguration object")
    kind = document.get("kind", "DeschedulerConfiguration")
    if kind != "DeschedulerConfiguration":
        raise FieldError("kind", kind, "expected DeschedulerConfiguration")
    profiles = document.get("profiles") or []
    if not isinstance(profiles, list):
        raise FieldError("profiles", profiles, "expected a list of profiles")
    found = _plugin_configs(profiles)
    if len(found[LOW_NODE_LOAD]) != 1:
        raise FieldError("profiles", len(found[LOW_NODE_LOAD]), f"expected exactly one {LOW_NODE_LOAD} pluginConfig")
    if len(found[NETWORK_REBALANCE]) > 1:
        raise FieldError(
            "profiles", len(found[NETWORK_REBALANCE]), f"expected at most one {NETWORK_REBALANCE} pluginConfig"
        )
    p, c, args = found[LOW_NODE_LOAD][0]
    _enabled(profiles, p, LOW_NODE_LOAD)
    rebalance_args = None
    if found[NETWORK_REBALANCE]:
        rp, rc, raw = found[NETWORK_REBALANCE][0]
        _enabled(profiles, rp, NETWORK_REBALANCE)
        rebalance_args = _rebalance_args(raw, f"profiles[{rp}].pluginConfig[{rc}].args")
    profile_name = str(profiles[p].get("name") or f"profiles[{p}]")
    try:
        args_model = LowNodeLoadArgs.model_validate(args)
        return DeschedulerPolicy.model_validate(
            {**_policy_fields(document), "profile": profile_name, "args": args_model, "rebalance": rebalance_args}
        )
    except pydantic.ValidationError as error:
        first = from_pydantic(error)[0]
        prefix = f"profiles[{p}].pluginConfig[{c}].args" if error.title == LowNodeLoadArgs.__name__ else ""
        raise first.at(prefix) if prefix else first from None


def _plugin_configs(profiles: list[Any]) -> dict[str, list[tuple[int, int, Mapping[str, Any]]]]:
    """Each plugin netaware runs -> (profile index, pluginConfig index, args) of every pluginConfig naming it."""
    found: dict[str, list[tuple[int, int, Mapping[str, Any]]]] = {LOW_NODE_LOAD: [], NETWORK_REBALANCE: []}
    for p, profile in enumerate(profiles):
        if not isinstance(profile, Mapping):
            raise FieldError(f"profiles[{p}]", profile, "expected a profile object")
        plugin_config = profile.get("pluginConfig") or []
        if not isinstance(plugin_config, list):
            raise FieldError(f"profiles[{p}].pluginConfig", plugin_config, "expected a list")
        for c, entry in enumerate(plugin_config):
            name = entry.get("name") if isinstance(entry, Mapping) else None
            if not isinstance(name, str) or name not in found:  # another plugin's (or no name): not netaware's
                continue
            args = entry.get("args") if entry.get("args") is not None else {}
            if not isinstance(args, Mapping):
                raise FieldError(f"profiles[{p}].pluginConfig[{c}].args", args, "expected an object")
            found[name].append((p, c, args))
    return found


def _policy_fields(document: Mapping[str, Any]) -> dict[str, Any]:
    """The configuration's top-level fields netaware reads (the interval as a Go duration)."""
    limits = ("dryRun", "maxNoOfPodsToEvictPerNode", "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal")
    fields: dict[str, Any] = {key: document[key] for key in limits if document.get(key) is not None}
    if "deschedulingInterval" in document:
        try:
            fields["deschedulingInterval"] = parse_duration(document["deschedulingInterval"])
        except ValueError as error:
            raise FieldError("deschedulingInterval", document["deschedulingInterval"], str(error)) from None
    return fields


def _enabled(profiles: list[Any], p: int, plugin: str) -> None:
    """A configured plugin must be listed in its profile's ``plugins.balance.enabled`` when the profile lists any."""
    plugins = profiles[p].get("plugins") or {}
    balance = plugins.get("balance") if isinstance(plugins, Mapping) else None
    listed = balance.get("enabled") if isinstance(balance, Mapping) else None
    if plugins and not isinstance(listed, list):
        raise FieldError(f"profiles[{p}].plugins.balance.enabled", listed, "expected a list of plugins")
    enabled = [entry.get("name") if isinstance(entry, Mapping) else entry for entry in listed or []]
    if plugins and plugin not in enabled:
        raise FieldError(f"profiles[{p}].plugins.balance.enabled", enabled, f"{plugin} is configured but not enabled")


def _rebalance_args(raw: Mapping[str, Any], path: str) -> RebalanceArgs:
    """``NetworkRebalance``'s args; its durations (``cooldown``, ``layoutTTL``, ``planBudget``) as Go durations."""
    fields = {key: value for key, value in raw.items() if key not in _REBALANCE_DURATIONS}
    for key, name in _REBALANCE_DURATIONS.items():
        if key in raw:
            try:
                fields[name] = parse_duration(raw[key])
            except ValueError as error:
                raise FieldError(f"{path}.{key}", raw[key], str(error)) from None
    for name in _REBALANCE_DURATIONS.values():
        if name in raw:
            raise FieldError(f"{path}.{name}", raw[name], "unknown field")
    try:
        return RebalanceArgs.model_validate(fields)
    except pydantic.ValidationError as error:
        raise from_pydantic(error)[0].at(path) from None
