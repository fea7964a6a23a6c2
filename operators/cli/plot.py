"""``netaware simulate --plot``: per-node bandwidth utilisation of both schedulers, side by side."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

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
