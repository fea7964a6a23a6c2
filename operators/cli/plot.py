"""``netaware simulate --plot``: per-node bandwidth utilisation of both schedulers, side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click


def utilisation_plot(series: Mapping[str, Sequence[float]], title: str, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        raise click.ClickException("--plot needs matplotlib: pip install 'netaware[plot]'") from None
    figure, axes = plt.subplots(1, len(series), figsize=(6 * len(series), 4), sharey=True)
    for axis, (name, values) in zip(figure.axes if len(series) > 1 else [axes], series.items(), strict=True):
        ordered = sorted(values, reverse=True)
        axis.bar(range(len(ordered)), ordered, width=1.0)
        axis.axhline(100, color="red", linewidth=1)
        axis.set_title(name)
        axis.set_xlabel("nodes (most used first)")
    figure.axes[0].set_ylabel("bandwidth requested, % of capacity")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def topology_plot(
    costs: Mapping[str, Mapping[str, Mapping[str, int]]],
    pairs: Mapping[tuple[str, str], int],
    zones: Mapping[str, str],
    title: str,
    path: str,
) -> None:
    """Heat maps: each topology level's cost matrix (regions, zones) and the measured node pairs, nodes ordered by
    zone (a missing pair is blank)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy as np
    except ImportError:
        raise click.ClickException("--plot needs matplotlib: pip install 'netaware[plot]'") from None
    panels: list[tuple[str, list[str], Any]] = []
    for level, origins in sorted(costs.items()):
        names = sorted(set(origins) | {d for destinations in origins.values() for d in destinations})
        matrix = np.full((len(names), len(names)), np.nan)
        for i, origin in enumerate(names):
            for j, destination in enumerate(names):
                if destination in origins.get(origin, {}):
                    matrix[i, j] = origins[origin][destination]
        panels.append((level.rsplit("/", 1)[-1] + " cost", names, matrix))
    nodes = sorted({node for pair in pairs for node in pair}, key=lambda node: (zones.get(node, ""), node))
    if nodes:
        index = {node: i for i, node in enumerate(nodes)}
        matrix = np.full((len(nodes), len(nodes)), np.nan)
        for (origin, destination), value in pairs.items():
            matrix[index[origin], index[destination]] = value
        panels.append(("measured node pairs, ms (by zone)", nodes, matrix))
    if not panels:
        raise ValueError("nothing to draw: no costs and no measured pairs")
    figure, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 5))
    for axis, (name, labels, matrix) in zip(np.atleast_1d(axes), panels, strict=True):
        image = axis.imshow(matrix, cmap="viridis")
        axis.set_title(name)
        axis.set_xlabel("destination")
        axis.set_ylabel("origin")
        if len(labels) <= 40:
            axis.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
            axis.set_yticks(range(len(labels)), labels, fontsize=7)
        if len(labels) <= 12:  # small enough to read the numbers
            for (i, j), value in np.ndenumerate(matrix):
                if not np.isnan(value):
                    axis.text(j, i, f"{value:g}", ha="center", va="center", color="white", fontsize=8)
        figure.colorbar(image, ax=axis, shrink=0.8)
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
