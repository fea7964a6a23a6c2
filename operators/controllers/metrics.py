"""Controller metrics named like controller-runtime's, so existing dashboards and alerts apply.

``controller_runtime_reconcile_total{controller,result}``, ``controller_runtime_reconcile_errors_total``,
``controller_runtime_reconcile_time_seconds`` and ``workqueue_depth{name}`` (reconciles waiting or
running: a reconcile waits for its object's lock, which is what a work queue would hold).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry()  # the controllers' metrics, one set per process
RECONCILES = Counter(
    "controller_runtime_reconcile",
    "Reconciliations per controller and result.",
    ["controller", "result"],
    registry=REGISTRY,
)
ERRORS = Counter(
    "controller_runtime_reconcile_errors", "Reconciliation errors per controller.", ["controller"], registry=REGISTRY
)
DURATION = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Time per reconciliation.",
    ["controller"],
    registry=REGISTRY,
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
DEPTH = Gauge("workqueue_depth", "Reconciliations waiting or running, per controller.", ["name"], registry=REGISTRY)

P = ParamSpec("P")
R = TypeVar("R")


def reconciler(controller: str) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Count, time and track in the queue gauge every call of an async reconcile function."""

    ERRORS.labels(controller)  # its series there from the start: 0 errors is data (rate() and alerts see it)
    for result in ("success", "error"):
        RECONCILES.labels(controller, result)

    def decorate(function: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(function)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            DEPTH.labels(controller).inc()
            started = time.perf_counter()
            result = "error"
            try:
                value = await function(*args, **kwargs)
                result = "success"
                return value
            except Exception:
                ERRORS.labels(controller).inc()
                raise
            finally:
                DEPTH.labels(controller).dec()
                DURATION.labels(controller).observe(time.perf_counter() - started)
                RECONCILES.labels(controller, result).inc()

        return wrapper

    return decorate
