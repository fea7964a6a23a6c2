"""NodeSLOs rendered from one config share their parsed spec and status (the operator holds one per node): equal
to an independent parse, the very same model objects, and an invalid part still reported with its full path."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from operators.api.errors import FieldError
from operators.api.nodeslo import NodeSLO
from operators.engine.cluster.snapshot import parse_object

SLO: dict[str, Any] = {
    "apiVersion": "slo.koordinator.sh/v1alpha1",
    "kind": "NodeSLO",
    "metadata": {"name": "n1"},
    "spec": {"resourceQOSStrategy": {"lsClass": {"networkQOS": {"enable": True, "egressRequest": 30}}}},
    "status": {
        "conditions": [
            {
                "type": "NetworkQOSConfigValid",
                "status": "True",
                "reason": "ConfigApplied",
                "message": "the network QoS configuration is valid",
                "lastTransitionTime": "2026-11-22T12:00:00Z",
            }
        ]
    },
}


def named(name: str, **changes: Any) -> dict[str, Any]:
    raw = copy.deepcopy(SLO)
    raw["metadata"]["name"] = name
    raw.update(changes)
    return raw


def test_equal_parts_are_parsed_once_and_shared() -> None:
    first, second = (parse_object(named(name))[1] for name in ("n1", "n2"))  # type: ignore[index]
    assert first == NodeSLO.model_validate(named("n1")) and second == NodeSLO.model_validate(named("n2"))
    assert first.spec is second.spec and first.status is second.status
    other = parse_object(named("n3", spec={"resourceQOSStrategy": {}}))[1]  # type: ignore[index]
    assert other.spec is not first.spec and other.status is first.status
    assert other == NodeSLO.model_validate(named("n3", spec={"resourceQOSStrategy": {}}))


def test_an_invalid_part_is_reported_with_its_full_path() -> None:
    bad = named("n4", spec={"resourceQOSStrategy": {"lsClass": {"networkQOS": {"egressRequest": [1]}}}})
    with pytest.raises(FieldError) as raised:
        parse_object(bad)
    assert str(raised.value).startswith("spec.resourceQOSStrategy.lsClass.networkQOS.egressRequest")
