"""Status conditions, one rule for every controller: ``lastTransitionTime`` moves only when the status does."""

from __future__ import annotations

import datetime
from collections.abc import Iterable

from operators.api.meta import Condition


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
