"""AppGroup, ``appgroup.diktyo.x-k8s.io/v1alpha1`` (fields exactly as diktyo-io/appgroup-api).

Our additions to the status are additive: ``placements``, ``conditions``, ``observedGeneration``.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, WithJsonSchema

from operators.api import keys
from operators.api.meta import ApiModel, Condition, NamespacedMeta, Timestamp
from operators.api.quantity import BandwidthField

API_VERSION: Final = f"{keys.APPGROUP_GROUP}/{keys.V1ALPHA1}"
KIND: Final = "AppGroup"

ALGORITHMS: Final = ("KahnSort", "AlternateKahn", "ReverseKahn", "TarjanSort", "AlternateTarjan", "ReverseTarjan")

# Any string is read (an unknown algorithm becomes a condition, not a crash);
# the CRD schema restricts it to the six upstream algorithms.
AlgorithmName = Annotated[str, WithJsonSchema({"type": "string", "enum": list(ALGORITHMS)})]


class AppGroupWorkloadInfo(ApiModel):
    kind: str
    name: str
    selector: str
    api_version: str | None = None
    namespace: str | None = None


class DependenciesInfo(ApiModel):
    workload: AppGroupWorkloadInfo
    min_bandwidth: BandwidthField | None = None
    max_network_cost: int | None = Field(default=None, ge=0, le=10000)


class AppGroupWorkload(ApiModel):
    workload: AppGroupWorkloadInfo
    dependencies: list[DependenciesInfo] | None = None


class AppGroupSpec(ApiModel):
    num_members: int = Field(ge=1)
    topology_sorting_algorithm: AlgorithmName
    workloads: list[AppGroupWorkload]


class TopologyOrderEntry(ApiModel):
    workload: AppGroupWorkloadInfo
    index: int = Field(ge=1)


class PodPlacement(ApiModel):
    name: str
    namespace: str
    phase: str
    node: str | None = None
    zone: str | None = None
    region: str | None = None


class WorkloadPlacement(ApiModel):
    selector: str
    pods: list[PodPlacement]
    # netaware: how many pods the workload has, set when ``pods`` was left out to keep the status small
    pod_count: int | None = Field(default=None, ge=0)


class GatedWorkload(ApiModel):
    """netaware: pods of a workload held by the topology-order scheduling gate, and the workloads (selectors)
    with pods not yet placed that they wait for."""

    selector: str
    pods: int = Field(ge=0)
    waiting_for: list[str]


class PlannedNode(ApiModel):
    """netaware: the pods of a workload a whole-group plan gave one node, and how many of them are bound there."""

    node: str
    planned: int = Field(ge=0)
    bound: int = Field(ge=0)


class PlannedWorkload(ApiModel):
    selector: str
    nodes: list[PlannedNode]


class PlanStatus(ApiModel):
    """netaware: where the plans of an AppGroup released with ``ordered-scheduling: plan`` put its members (pods
    annotated ``netaware.io/planned-node``) and how many followed: bound on the planned node, bound elsewhere
    (off the plan), not bound yet."""

    workloads: list[PlannedWorkload]
    planned: int = Field(ge=0)
    on_plan: int = Field(ge=0)
    off_plan: int = Field(ge=0)
    pending: int = Field(ge=0)


class AppGroupStatus(ApiModel):
    running_workloads: int | None = Field(default=None, ge=0)
    schedule_start_time: Timestamp | None = None
    topology_calculation_time: Timestamp | None = None
    topology_order: list[TopologyOrderEntry] | None = None
    # netaware additions
    placements: list[WorkloadPlacement] | None = None
    conditions: list[Condition] | None = None
    observed_generation: int | None = Field(default=None, ge=0)
    gated_pods: list[GatedWorkload] | None = None
    plan: PlanStatus | None = None


class AppGroup(ApiModel):
    api_version: Literal["appgroup.diktyo.x-k8s.io/v1alpha1"] = "appgroup.diktyo.x-k8s.io/v1alpha1"
    kind: Literal["AppGroup"] = KIND
    metadata: NamespacedMeta
    spec: AppGroupSpec
    status: AppGroupStatus | None = None
