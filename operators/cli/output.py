"""Rendering command results: ``-o json|yaml|table`` (table by default on a terminal)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import yaml

FORMATS = ("json", "yaml", "table")


def resolve_format(requested: str | None) -> str:
    if requested:
        return requested
    return "table" if sys.stdout.isatty() else "yaml"


def dump(document: Any, fmt: str) -> str:
    if fmt == "json":
        return json.dumps(document, indent=2, sort_keys=False) + "\n"
    return yaml.safe_dump(document, sort_keys=False, width=120)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain, aligned text table (rich renders it when stdout is a terminal)."""
    cells = [[str(cell) for cell in row] for row in rows]
    widths = [max([len(header)] + [len(row[index]) for row in cells]) for index, header in enumerate(headers)]
    lines = ["   ".join(header.upper().ljust(width) for header, width in zip(headers, widths, strict=True)).rstrip()]
    lines.extend(
        "   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells
    )
    return "\n".join(lines) + "\n"


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """A ``v1 List``, as ``kubectl get -o yaml`` writes several objects."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
