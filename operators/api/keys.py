"""Every label, annotation and well-known name netaware reads or writes, in one place."""

from typing import Final

# --- API groups (docs/design/contracts.md) -------------------------------------------------------------------
APPGROUP_GROUP: Final = "appgroup.diktyo.x-k8s.io"
NETWORKTOPOLOGY_GROUP: Final = "networktopology.diktyo.x-k8s.io"
SLO_GROUP: Final = "slo.koordinator.sh"
V1ALPHA1: Final = "v1alpha1"

# --- Pod labels of the AppGroup (exact upstream keys; both are labels, not annotations) ---------
APPGROUP_LABEL: Final = "appgroup.diktyo.x-k8s.io"
APPGROUP_WORKLOAD_LABEL: Final = "appgroup.diktyo.x-k8s.io.workload"
# Old keys users still carry (appgroup-api before v1.0.0-alpha); recognised only to warn.
LEGACY_APPGROUP_LABELS: Final = ("appgroup.diktyo.k8s.io", "app-group.diktyo.k8s.io")

# --- Topology labels on nodes --------------------------------------------------------------------
REGION_LABEL: Final = "topology.kubernetes.io/region"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
SEGMENT_LABEL: Final = "topology.kubernetes.io/segment"
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"

# --- NetworkTopology ------------------------------------------------------------------------------
USER_DEFINED_WEIGHT: Final = "UserDefined"
NETPERF_WEIGHT: Final = "NetperfCosts"
# Extra netperf ConfigMaps for one NetworkTopology carry this label with the NetworkTopology's name.
NETPERF_CONFIGMAP_LABEL: Final = "networktopology.diktyo.x-k8s.io/netperf"
NETPERF_NODE_KEY_PREFIX: Final = "netperf.p90.latency.milliseconds.origin."
NETPERF_ZONE_KEY_PREFIX: Final = "netperf.p90.latency.milliseconds.origin-zone."

# --- Pod bandwidth (docs/design/contracts.md) ---------------------------------------------------------------------
INGRESS_BANDWIDTH: Final = "kubernetes.io/ingress-bandwidth"  # limit, enforced by the CNI plugin
EGRESS_BANDWIDTH: Final = "kubernetes.io/egress-bandwidth"
INGRESS_REQUEST: Final = "kubernetes.io/ingress-request"  # guaranteed minimum (thesis)
EGRESS_REQUEST: Final = "kubernetes.io/egress-request"
KOORDINATOR_NETWORK_QOS: Final = "koordinator.sh/networkQOS"  # pod annotation, JSON
BANDWIDTH_SOURCE: Final = "netaware.io/bandwidth-source"

# Bandwidth as Kubernetes extended resources (bits/s, integers), accounted by kube-scheduler's NodeResourcesFit:
# per direction in duplex accounting, one for ingress + egress in combined accounting. Nodes advertise them in
# status.capacity/allocatable; the webhook adds them to a pod's first container (requests = limits).
INGRESS_BANDWIDTH_RESOURCE: Final = "netaware.io/ingress-bandwidth"
EGRESS_BANDWIDTH_RESOURCE: Final = "netaware.io/egress-bandwidth"
COMBINED_BANDWIDTH_RESOURCE: Final = "netaware.io/bandwidth"

# Namespace annotations with defaults for the webhook.
NS_DEFAULT_INGRESS_BANDWIDTH: Final = "netaware.io/default-ingress-bandwidth"
NS_DEFAULT_EGRESS_BANDWIDTH: Final = "netaware.io/default-egress-bandwidth"
NS_DEFAULT_INGRESS_REQUEST: Final = "netaware.io/default-ingress-request"
NS_DEFAULT_EGRESS_REQUEST: Final = "netaware.io/default-egress-request"

# --- Node bandwidth capacity, first found wins (docs/design/contracts.md) --------------------------------------
NODE_BANDWIDTH_KOORDINATOR: Final = "node.koordinator.sh/network-bandwidth"
NODE_BANDWIDTH_THESIS: Final = "node.kubernetes.io/network-limit"

# --- Koordinator ---------------------------------------------------------------------------------------
KOORD_QOS_CLASS_LABEL: Final = "koordinator.sh/qosClass"
KOORD_RAW_ALLOCATABLE: Final = "node.koordinator.sh/raw-allocatable"  # node annotation, JSON ResourceList
KOORD_PRIORITY_CLASS_LABEL: Final = "koordinator.sh/priority-class"
SLO_CONFIG_NAMESPACE: Final = "koordinator-system"
SLO_CONFIG_NAME: Final = "slo-controller-config"
RESOURCE_QOS_CONFIG_KEY: Final = "resource-qos-config"
SYSTEM_CONFIG_KEY: Final = "system-config"

# --- Topology-ordered scheduling (docs/components/ordered-scheduling.md) ----------------------------
# The scheduling gate the webhook adds and the AppGroup controller removes (never any other gate).
TOPOLOGY_ORDER_GATE: Final = "netaware.io/topology-order"
# AppGroup annotations: "true" gates its pods ("false" opts out when the webhook gates by default), and the
# seconds a gated pod waits at most (from its creation) before it is released whatever the order.
ORDERED_SCHEDULING: Final = "netaware.io/ordered-scheduling"
ORDERED_SCHEDULING_TIMEOUT: Final = "netaware.io/ordered-scheduling-timeout"
# ordered-scheduling "plan-ungated": never gated; the extender plans the pending pods as a whole when
# kube-scheduler asks about one of them, and answers with the planned node.
UNGATED_PLAN: Final = "plan-ungated"
# ordered-scheduling "plan": gated, planned as a whole by the AppGroup controller, released to the planned nodes.
GATED_PLAN: Final = "plan"
# AppGroup annotation: the scheduler the webhook sends its member pods to (those naming the default scheduler or
# none); "" sends none (the webhook's --scheduler-name, the chart's second scheduler, is the default).
SCHEDULER_NAME: Final = "netaware.io/scheduler-name"
DEFAULT_SCHEDULER: Final = "default-scheduler"
# A pod released by a whole-AppGroup plan (ordered-scheduling "plan"): the node the plan gave it (it also carries
# a required node affinity for that node; NetworkOverhead's filter leaves it to the plan).
PLANNED_NODE: Final = "netaware.io/planned-node"
# An AppGroup the descheduler's rebalancer is moving (plan mode only): the layout its replacements follow until a
# time, and the moves made (JSON; written by the rebalancer, read by the plan's release and `explain appgroup`).
REBALANCE: Final = "netaware.io/rebalance"
# A pod of a plan-ungated AppGroup placed when it was created (the extender's placement webhook): a token of that
# admission, by which the extender finds the pod it counted on its node before the pod had a name.
PLACED_AT_ADMISSION: Final = "netaware.io/placed-at-admission"

# A pod admitted through the webhook's entry for pods that ask for bandwidth: its retry entry (called only when the
# first one failed, kube-apiserver never retries a webhook) skips pods that carry it (webhooks/configuration.py).
ADMITTED: Final = "netaware.io/admitted"

# --- Condition types written by netaware -------------------------------------------------------------
CONDITION_READY: Final = "Ready"
CONDITION_NETWORK_QOS_VALID: Final = "NetworkQOSConfigValid"

# --- netaware's own bookkeeping ---------------------------------------------------------------------
FIELD_MANAGER: Final = "netaware"
KOPF_PREFIX: Final = "netaware.io"
FINALIZER: Final = "netaware.io/finalizer"

# Pod metadata the descheduler reads (which pods it may evict, and in what order).
MIRROR_POD_ANNOTATION: Final = "kubernetes.io/config.mirror"
POD_SOURCE_ANNOTATION: Final = "kubernetes.io/config.source"  # "api" unless a static pod
POD_DELETION_COST: Final = "controller.kubernetes.io/pod-deletion-cost"
KOORD_EVICTION_COST: Final = "scheduling.koordinator.sh/eviction-cost"
