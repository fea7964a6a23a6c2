"""Bounded memos: the one rule for the module-level caches of parsed values and derived tables.

A memo holds at most ``kept`` entries and is emptied when full: no recency bookkeeping on the hot paths that read
it, and a working set that outgrows it is simply computed again."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

A = TypeVar("A")
K = TypeVar("K")
V = TypeVar("V")


def remember(memo: dict[K, V], key: K, value: V, kept: int) -> V:
    """``value`` stored in ``memo`` under ``key`` (``memo`` emptied first when it holds ``kept`` entries)."""
    if len(memo) >= kept:
        memo.clear()
    memo[key] = value
    return value


def per_object(memo: dict[int, tuple[object, V]], held: object, kept: int, compute: Callable[[A], V], arg: A) -> V:
    """``compute(arg)``, kept in ``memo`` per ``held`` object: keyed by its id, with the object itself, so that an
    id reused after the object is gone never serves the old value (the object cannot go while its entry holds it)."""
    found = memo.get(id(held))
    if found is not None and found[0] is held:
        return found[1]
    return remember(memo, id(held), (held, compute(arg)), kept)[1]
