#!/usr/bin/env python3
"""The offline commands on a large cluster's dump, against the bare loader as floor:

    python -m benchmarks.bench_dump [--nodes 20000 --pods 40000 --groups 500 --runs 3]

A ``kubectl get nodes,pods -A -o yaml`` of the size issue 29 names (one ``kind: List``; 20k nodes in 50 zones and
40k pods, each with the fields the engine reads — labels, annotations, allocatable, requests, owner — about 400
bytes each: 24 MB), and the same as ``-o json``. Measured per format, each in a
process of its own, min/median/max over ``--runs``:

* **netaware reconcile -f DUMP** (what every offline command pays to read a cluster): seconds and peak RSS;
* **floor**: the bare parser in a fresh process — PyYAML's libyaml ``CSafeLoader`` for YAML, ``json.loads``
  for JSON — seconds and peak RSS (the parsed objects held); and the same with the garbage collector paused, as
  netaware reads a dump (without it, two thirds of libyaml's time are collections);
* the ratios of the two.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks import records
from benchmarks.figures import spread

ROOT = Path(__file__).resolve().parents[1]

FLOOR = """
import gc, json, resource, sys, time, yaml
if sys.argv[2] == "paused":
    gc.disable()
started = time.perf_counter()
text = open(sys.argv[1], encoding="utf-8").read()
held = json.loads(text) if sys.argv[1].endswith(".json") else yaml.load(text, Loader=yaml.CSafeLoader)
print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def node(index: int) -> dict[str, Any]:
    zone = f"zone-{index % 50}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"node-{index}",
            "uid": f"00000000-0000-0000-0000-{index:012d}",
            "labels": {"topology.kubernetes.io/region": f"region-{index % 5}", "topology.kubernetes.io/zone": zone},
            "annotations": {"node.koordinator.sh/network-bandwidth": "10G"},
        },
        "status": {"allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"}},
    }


def pod(index: int, nodes: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-{index}",
            "namespace": f"team-{index % 20}",
            "labels": {"app": f"app-{index % 500}"},
            "annotations": {"kubernetes.io/egress-bandwidth": "100M"},
        },
        "spec": {
            "nodeName": f"node-{index % nodes}",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
        },
        "status": {"phase": "Running"},
    }


def floor(path: Path, collector: str = "on") -> tuple[float, float]:
    command = [sys.executable, "-c", FLOOR, str(path), collector]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    seconds, rss = done.stdout.split()
    return float(seconds), float(rss)


def reconcile(path: Path) -> tuple[float, float]:
    """netaware reconcile in a child that reports its own peak RSS (a child's rusage is the largest so far)."""
    script = (
        "import resource, sys, time\n"
        "from operators.cli.main import cli\n"
        "started = time.perf_counter()\n"
        "try:\n"
        "    cli(['reconcile', '-f', sys.argv[1], '-o', 'json', '--now', '2026-11-22T12:00:00Z'],"
        " standalone_mode=False)\n"
        "finally:\n"
        "    print(time.perf_counter() - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,"
        " file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, cwd=ROOT, check=False
    )
    if done.returncode:
        raise RuntimeError(done.stderr.strip()[-800:])
    seconds, rss = done.stderr.strip().splitlines()[-1].split()
    return float(seconds), float(rss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--pods", type=int, default=40_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    figures = {}
    objects = [*(node(i) for i in range(args.nodes)), *(pod(i, args.nodes) for i in range(args.pods))]
    listing = {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": objects}
    with tempfile.TemporaryDirectory() as folder:
        paths = {"yaml": Path(folder) / "dump.yaml", "json": Path(folder) / "dump.json"}
        paths["yaml"].write_text(yaml.dump(listing, Dumper=yaml.CSafeDumper, sort_keys=False))
        paths["json"].write_text(json.dumps(listing, indent=4))
        print(
            f"offline commands on a dump of {args.nodes} nodes and {args.pods} pods, {args.runs} runs "
            "(min / median / max)"
        )
        for form, path in paths.items():
            size = path.stat().st_size / 1e6
            floors = [floor(path) for _ in range(args.runs)]
            paused = [floor(path, "paused") for _ in range(args.runs)]
            ours = [reconcile(path) for _ in range(args.runs)]
            print(f"  {form} ({size:.1f} MB)")
            rows = {
                "floor seconds (bare parser)": [f[0] for f in floors],
                "floor peak RSS MiB": [f[1] for f in floors],
                "floor, collector paused, seconds": [p[0] for p in paused],
                "reconcile seconds": [o[0] for o in ours],
                "reconcile peak RSS MiB": [o[1] for o in ours],
                "reconcile / floor seconds": [o[0] / f[0] for o, f in zip(ours, floors, strict=True)],
                "reconcile / floor RSS": [o[1] / f[1] for o, f in zip(ours, floors, strict=True)],
                "reconcile / paused floor seconds": [o[0] / p[0] for o, p in zip(ours, paused, strict=True)],
            }
            for key, values in rows.items():
                print(f"    {key:30} {spread(values, '.3g')}")
                figures[f"{form}: {key}"] = records.figure(values)
    if args.record:
        records.write(args.record, "bench_dump", vars(args), figures)


if __name__ == "__main__":
    main()
