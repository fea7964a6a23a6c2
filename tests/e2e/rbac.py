"""Least privilege, claimed and proven: which of the chart's permissions each e2e module's scenarios use.

Every permission the chart grants a component's ServiceAccount is claimed by the module whose scenarios use it
(``CLAIMS``) or listed, with its reason, as granted on purpose without a scenario (``NOT_EXERCISED``). A module's
claims are checked against the API server's audit log of that module's own run (``conftest.rbac_claims``, when the
module ends), so no check depends on which modules ran before it; ``test_rbac_claims.py`` checks, without a
cluster, that the claims and the exceptions cover exactly what the chart grants.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable
from typing import Any

import yaml

Permission = tuple[str, str, str]  # verb, resource, subresource

COMPONENTS = ("operator", "webhook", "extender", "probe", "agent")

# The roles of a component whose names are not just ``-<component>``.
OWN_ROLES = {"operator": ("-operator", "-leader-election"), "probe": ("-probe", "-probe-rows")}

# Granted on purpose though no scenario here needs it, each with its reason.
NOT_EXERCISED: dict[str, set[Permission]] = {
    "operator": {
        # kopf keeps its bookkeeping (annotations) on NetworkTopologies; updates without a spec change
        # do not happen in these scenarios
        ("patch", "networktopologies", ""),
    },
}

# What kube-scheduler's filters read beyond nodes and pods, listed and watched by whatever checks a plan with them.
FILTER_READS = frozenset(
    (verb, resource, "")
    for verb in ("list", "watch")
    for resource in ("namespaces", "persistentvolumeclaims", "persistentvolumes", "services", "replicationcontrollers",
                     "storageclasses", "csinodes", "replicasets", "statefulsets")
)  # fmt: skip

# module (file name without .py) -> component -> the permissions its scenarios use, each permission claimed by
# one module (the one named for the component where it uses it). Written from the audit log of a whole e2e run
# (NETAWARE_RBAC_RECORD=FILE writes what each module used).
CLAIMS: dict[str, dict[str, set[Permission]]] = {
    "test_agent": {
        "agent": {
            ("create", "events", ""),
            ("get", "daemonsets", ""),
            ("list", "nodes", ""),
            ("list", "nodeslos", ""),
            ("list", "pods", ""),
            ("patch", "nodes", ""),
            ("patch", "nodeslos", "status"),
            ("watch", "nodes", ""),
            ("watch", "nodeslos", ""),
            ("watch", "pods", ""),
        },
    },
    "test_bandwidth_guarantee": {
        "operator": {("patch", "nodes", "status")},
    },
    "test_descheduler_eviction": {
        "operator": {("create", "pods", "eviction")},
    },
    "test_extender_scheduling": {
        "extender": {
            ("create", "events", ""),
            ("list", "appgroups", ""),
            ("list", "networktopologies", ""),
            ("list", "nodes", ""),
            ("list", "nodeslos", ""),
            ("list", "pods", ""),
            ("watch", "appgroups", ""),
            ("watch", "networktopologies", ""),
            ("watch", "nodes", ""),
            ("watch", "nodeslos", ""),
            ("watch", "pods", ""),
        },
    },
    "test_operator": {
        "operator": {
            ("create", "events", ""),
            ("create", "leases", ""),
            ("create", "nodeslos", ""),
            ("delete", "nodeslos", ""),
            ("get", "configmaps", ""),
            ("get", "leases", ""),
            ("get", "networktopologies", ""),
            ("list", "appgroups", ""),
            ("list", "configmaps", ""),
            ("list", "networktopologies", ""),
            ("list", "nodes", ""),
            ("list", "nodeslos", ""),
            ("list", "pods", ""),
            ("patch", "appgroups", "status"),
            ("patch", "leases", ""),
            ("patch", "networktopologies", "status"),
            ("patch", "nodeslos", ""),
            ("patch", "nodeslos", "status"),
            ("update", "leases", ""),
            ("watch", "appgroups", ""),
            ("watch", "configmaps", ""),
            ("watch", "networktopologies", ""),
            ("watch", "nodes", ""),
            ("watch", "nodeslos", ""),
            ("watch", "pods", ""),
        },
    },
    "test_ordered_scheduling": {
        "operator": {("patch", "pods", "")},
    },
    "test_plan_release": {
        "operator": set(FILTER_READS),  # the plans' cluster view
    },
    "test_plan_ungated": {
        "extender": {*FILTER_READS, ("patch", "pods", "status")},  # its plans' cluster view; the nominations
    },
    "test_probe": {
        "probe": {
            ("create", "configmaps", ""),
            ("get", "configmaps", ""),
            ("list", "nodes", ""),
            ("list", "pods", ""),
            ("update", "configmaps", ""),
            ("watch", "nodes", ""),
            ("watch", "pods", ""),
        },
    },
    "test_rebalance": {
        "operator": {("patch", "appgroups", "")},  # the rebalancer's layout annotation
    },
    "test_webhook_admission": {
        "webhook": {
            ("create", "events", ""),
            ("list", "appgroups", ""),
            ("list", "namespaces", ""),
            ("watch", "appgroups", ""),
            ("watch", "namespaces", ""),
        },
    },
}


def granted(rendered: str, component: str) -> set[Permission]:
    """The permissions the chart's rendered RBAC gives ``component``."""
    permissions = set()
    for document in yaml.safe_load_all(rendered):
        if not document or document["kind"] not in ("ClusterRole", "Role"):
            continue
        if not document["metadata"]["name"].endswith(OWN_ROLES.get(component, (f"-{component}",))):
            continue
        for rule in document["rules"]:
            for resource in rule["resources"]:
                name, _, sub = resource.partition("/")
                permissions |= {(verb, name, sub) for verb in rule["verbs"]}
    return permissions


def used(
    events: Iterable[dict[str, Any]], since: datetime.datetime, refused_by_rbac: Callable[[dict[str, Any]], bool]
) -> tuple[set[Permission], list[str]]:
    """The permissions ``events`` (a ServiceAccount's audit events) used from ``since`` on, and the requests RBAC
    refused in that time."""
    seen: set[Permission] = set()
    refused = []
    for event in events:
        received = datetime.datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))
        target = event.get("objectRef") or {}
        if received < since or not target.get("resource"):
            continue
        permission = (event["verb"], target["resource"], target.get("subresource", ""))
        if refused_by_rbac(event):
            refused.append(" ".join(permission).strip())
        elif event.get("responseStatus", {}).get("code") != 403:
            seen.add(permission)
    return seen, refused
