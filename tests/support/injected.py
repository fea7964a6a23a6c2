"""The real `netaware` CLI in a process of its own with one bug injected: ``python -m tests.support.injected FILE
MODULE:CLASS.METHOD ARGS...`` runs ``netaware ARGS...`` with that coroutine method raising ``RuntimeError`` at once
while FILE exists and behaving as written once it is gone. What a test cannot provoke from outside (the process's
loops retry every API and transport error themselves) is what the supervisor exists for: an error nobody expected.
"""

from __future__ import annotations

import functools
import importlib
import pathlib
import sys
from collections.abc import Awaitable, Callable
from typing import Any


def switched_on(switch: pathlib.Path) -> bool:
    """One stat: cheap beside the call it guards, which is not on a hot path."""
    return switch.exists()


def inject(switch: pathlib.Path, target: str) -> None:
    """Replace ``MODULE:CLASS.METHOD`` by a coroutine that raises while ``switch`` exists."""
    module_name, _, qualified = target.partition(":")
    owner_name, _, method = qualified.rpartition(".")
    owner: Any = importlib.import_module(module_name)
    for part in owner_name.split(".") if owner_name else []:
        owner = getattr(owner, part)
    original: Callable[..., Awaitable[Any]] = getattr(owner, method)

    @functools.wraps(original)
    async def faulty(*args: Any, **kwargs: Any) -> Any:
        if switched_on(switch):
            raise RuntimeError(f"injected fault in {target}")
        return await original(*args, **kwargs)

    setattr(owner, method, faulty)


if __name__ == "__main__":
    inject(pathlib.Path(sys.argv[1]), sys.argv[2])
    sys.argv = ["netaware", *sys.argv[3:]]
    from operators.cli.main import main

    main()
