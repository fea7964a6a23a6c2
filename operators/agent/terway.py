"""The terway-qos backend (imperative shell): the plan written as the two files the terway-qos dataplane watches
(:mod:`operators.engine.enforcement.terway`), in the host's ``/var/lib/terway/qos``.

A file is rewritten only when its content differs (a pass with the same input writes nothing), and atomically
(a temporary file renamed over it: terway-qos never reads half a file). An empty plan writes nothing, so the
files keep the last good state. terway-qos keeps its counters in eBPF maps this backend does not read: it
measures nothing (no rates, no ``networkUsage``).
"""

from __future__ import annotations

import os
from pathlib import Path

from operators.agent.enforce import NodePlanner, PassResult
from operators.engine.enforcement.terway import GLOBAL_CONFIG, POD_CONFIG, CgroupLayout, terway_files

DEFAULT_DIRECTORY = "/var/lib/terway/qos"


class TerwayBackend:
    measures = False

    def __init__(self, directory: str | Path = DEFAULT_DIRECTORY, layout: CgroupLayout | None = None):
        self.directory = Path(directory)
        self.layout = layout or CgroupLayout()

    def enforce(self, planner: NodePlanner, dry_run: bool) -> PassResult:
        plan = planner({})  # no leaf ids: terway-qos knows pods by address and UID
        wanted, refused = terway_files(plan, self.layout)
        problems = [*plan.problems, *refused]
        if dry_run or not wanted:
            return PassResult(plan, 0, problems)
        written = 0
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            for name, text in wanted.items():
                written += self._write(self.directory / name, text)
        except OSError as error:
            problems.append(f"terway-qos: cannot write {error.filename or self.directory}: {error.strerror or error}")
            return PassResult(plan, written, problems)
        return PassResult(plan, written, problems, applied=True)

    def cleanup(self) -> list[str]:
        removed = []
        for name in (GLOBAL_CONFIG, POD_CONFIG):
            path = self.directory / name
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            removed.append(f"file {path}")
        return removed

    @staticmethod
    def _write(path: Path, text: str) -> int:
        try:
            if path.read_text() == text:
                return 0
        except (FileNotFoundError, UnicodeDecodeError):
            pass
        staging = path.with_name(f".{path.name}.netaware")
        staging.write_text(text)
        os.replace(staging, path)
        return 1
