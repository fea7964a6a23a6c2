"""`--log-format json`: one JSON object per line, UTC timestamps, tracebacks kept."""

from __future__ import annotations

import json
import logging

from operators.logs import JsonFormatter


def test_json_lines() -> None:
    record = logging.LogRecord("netaware.run", logging.WARNING, __file__, 1, "lost %s", ("the lease",), None)
    record.created, record.msecs = 0.25, 250
    entry = json.loads(JsonFormatter().format(record))
    assert entry == {
        "ts": "1970-01-01T00:00:00.250Z",
        "level": "warning",
        "logger": "netaware.run",
        "msg": "lost the lease",
    }
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        failed = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", (), sys.exc_info())
    line = JsonFormatter().format(failed)
    assert "\n" not in line and "ValueError: boom" in json.loads(line)["error"]
