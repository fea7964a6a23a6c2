"""Errors as values with a field path, rendered the same way everywhere.

A ``FieldError`` says *where* (``spec.workloads[3].dependencies[0].minBandwidth``),
*what* (the offending value) and *why* (``not a quantity``). CLI output, Events and
status conditions all render it through ``str()``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import pydantic


class FieldError(ValueError):
    """An invalid value at a field path."""

    def __init__(self, path: str, value: object, reason: str) -> None:
        super().__init__(path, value, reason)
        self.path = path
        self.value = value
        self.reason = reason

    def __str__(self) -> str:
        text = f"{self.reason} (got {_render_value(self.value)})"
        return f"{self.path}: {text}" if self.path else text

    def at(self, prefix: str) -> FieldError:
        """The same error, with its path nested under ``prefix``."""
        return FieldError(join_path(prefix, self.path), self.value, self.reason)


def _render_value(value: object) -> str:
    if isinstance(value, str):
        return json.dumps(value if len(value) <= 200 else value[:197] + "...")
    if isinstance(value, int) and value.bit_length() > 256:  # never hit the int-to-string digit limit
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    try:
        text = json.dumps(value, default=str, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def join_path(prefix: str, path: str) -> str:
    """``join_path("spec", "workloads[0]") == "spec.workloads[0]"``; list indexes attach without a dot."""
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


def loc_to_path(loc: Sequence[int | str]) -> str:
    """Render a pydantic error location (``('spec', 'workloads', 3)``) as a field path."""
    path = ""
    for part in loc:
        path = join_path(path, f"[{part}]" if isinstance(part, int) else str(part))
    return path


def from_pydantic(error: pydantic.ValidationError, prefix: str = "") -> list[FieldError]:
    """Turn every entry of a pydantic ``ValidationError`` into a ``FieldError``."""
    result: list[FieldError] = []
    for entry in error.errors(include_url=False):
        context: Any = entry.get("ctx") or {}
        inner = context.get("error")
        if isinstance(inner, FieldError):
            path = join_path(loc_to_path(entry["loc"]), inner.path)
            result.append(FieldError(join_path(prefix, path), inner.value, inner.reason))
            continue
        reason = entry["msg"].removeprefix("Value error, ")
        result.append(FieldError(join_path(prefix, loc_to_path(entry["loc"])), entry.get("input"), reason))
    return result


def render_all(errors: Iterable[FieldError]) -> str:
    """All errors on one line, separated by ``; `` (for one-line CLI messages and Events)."""
    return "; ".join(str(error) for error in errors)
