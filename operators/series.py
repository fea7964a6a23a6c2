"""Metric series that go with their objects: a labelled metric keeps a series per label set forever unless it is
removed, so a metric labelled by node, AppGroup or namespace would grow with every object that ever existed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from prometheus_client import Counter, Gauge


class Series:
    """A labelled metric and the label sets it was given: :meth:`prune` removes those of objects that are gone."""

    def __init__(self, metric: Counter | Gauge) -> None:
        self.metric = metric
        self.held: set[tuple[str, ...]] = set()

    def labels(self, *values: str) -> Any:
        self.held.add(values)
        return self.metric.labels(*values)

    def prune(self, gone: Callable[[tuple[str, ...]], bool]) -> None:
        """Remove every series whose label values ``gone`` says belong to an object that no longer exists."""
        for values in [values for values in self.held if gone(values)]:
            self.held.discard(values)
            with contextlib.suppress(KeyError):
                self.metric.remove(*values)
