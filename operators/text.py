"""Text for people: aligned tables (the CLI's ``-o table``, the demo)."""

from __future__ import annotations

from collections.abc import Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """An aligned text table, laid out by rich (no colour, no borders: it reads the same in a terminal, a pipe
    and a test). Columns whose every cell is a number are right-aligned."""
    import io

    from rich import box
    from rich.console import Console
    from rich.table import Table

    cells = [[str(cell) for cell in row] for row in rows]
    layout = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 3, 0, 0), header_style="")
    for index, header in enumerate(headers):
        numeric = bool(cells) and all(_is_number(row[index]) for row in cells)
        layout.add_column(header.upper(), justify="right" if numeric else "left", no_wrap=True)
    for row in cells:
        layout.add_row(*row)
    buffer = io.StringIO()
    Console(file=buffer, width=100_000, color_system=None, force_terminal=False, legacy_windows=False).print(layout)
    lines = [line.rstrip() for line in buffer.getvalue().splitlines() if line.strip()]
    return "\n".join(lines) + "\n"


def _is_number(text: str) -> bool:
    try:
        float(text.rstrip("%").strip())
    except ValueError:
        return False
    return True
