"""Least privilege, stand-alone: what the chart grants each ServiceAccount is exactly what the e2e modules' scenarios
claim to use (each module's claims are checked against the audit log of its own run when it ends: ``rbac.py``,
``conftest.rbac_claims``) plus the permissions granted on purpose without a scenario, each with its reason."""

from __future__ import annotations

import pathlib

import pytest

from tests.e2e import rbac
from tests.support.e2e import chart_rbac_yaml

pytestmark = pytest.mark.e2e

HERE = pathlib.Path(__file__).parent


@pytest.mark.parametrize("component", rbac.COMPONENTS)
def test_what_the_chart_grants_is_exactly_what_the_scenarios_claim(component: str) -> None:
    allowed = rbac.granted(chart_rbac_yaml(), component)
    claimed = set().union(*(claims.get(component, set()) for claims in rbac.CLAIMS.values()))
    exceptions = rbac.NOT_EXERCISED.get(component, set())
    assert allowed - claimed - exceptions == set(), f"granted to the {component}, used by no scenario"
    assert claimed - allowed == set(), f"claimed for the {component}, not granted (the scenario would be refused)"
    assert exceptions & claimed == set(), f"listed as not exercised for the {component}, yet claimed"


def test_every_claiming_module_exists() -> None:
    assert [module for module in rbac.CLAIMS if not (HERE / f"{module}.py").exists()] == []
