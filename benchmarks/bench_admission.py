#!/usr/bin/env python3
"""What a mutating webhook costs a pod's creation, and how much of it is netaware's webhook (slow: not a test).

    python -m benchmarks.bench_admission [--runs 10] [--record FILE.json]

On the loopback control plane (hack/control-plane; no node, no scheduler), the 33 pods of Online Boutique
(:mod:`benchmarks.bench_peers`' AppGroup, 3 replicas of its 11 workloads) are created with one ``kubectl create``
of a List (the API server admits its items one by one, each through the webhooks) into one namespace per column:

* ``no webhook``;
* ``netaware, no change``: netaware's webhook (``--bandwidth-resources combined``) on pods without the AppGroup
  label (nothing to write);
* ``floor, no change``: a minimal Go server (``hack/control-plane/admission-floor``, built by
  ``build-peer.sh``) answering at once with no change;
* ``netaware, bandwidth written``: netaware's webhook on the AppGroup's pods (an AppGroup annotated
  ``ordered-scheduling: false``): it writes the bandwidth the AppGroup's dependencies ask (annotations, extended
  resources);
* ``floor, same patch``: the Go server answering every pod with the patch netaware writes into the first pod.

Both webhooks are registered as the chart registers netaware's with the bandwidth guarantee (two entries split by
``matchConditions``, TLS, ``Fail`` for pods that ask for bandwidth). The columns' order rotates from run to run.
Figures: the seconds the creation took (min / median / max over ``--runs``) and its ratio to ``no webhook``. The
difference between netaware and the floor is netaware's webhook server; the rest is the API server's own cost of
calling a webhook and of applying its patch.
"""

from __future__ import annotations

import argparse
import base64
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

from benchmarks import records
from benchmarks.bench_peers import CREATION, boutique, create, network_topology, pods
from benchmarks.bench_real_scheduler import start_webhook
from benchmarks.figures import spread
from benchmarks.support import loopback_tls, rotated, tls_flags
from hack.control_plane.cluster import ControlPlane
from operators.engine.cluster.bandwidth import Accounting
from operators.engine.cluster.snapshot import build_snapshot
from webhooks.server import decide
from webhooks.view import ClusterView

ROOT = pathlib.Path(__file__).resolve().parent.parent
FLOOR = ROOT / ".tools" / "bin" / "admission-floor"
UNGATED = "false"  # the AppGroups' ordered-scheduling: no gate, the bandwidth still written

# column: (namespace, with the AppGroup label, webhook)
COLUMNS = {
    "no webhook": ("admission-none", True, None),
    "netaware, no change": ("admission-netaware-plain", False, "netaware"),
    "floor, no change": ("admission-floor-plain", False, "floor-plain"),
    "netaware, bandwidth written": ("admission-netaware", True, "netaware"),
    "floor, same patch": ("admission-floor", True, "floor-patch"),
}


def written_patch(group: dict[str, Any], pod: dict[str, Any]) -> str:
    """The JSON patch netaware's webhook (the same function it serves with) writes into ``pod`` of ``group``."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": group["metadata"]["namespace"]}}
    view = ClusterView.from_snapshot(build_snapshot([group, namespace]))
    request = {"uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
               "namespace": group["metadata"]["namespace"], "object": pod}  # fmt: skip
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    answer = decide(review, view, resources=Accounting.COMBINED)["response"]
    return base64.b64decode(answer["patch"]).decode()


def check_written(plane: ControlPlane, column: str, namespace: str) -> None:
    """Stop unless the column's pods carry the bandwidth resource exactly when its webhook writes it (a figure
    of a patch nobody applied would be the floor's)."""
    listed = json.loads(plane.kubectl("get", "pods", "-n", namespace, "-o", "json").stdout)["items"]
    asked = [pod["spec"]["containers"][0]["resources"].get("requests", {}) for pod in listed]
    written = ["netaware.io/bandwidth" in requests for requests in asked]
    expected = column.endswith(("written", "same patch"))
    if not listed or any(flag != expected for flag in written):
        raise SystemExit(f"column {column!r}: {sum(written)} of {len(listed)} pods carry netaware.io/bandwidth")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--record", default=None, help="also write the figures as JSON to this file")
    args = parser.parse_args()
    subprocess.run(["bash", str(ROOT / "hack" / "control-plane" / "build.sh")], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["bash", str(ROOT / "hack" / "control-plane" / "build-peer.sh")], check=True)
    folder = pathlib.Path(tempfile.mkdtemp(prefix="netaware-admission-"))
    plane = ControlPlane(folder / "plane")
    plane.start([])
    processes: list[subprocess.Popen[bytes]] = []
    try:
        plane.kubectl("apply", "-f", str(ROOT / "crds"))
        plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        for namespace, *_ in COLUMNS.values():
            plane.kubectl("create", "namespace", namespace)
            for document in (network_topology(namespace), boutique(namespace, UNGATED)):
                plane.kubectl("apply", "-f", "-", stdin=json.dumps(document))
        ca_bundle = loopback_tls(folder)
        served = {webhook: [ns for ns, _, by in COLUMNS.values() if by == webhook] for *_, webhook in COLUMNS.values()}
        group = boutique("admission-floor", UNGATED)
        patch = written_patch(group, pods(group, "none", 0)[0])
        for webhook, namespaces in served.items():
            if webhook is None:
                continue
            server: list[str] = []  # netaware's webhook; else the floor (start_webhook appends the port)
            if webhook.startswith("floor"):
                server = [str(FLOOR), *tls_flags(folder), "-patch", patch if webhook == "floor-patch" else "", "-port"]
            processes.append(start_webhook(plane, folder, ca_bundle, *namespaces, server=server, name=webhook))
        time.sleep(3)  # netaware's webhook lists the AppGroups
        seconds: dict[str, list[float]] = {column: [] for column in COLUMNS}
        for run in range(args.runs):
            for column in rotated(list(COLUMNS), run):
                namespace, grouped, _ = COLUMNS[column]
                items = pods(boutique(namespace, UNGATED), "none", run)
                if not grouped:
                    for item in items:
                        item["metadata"]["labels"] = {"run": str(run)}
                create(plane, items)
                seconds[column].append(CREATION[0])
                if run == 0:
                    check_written(plane, column, namespace)
                plane.kubectl("delete", "pods", "-n", namespace, "--all", "--grace-period=0", "--force")
                time.sleep(0.5)
        floor_seconds = statistics.median(seconds["no webhook"])
        print(f"creation of 33 pods (kubectl create of a List), {args.runs} runs (min / median / max), 2 webhooks "
              "registered as the chart does")  # fmt: skip
        for column, values in seconds.items():
            ratio = statistics.median(values) / floor_seconds
            print(f"  {column:30s} {spread(values, '.3g')} s  {ratio:.2f}x no webhook")
        if args.record:
            figures = {"creation s": records.columns(seconds, "s"),
                       "creation / no webhook": records.columns(
                           {column: [value / floor_seconds for value in values] for column, values in seconds.items()}
                       )}  # fmt: skip
            records.write(args.record, "bench_admission", {**vars(args), "pods": 33}, figures)
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=30)
        plane.stop()
        shutil.rmtree(folder / "plane" / "etcd", ignore_errors=True)
        print(f"logs in {folder}", file=sys.stderr)


if __name__ == "__main__":
    main()
