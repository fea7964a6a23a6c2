"""The suite on three workers (pytest-xdist, ``-n 3 --dist loadscope`` in pyproject.toml) and where its time goes.

Which tests share a worker (:func:`group_of`): the modules that make network namespaces by fixed names (``naw-*``:
the real node tier and the kernel tests) run one after another on one worker, the e2e modules that share the
session's control plane on one worker (one control plane, not one per worker), every other module as a whole
(its module-scoped fixtures made once). The two long groups are handed out first, so that the short modules fill
the third worker around them.

After every run, each tier's seconds (setup, call and teardown of its tests, a shared control plane's start
included; summed over the workers, so more than the run's wall time) and its number of tests, printed at the end
of the run (in CI's log too) and, for a run of every tier, written to ``.tools/suite-times.json``, which
``python -m hack.suite_times`` turns into the record ``docs/figures/suite_times.json``."""

from __future__ import annotations

import compileall
import json
import pathlib
import time
from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

from hack.suite_times import TIERS

ROOT = pathlib.Path(__file__).resolve().parent.parent
TIMES = ROOT / ".tools" / "suite-times.json"


# The modules that make network namespaces by fixed names (naw-*): never two at once (tests/packaging checks that
# every module that makes namespaces is here).
NETNS_MODULES = (
    "tests/integration/test_agent_kernel.py",
    "tests/integration/test_probe_netns.py",
    "tests/e2e/test_agent.py",
    "tests/e2e/test_real_node.py",
    "tests/e2e/test_real_node_cleanup.py",
    "tests/e2e/test_day_two.py",
)
NETNS_GROUP = "netns"
PLANE_GROUP = "control-plane"  # the e2e modules of the session's control plane (tests/e2e/conftest.py)
FIRST = (NETNS_GROUP, PLANE_GROUP)  # the longest groups, handed out first


def group_of(nodeid: str) -> str:
    """The worker group of a test, by its module: see the module's docstring."""
    module = nodeid.split("::", 1)[0]
    if module in NETNS_MODULES:
        return NETNS_GROUP
    return PLANE_GROUP if module.startswith("tests/e2e/") else module


class ModuleGroups(LoadScopeScheduling):
    """pytest-xdist's ``loadscope`` (a work unit is run whole by one worker) with :func:`group_of`'s units.
    (``--dist loadgroup`` would do it with markers, but it renames tests in a way pytest 9 no longer honours.)"""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> ModuleGroups | None:
    return ModuleGroups(config, log) if config.getoption("dist") == "loadscope" else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a pytest-xdist worker, the long groups first (every worker collects the same order, which is the order
    the work is handed out in, with ``--no-loadscope-reorder``); each module's tests keep their order."""
    if not hasattr(config, "workerinput"):
        return
    place = {group: place for place, group in enumerate(FIRST)}
    items.sort(key=lambda item: place.get(group_of(item.nodeid), len(place)))


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
    if hasattr(config, "workerinput"):
        return  # a pytest-xdist worker: the controller sees every worker's reports and keeps the times
    config.pluginmanager.register(SuiteTimes(), "netaware-suite-times")
    compile_sources()


def compile_sources() -> None:
    """The project's bytecode written before the workers start. Where ``PYTHONDONTWRITEBYTECODE`` is set (this
    machine sets it), no import writes it, and every process the suite starts (each operator, webhook, extender,
    CLI run) compiled netaware from source: 2.3 s of CPU to import it, 1.4 s from bytecode. Only changed files are
    compiled again (by their time stamps)."""
    for folder in ("operators", "webhooks", "hack", "benchmarks", "tests"):
        compileall.compile_dir(ROOT / folder, quiet=1)
