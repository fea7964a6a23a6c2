"""Figures from records: a page region is its record's table, a plot carries the digest of the records it was
drawn from, and the check fails as soon as a record and its page or plot disagree."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from hack import render_figures

MACHINE = {"system": "Linux", "processor": "x86_64", "cpus": 2, "python": "3.11.7"}


def _stats(low: float, median: float, high: float) -> dict[str, float]:
    return {"min": low, "median": median, "max": high}


def test_a_comparison_renders_one_column_per_subject_with_its_spread() -> None:
    record = {
        "benchmark": "bench_x",
        "parameters": {"runs": 3, "record": "/tmp/x.json"},
        "machine": MACHINE,
        "figures": {
            "a: pods/s": {"unit": "", "columns": {"one": _stats(9.5, 10, 12.25), "two": _stats(3, 3, 3)}},
            "a: cost": {"unit": "", "columns": {"one": _stats(float("nan"), float("nan"), float("nan"))}},
        },
    }
    assert render_figures.table(record, ()).splitlines() == [
        "Record `docs/figures/bench_x.json`: `python -m benchmarks.bench_x` (runs 3) on 2 CPUs, Python 3.11.7.",
        "",
        "| figure | one | two |",
        "|---|---|---|",
        "| a: pods/s | 10 (9.5-12.25) | 3 |",
        "| a: cost | - |  |",
        "Median of the runs (min-max).",
    ]


def test_a_region_may_choose_and_order_the_columns_of_a_comparison() -> None:
    columns = {"a": _stats(1, 1, 1), "b c": _stats(2, 2, 2), "d": _stats(3, 3, 3)}
    record = {"benchmark": "bench_x", "parameters": {}, "machine": MACHINE,
              "figures": {"rate": {"unit": "", "columns": columns}}}  # fmt: skip
    page = '<!-- figures:bench_x columns="d,b c" -->\nold\n<!-- /figures:bench_x -->\n'
    rendered = render_figures.render(page, {"bench_x": record})
    assert "| figure | d | b c |\n|---|---|---|\n| rate | 3 | 2 |" in rendered


@pytest.fixture(name="docs")
def docs_tree(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    figures = tmp_path / "docs" / "figures"
    figures.mkdir(parents=True)
    monkeypatch.setattr(render_figures, "FIGURES", figures)
    (tmp_path / "docs" / "page.md").write_text("before\n<!-- figures:bench_y -->\nstale\n<!-- /figures:bench_y -->\n")
    record = {"benchmark": "bench_y", "parameters": {}, "machine": MACHINE,
              "figures": {"p99": {**_stats(1, 2, 3), "unit": "ms", "budget": "< 5 ms"}}}  # fmt: skip
    (figures / "bench_y.json").write_text(json.dumps(record))
    return tmp_path / "docs"


def test_a_page_is_rendered_from_its_record_and_the_check_sees_a_changed_record(docs: pathlib.Path) -> None:
    assert render_figures.main(["--check"]) == 1  # "stale" is not the record's table
    assert render_figures.main([]) == 0
    assert "| p99 | 1 | 2 | 3 | ms | < 5 ms |" in (docs / "page.md").read_text()
    assert render_figures.main(["--check"]) == 0
    record = json.loads((docs / "figures" / "bench_y.json").read_text())
    record["figures"]["p99"]["median"] = 2.5
    (docs / "figures" / "bench_y.json").write_text(json.dumps(record))
    assert render_figures.main(["--check"]) == 1


def test_a_plot_is_drawn_from_its_records_and_the_check_sees_a_changed_record(docs: pathlib.Path) -> None:
    pytest.importorskip("matplotlib")
    columns = {"netaware": _stats(30, 36, 41), "sp-network": _stats(58, 64, 68)}
    figures = {f"{scenario}: {name}": {"unit": "", "columns": columns}
               for scenario in ("onlineboutique", "random-dag", "thesis-1")
               for name in ("pods/s", "mean cost per edge", "overcommitted nodes")}  # fmt: skip
    record = {"benchmark": "bench_peers", "parameters": {}, "machine": MACHINE, "figures": figures}
    (docs / "figures" / "bench_peers.json").write_text(json.dumps(record))
    assert render_figures.main([]) == 0
    svg = (docs / "figures" / "peers.svg").read_text()
    stamp = render_figures.digest({"bench_peers": record}, ("bench_peers",), render_figures.peers_plot)
    assert "<svg" in svg and stamp in svg
    assert render_figures.main(["--check"]) == 0
    record["figures"]["thesis-1: pods/s"]["columns"]["netaware"]["median"] = 37
    (docs / "figures" / "bench_peers.json").write_text(json.dumps(record))
    assert render_figures.main(["--check"]) == 1
    assert not (docs / "figures" / "latency.svg").exists()  # its records are not there: not drawn


def test_every_benchmark_can_write_a_record() -> None:
    benchmarks = sorted((render_figures.ROOT / "benchmarks").glob("bench_*.py"))
    assert len(benchmarks) >= 15
    silent = [
        path.name for path in benchmarks if '"--record"' not in path.read_text() or "records." not in path.read_text()
    ]
    assert silent == []


SMOKE = {  # the benchmarks that need neither root nor a control plane, at a size that runs in seconds
    "bench_extender": ["--nodes", "60", "--zones", "5", "--pods", "60", "--groups", "5", "--samples", "5"],
    "bench_simulate": ["--nodes", "50", "--pods", "100"],
    "bench_networktopology": ["--nodes", "40", "--zones", "4", "--regions", "2", "--per-configmap", "500",
                              "--repeat", "1"],
    "bench_descheduler": ["--nodes", "50", "--pods", "500", "--repeat", "1"],
    "bench_appgroup": ["--workloads", "100", "--edges", "200", "--groups", "10", "--pods", "100", "--repeat", "1"],
    "bench_nodeslo": ["--nodes", "50", "--strategies", "5", "--repeat", "1"],
    "bench_dump": ["--nodes", "20", "--pods", "40", "--runs", "1"],
    "bench_webhook": ["--rates", "50", "--seconds", "1", "--repeat", "1"],
    "bench_responsiveness": ["--nodes", "30", "--pods", "60", "--groups", "3", "--runs", "1", "--seconds", "1"],
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SMOKE))
def test_a_benchmark_runs_small_and_records_its_figures(name: str, tmp_path: pathlib.Path) -> None:
    """A benchmark nobody runs rots (bench_extender once stopped at its first pod, unseen): each runs here small."""
    record = tmp_path / "record.json"
    command = [sys.executable, "-m", f"benchmarks.{name}", *SMOKE[name], "--record", str(record)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=render_figures.ROOT, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    written = json.loads(record.read_text())
    assert written["benchmark"] == name and written["figures"]
    assert all("median" in figure or "columns" in figure for figure in written["figures"].values())
