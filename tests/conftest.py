"""Where the suite's time goes: after every run, each tier's seconds (setup, call and teardown of its tests, a
shared control plane's start included) and its number of tests, printed at the end of the run (in CI's log too)
and, for a run of every tier, written to ``.tools/suite-times.json``, which ``python -m hack.suite_times`` turns
into the record ``docs/figures/suite_times.json``."""

from __future__ import annotations

import json
import pathlib
import time
from typing import Any

import pytest

from hack.suite_times import TIERS

ROOT = pathlib.Path(__file__).resolve().parent.parent
TIMES = ROOT / ".tools" / "suite-times.json"


def tier_of(nodeid: str, keywords: Any) -> str:
    """The real node tier by its marker (its modules sit with the e2e ones); the others by their directory
    (``tests/integration``, ``tests/packaging``, ``tests/e2e``); every other directory is the unit tier (the pure
    engine, the CLI, the servers in process, the fuzzers)."""
    if "realnode" in keywords:
        return "realnode"
    parts = nodeid.split("/")
    directory = parts[1] if len(parts) > 2 and parts[0] == "tests" else ""
    return directory if directory in ("integration", "packaging", "e2e") else "unit"


class SuiteTimes:
    def __init__(self) -> None:
        self.seconds = dict.fromkeys(TIERS, 0.0)
        self.tests = dict.fromkeys(TIERS, 0)
        self.started = time.monotonic()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        tier = tier_of(report.nodeid, report.keywords)
        self.seconds[tier] += report.duration
        self.tests[tier] += report.when == "setup"

    @pytest.hookimpl(trylast=True)  # after the slowest tests (--durations)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        ran = [tier for tier in TIERS if self.tests[tier]]
        if not ran:
            return
        wall = time.monotonic() - self.started
        parts = [f"{tier} {self.seconds[tier]:.0f} s ({self.tests[tier]} tests)" for tier in ran]
        terminalreporter.write_line(f"time per tier: {', '.join(parts)}; the run {wall:.0f} s")
        if len(ran) < len(TIERS):  # what is kept is a whole run's (a module run alone in CI does not replace it)
            return
        document = {"seconds": {tier: round(self.seconds[tier], 1) for tier in ran},
                    "tests": {tier: self.tests[tier] for tier in ran}, "wall seconds": round(wall, 1)}  # fmt: skip
        try:
            TIMES.parent.mkdir(exist_ok=True)
            TIMES.write_text(json.dumps(document, indent=2) + "\n")
        except OSError as error:  # a read-only checkout still runs its tests
            terminalreporter.write_line(f"time per tier not kept: {error}")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(SuiteTimes(), "netaware-suite-times")
