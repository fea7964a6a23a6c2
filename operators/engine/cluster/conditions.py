"""Status conditions, one rule for every controller: ``lastTransitionTime`` moves only when the status does."""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from typing import TypeVar

from operators.api import keys
from operators.api.appgroup import AppGroupStatus
from operators.api.meta import Condition
from operators.api.networktopology import NetworkTopologyStatus

INVALID_SPEC = "InvalidSpec"
Status = TypeVar("Status", AppGroupStatus, NetworkTopologyStatus)


def condition(
    previous: Iterable[Condition] | None,
    kind: str,
    ok: bool,
    reason: str,
    message: str,
    now: datetime.datetime,
    generation: int | None = None,
) -> Condition:
    """The condition ``kind``; its transition time is kept from ``previous`` while the status is unchanged."""
    status = "True" if ok else "False"
    old = next((item for item in previous or () if item.type == kind), None)
    moment = old.last_transition_time if old is not None and old.status == status else now
    return Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=moment,
        observed_generation=generation,
    )


def invalid_spec(status: Status, message: str, now: datetime.datetime, generation: int | None) -> Status:
    """``status`` of an object whose spec does not parse (``message`` names the field): what the last valid spec
    gave stays, ``Ready=False InvalidSpec``, and that generation observed (the controller decided about it:
    ``kubectl wait`` and GitOps health checks, which compare observedGeneration with generation, see it failed rather
    than progressing forever)."""
    ready = condition(status.conditions, keys.CONDITION_READY, False, INVALID_SPEC, message, now, generation)
    return status.model_copy(update={"conditions": [ready], "observed_generation": generation})
