"""Bounded memos: the one rule for the module-level caches of parsed values and derived tables.

A memo holds at most ``kept`` entries and is emptied when full: no recency bookkeeping on the hot paths that read
it, and a working set that outgrows it is simply computed again."""

from __future__ import annotations

from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def remember(memo: dict[K, V], key: K, value: V, kept: int) -> V:
    """``value`` stored in ``memo`` under ``key`` (``memo`` emptied first when it holds ``kept`` entries)."""
    if len(memo) >= kept:
        memo.clear()
    memo[key] = value
    return value
