"""The controllers' options refuse what they do not know, like the scheduler's and descheduler's configuration."""

from __future__ import annotations

import pydantic
import pytest

from operators.api.config.controllers import ControllerOptions, NetworkTopologyOptions, NodeSLOOptions


def test_defaults_are_upstreams() -> None:
    options = ControllerOptions()
    assert options.nodeslo.config_namespace == "koordinator-system"
    assert options.nodeslo.config_name == "slo-controller-config"
    assert options.nodeslo.spec_owner == "netaware"
    assert (options.networktopology.debounce_seconds, options.networktopology.resync_seconds) == (10.0, 300.0)
    assert options.networktopology.default_capacity.value() == 1_000_000_000


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: NodeSLOOptions(spec_owner="kubelet"), "spec_owner"),
        (lambda: NetworkTopologyOptions(debounce_seconds=-1), "debounce_seconds"),
        (lambda: NetworkTopologyOptions(resync_seconds=0), "resync_seconds"),
        (lambda: NodeSLOOptions.model_validate({"specOwner": "netaware"}), "specOwner"),
    ],
)
def test_a_wrong_or_unknown_option_is_refused_naming_it(build: object, field: str) -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        build()  # type: ignore[operator]
    assert field in str(caught.value)


def test_options_are_frozen() -> None:
    with pytest.raises(pydantic.ValidationError):
        NodeSLOOptions().spec_owner = "koordinator"  # type: ignore[misc]
