"""NodeSLO, ``slo.koordinator.sh/v1alpha1`` — the network subset netaware renders.

Koordinator's NodeSLO carries much more (cpu burst, memory QoS, thresholds, ...).
Those parts are kept untouched (``OpenModel``) so that netaware can share the object
with a running Koordinator. Koordinator's status is empty; ours adds ``networkQOS``
(absolute bits/s per class and direction) and ``conditions``.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from operators.api import keys
from operators.api.meta import ApiModel, Condition, IntOrString, ObjectMeta, OpenModel
from operators.api.quantity import QuantityField

API_VERSION: Final = f"{keys.SLO_GROUP}/{keys.V1ALPHA1}"
KIND: Final = "NodeSLO"

QOS_CLASSES: Final = ("lsr", "ls", "be", "system")


class NetworkQOS(ApiModel):
    """int: percent 0..100 of the node's total bandwidth; string: an absolute quantity in bits/s."""

    enable: bool | None = None
    ingress_request: IntOrString | None = None
    ingress_limit: IntOrString | None = None
    egress_request: IntOrString | None = None
    egress_limit: IntOrString | None = None


class ResourceQOS(OpenModel):
    network_qos: NetworkQOS | None = Field(default=None, alias="networkQOS")


class ResourceQOSPolicies(OpenModel):
    cpu_policy: str | None = None
    net_qos_policy: Literal["tc", "terway-qos"] | None = Field(default=None, alias="netQOSPolicy")


class ResourceQOSStrategy(OpenModel):
    policies: ResourceQOSPolicies | None = None
    lsr_class: ResourceQOS | None = None
    ls_class: ResourceQOS | None = None
    be_class: ResourceQOS | None = None
    system_class: ResourceQOS | None = None


class SystemStrategy(OpenModel):
    total_network_bandwidth: QuantityField | None = None


class NodeSLOSpec(OpenModel):
    resource_qos_strategy: ResourceQOSStrategy | None = Field(default=None, alias="resourceQOSStrategy")
    system_strategy: SystemStrategy | None = None


class ClassBandwidth(ApiModel):
    ingress_request: QuantityField
    ingress_limit: QuantityField
    egress_request: QuantityField
    egress_limit: QuantityField


class NetworkQOSClasses(ApiModel):
    lsr: ClassBandwidth | None = None
    ls: ClassBandwidth | None = None
    be: ClassBandwidth | None = None
    system: ClassBandwidth | None = None


class NetworkQOSStatus(ApiModel):
    total_network_bandwidth: QuantityField
    # "<annotation key>", "system-config" or "default"
    total_source: str
    classes: NetworkQOSClasses


class DirectionUsage(ApiModel):
    ingress: int = Field(ge=0)  # bits/s
    egress: int = Field(ge=0)


class NetworkUsage(ApiModel):
    """What the node agent measured over ``windowSeconds`` ending at ``updateTime`` (bits/s, from the kernel's
    class counters): the node's traffic through its interface, per QoS class (``host``: the node's own) and per
    pod (``namespace/name``). Written by the agent only; the NodeSLO controller keeps it as it is."""

    ingress: int = Field(ge=0)
    egress: int = Field(ge=0)
    classes: dict[str, DirectionUsage] = Field(default_factory=dict)
    pods: dict[str, DirectionUsage] = Field(default_factory=dict)
    update_time: str
    window_seconds: float = Field(ge=0)


class NodeSLOStatus(ApiModel):
    network_qos: NetworkQOSStatus | None = Field(default=None, alias="networkQOS")
    network_usage: NetworkUsage | None = None
    conditions: list[Condition] | None = None
    observed_generation: int | None = Field(default=None, ge=0)


class NodeSLO(ApiModel):
    api_version: Literal["slo.koordinator.sh/v1alpha1"] = "slo.koordinator.sh/v1alpha1"
    kind: Literal["NodeSLO"] = KIND
    metadata: ObjectMeta
    spec: NodeSLOSpec = NodeSLOSpec()
    status: NodeSLOStatus | None = None
