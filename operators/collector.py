"""The garbage collector's settings for the long-running processes (the one rule for every one of them).

CPython's collector stops the process while it runs. Two settings keep those stops short where a component holds
a cluster's worth of objects (measured in ``bench_burst``: 50,000 nodes and pods, a burst of 1,000 AppGroups):

* **A larger first generation** (:func:`for_a_long_run`). With CPython's default (a young collection every 700
  allocations) the objects of a request or a plan still alive at a collection are promoted, and enough promotions
  start a full collection of everything the process has made since it started: every 3-4 s in the burst, 0.3-0.9 s
  each and growing. With 50,000, they mostly die first: full collections of 50-120 ms.
* **What the first sync built, out of the collector's sight** (:func:`freeze_what_lives`). It lives as long as the
  process and holds no reference cycles; a full collection would walk it (0.6-0.9 s at 50,000 nodes). Freed objects
  are still freed (reference counts).
"""

from __future__ import annotations

import gc

YOUNG_COLLECTION_EVERY = 50_000  # allocations (CPython's default: 700)


def for_a_long_run() -> None:
    """The collector's thresholds for a server or controller: set once, at its start, never on a request path."""
    gc.set_threshold(YOUNG_COLLECTION_EVERY, 20, 20)


def freeze_what_lives() -> None:
    """Everything alive now (a first sync, its tables) kept out of every later collection."""
    gc.collect()
    gc.freeze()
