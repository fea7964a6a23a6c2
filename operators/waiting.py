"""Waiting for something to converge, with a deadline: the demo's steps (and the tests that drive operators)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any


class NotConverged(RuntimeError):
    """What was awaited did not happen within the time allowed."""


async def until(what: str, check: Callable[[], Any], within: float) -> Any:
    """Poll ``check()`` every 50 ms until it is truthy (its value is returned) or ``within`` seconds pass;
    ``check`` may be a coroutine function (a check that asks a server)."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = check()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            raise NotConverged(f"{what}: not reached within {within:.0f}s")
        await asyncio.sleep(0.05)
