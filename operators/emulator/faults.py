"""Fault injection: the next N matching requests answered with an error code, or an outage of every resource
but the spared ones; checked before any state change."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from kmock._internal import rendering

from operators.emulator.errors import status_error

REASONS = {
    409: "Conflict",
    410: "Expired",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass
class Injected:
    method: str | None
    plural: str | None
    subresource: str | None
    code: int
    remaining: int


@dataclass
class Faults:
    injected: list[Injected] = field(default_factory=list)
    outage: tuple[float, int, tuple[str, ...]] | None = None  # (until, code, spared plurals)

    def check(self, request: rendering.Request) -> None:
        """Raise the injected error ``request`` is due, if any."""
        plural = request.resource.plural if request.resource else None
        if self.outage is not None:
            until, code, spare = self.outage
            if asyncio.get_running_loop().time() < until and plural not in spare:
                raise status_error(code, "ServiceUnavailable", "injected outage")
        method = str(request.method.value if request.method else "").upper()
        for injected in self.injected:
            if injected.remaining <= 0 or injected.method not in (None, method):
                continue
            if injected.plural not in (None, plural) or injected.subresource not in (None, request.subresource):
                continue
            injected.remaining -= 1
            raise status_error(
                injected.code, REASONS.get(injected.code, "InjectedFault"), f"injected fault: {injected.code}"
            )
