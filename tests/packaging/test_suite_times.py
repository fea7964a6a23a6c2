"""Where the suite's time goes: each test's tier, and the record kept of a whole run."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests import conftest
from tests.conftest import group_of, tier_of

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_each_test_counts_in_its_tier() -> None:
    assert tier_of("tests/engine/test_gates.py::test_x", {}) == "unit"
    assert tier_of("tests/fuzz/test_fuzz_agent.py::test_x[a/b]", {}) == "unit"
    assert tier_of("tests/integration/test_probe.py::test_x", {}) == "integration"
    assert tier_of("tests/packaging/test_helm.py::test_x", {}) == "packaging"
    assert tier_of("tests/e2e/test_rebalance.py::test_x", {"e2e": True}) == "e2e"
    assert tier_of("tests/e2e/test_real_node.py::test_x", {"e2e": True, "realnode": True}) == "realnode"
    assert tier_of("test_outside.py::test_x", {}) == "unit"


def test_each_test_runs_in_its_workers_group() -> None:
    assert group_of("tests/engine/test_gates.py::test_x[1]") == "tests/engine/test_gates.py"
    assert group_of("tests/engine/test_gates.py::TestA::test_x") == "tests/engine/test_gates.py"
    assert group_of("tests/e2e/test_rebalance.py::test_x") == "control-plane"
    assert group_of("tests/e2e/test_real_node.py::test_x") == "netns"
    assert group_of("tests/integration/test_agent_kernel.py::test_x") == "netns"
    assert group_of("tests/integration/test_probe.py::test_x") == "tests/integration/test_probe.py"


def test_the_long_groups_are_handed_out_first_and_each_module_keeps_its_order() -> None:
    names = [
        "tests/engine/test_a.py::t1",
        "tests/engine/test_a.py::t2",
        "tests/e2e/test_b.py::t1",
        "tests/integration/test_agent_kernel.py::t1",
        "tests/e2e/test_b.py::t2",
        "tests/packaging/test_c.py::t1",
    ]
    items = [SimpleNamespace(nodeid=name) for name in names]
    conftest.pytest_collection_modifyitems(SimpleNamespace(), items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == names  # not a worker: as collected
    conftest.pytest_collection_modifyitems(SimpleNamespace(workerinput={}), items)  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == ["tests/integration/test_agent_kernel.py::t1", "tests/e2e/test_b.py::t1",
                                         "tests/e2e/test_b.py::t2", "tests/engine/test_a.py::t1",
                                         "tests/engine/test_a.py::t2", "tests/packaging/test_c.py::t1"]  # fmt: skip


NAMESPACES_MADE = re.compile(r"tests\.support\.kernel|real_nodes=|\"netns\", \"add\"|network_namespaces\(")


def test_every_module_that_makes_network_namespaces_runs_in_their_group() -> None:
    """Their names are fixed (naw-*): two such modules on two workers at once would take each other's."""
    making = {str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")
              if path != pathlib.Path(__file__) and NAMESPACES_MADE.search(path.read_text())}  # fmt: skip
    assert making == set(conftest.NETNS_MODULES)


def run(source: pathlib.Path, record: pathlib.Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "hack.suite_times", "--tools", "cold", "--go-cache", "warm", "--from", str(source)]
    return subprocess.run([*command, "--record", str(record)], capture_output=True, text=True, check=False, cwd=ROOT)


def test_a_whole_run_is_kept_and_a_partial_one_refused(tmp_path: pathlib.Path) -> None:
    tools = tmp_path / ".tools"
    tools.mkdir()
    (tools / "build-seconds").write_text("301\n")
    seconds = {"unit": 200.0, "integration": 300.0, "packaging": 150.0, "e2e": 1200.0, "realnode": 90.0}
    tests = {"unit": 900, "integration": 300, "packaging": 200, "e2e": 60, "realnode": 8}
    (tools / "suite-times.json").write_text(json.dumps({"seconds": seconds, "tests": tests, "wall seconds": 1950.0}))
    record = tmp_path / "suite_times.json"
    done = run(tmp_path, record)
    assert done.returncode == 0, done.stderr
    kept = json.loads(record.read_text())
    assert (kept["parameters"]["tools"], kept["parameters"]["go_cache"]) == ("cold", "warm")
    assert kept["figures"]["build s"]["median"] == 301 and kept["figures"]["suite s"]["median"] == 1950
    assert kept["figures"]["e2e/seconds"]["median"] == 1200 and kept["figures"]["realnode/tests"]["median"] == 8
    del tests["realnode"], seconds["realnode"]
    (tools / "suite-times.json").write_text(json.dumps({"seconds": seconds, "tests": tests, "wall seconds": 1800.0}))
    refused = run(tmp_path, tmp_path / "partial.json")
    assert refused.returncode == 2 and "realnode" in refused.stderr and not (tmp_path / "partial.json").exists()


def test_the_times_are_printed_after_every_run_and_kept_for_a_whole_one(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(conftest, "TIMES", tmp_path / "suite-times.json")
    lines: list[str] = []
    reporter = SimpleNamespace(write_line=lines.append)
    where = {"unit": "tests/engine/t.py", "integration": "tests/integration/t.py", "packaging": "tests/packaging/t.py",
             "e2e": "tests/e2e/t.py", "realnode": "tests/e2e/r.py"}  # fmt: skip

    def ran(tiers: list[str]) -> conftest.SuiteTimes:
        times = conftest.SuiteTimes()
        for tier in tiers:
            keywords = {"realnode": True} if tier == "realnode" else {}
            for when, seconds in (("setup", 1.5), ("call", 2.0), ("teardown", 0.5)):
                times.pytest_runtest_logreport(SimpleNamespace(nodeid=f"{where[tier]}::test_x", keywords=keywords,
                                                               duration=seconds, when=when))  # fmt: skip
        times.pytest_terminal_summary(reporter)
        return times

    ran(["unit", "e2e"])  # a module or two: printed, not kept
    assert lines[-1].startswith("time per tier: unit 4 s (1 tests), e2e 4 s (1 tests); the run")
    assert not (tmp_path / "suite-times.json").exists()
    ran(["unit", "unit", "integration", "packaging", "e2e", "realnode"])
    kept = json.loads((tmp_path / "suite-times.json").read_text())
    assert kept["seconds"] == {"unit": 8.0, "integration": 4.0, "packaging": 4.0, "e2e": 4.0, "realnode": 4.0}
    assert kept["tests"] == {"unit": 2, "integration": 1, "packaging": 1, "e2e": 1, "realnode": 1}
