#!/usr/bin/env bash
# Build the upstream peer for the side-by-side benchmark (benchmarks/bench_peers.py) into .tools/bin:
# kubernetes-sigs/scheduler-plugins' own scheduler (cmd/scheduler), from the Go module proxy, at the version of
# scheduler-plugins/go.mod (its own module, pinned to Kubernetes 1.34.4: see the comment there); and the minimal
# Go webhook benchmarks/bench_admission.py compares netaware's webhook with (admission-floor/). On demand only:
# not part of the README's test command (the conformance test skips, with the reason, when it is not built).
# Each rebuilt only when its folder's go.mod/go.sum or Go files changed (build.sh's stamps).
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/lib.sh"
start=$SECONDS
build scheduler-plugins scheduler-plugins sigs.k8s.io/scheduler-plugins/cmd/scheduler
build admission-floor admission-floor .
version="$(awk '$1 == "require" && $2 == "sigs.k8s.io/scheduler-plugins" {print $3}' "$HERE/scheduler-plugins/go.mod")"
echo "scheduler-plugins $version and admission-floor ready in $BIN ($((SECONDS - start)) s)"
