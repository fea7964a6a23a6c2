"""Least privilege, measured: every permission the chart grants its ServiceAccounts was used by the e2e
scenarios above (the API server's audit log of the session), and none was refused. Runs last (file name)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.e2e.conftest import chart_rbac_yaml, service_account

pytestmark = pytest.mark.e2e

# Granted on purpose though no scenario here needs it, each with its reason.
NOT_EXERCISED = {
    "operator": {
        # kopf keeps its bookkeeping (annotations) on NetworkTopologies; updates without a spec change
        # do not happen in these scenarios
        ("patch", "networktopologies", ""),
    },
}


# The roles of a component whose names are not just ``-<component>``.
OWN_ROLES = {"operator": ("-operator", "-leader-election"), "probe": ("-probe", "-probe-rows")}


def granted(component: str) -> set[tuple[str, str, str]]:
    rendered = chart_rbac_yaml()
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


def used(cluster: Any, component: str) -> set[tuple[str, str, str]]:
    seen = set()
    for event in cluster.audit_events(service_account(component)):
        target = event.get("objectRef") or {}
        if target.get("resource"):
            seen.add((event["verb"], target["resource"], target.get("subresource", "")))
    return seen


@pytest.mark.parametrize("component", ["operator", "webhook", "extender", "probe", "agent"])
def test_every_permission_is_used_and_none_is_missing(cluster: Any, component: str) -> None:
    requests = used(cluster, component)
    if not requests:
        pytest.skip(f"no request of the {component} in this session's audit log (run the whole e2e tier)")
    allowed = granted(component)
    unused = allowed - requests - NOT_EXERCISED.get(component, set())
    assert unused == set(), f"granted but never used by the {component}: {sorted(unused)}"
