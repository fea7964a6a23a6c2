"""Logging set-up for the long-running commands: readable text, or one JSON object per line.

A record about a Kubernetes object carries its keys (:func:`about`): ``logger.warning("...", extra=about("Pod",
namespace, name, node=node))``. The JSON lines show them as fields (``kind``, ``namespace``, ``name``, and
``node``, ``appgroup``, ``pod`` where they apply), so a log pipeline filters by object, not by message text; the
text format leaves them out (the message names the object already).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
FORMATS = ("text", "json")
OBJECT = "netaware_object"  # the LogRecord attribute :func:`about` sets
OBJECT_KEYS = ("kind", "namespace", "name", "node", "appgroup", "pod")


def about(kind: str, namespace: str | None = None, name: str | None = None, **more: str | None) -> dict[str, Any]:
    """``extra`` for a record about one object: its kind, namespace and name, and more keys (``node``,
    ``appgroup``, ``pod``); the unknown ones (None) left out."""
    unknown = set(more) - set(OBJECT_KEYS)
    if unknown:
        raise ValueError(f"not an object key: {sorted(unknown)}")
    keys = {"kind": kind, "namespace": namespace, "name": name, **more}
    return {OBJECT: {key: value for key, value in keys.items() if value}}


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg"}``, the object's keys (:func:`about`), and ``error`` with the traceback,
    one line per record."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        entry.update(getattr(record, OBJECT, None) or {})
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def configure(log_format: str = "text", level: int = logging.INFO) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
