"""The min-max normalisation NetworkBandwidth and NodeResourcesAllocatable share (the thesis'), and the
simulator's network-aware scheduler too."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]


def normalize_min_max(raw: Ints) -> Ints:
    """``(s - min) * 100 // (max - min)``; all equal: every node 0 (no preference)."""
    if raw.size == 0:
        return raw
    low, high = int(raw.min()), int(raw.max())
    if high == low:
        return np.zeros_like(raw)
    return (raw - low) * 100 // (high - low)
