#!/usr/bin/env bash
# Build the upstream peer into .tools/bin: kubernetes-sigs/scheduler-plugins' own scheduler (cmd/scheduler), from
# the Go module proxy, at the version of scheduler-plugins/go.mod (its own module, pinned to Kubernetes 1.34.4: see
# the comment there), which the conformance test (tests/e2e/test_peer_conformance.py) and the side-by-side
# benchmark (benchmarks/bench_peers.py) run; and the minimal Go webhook benchmarks/bench_admission.py compares
# netaware's webhook with (admission-floor/). build.sh runs it at its end, so the README's test command (and
# .ci/run) builds it; without the binary the conformance test skips with the instruction, and fails under CI.
# Each rebuilt only when its folder's go.mod/go.sum or Go files changed (build.sh's stamps): a second run is a no-op.
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/lib.sh"
start=$SECONDS
build scheduler-plugins scheduler-plugins sigs.k8s.io/scheduler-plugins/cmd/scheduler
build admission-floor admission-floor netaware.local/admission-floor
version="$(awk '$1 == "require" && $2 == "sigs.k8s.io/scheduler-plugins" {print $3}' "$HERE/scheduler-plugins/go.mod")"
echo "scheduler-plugins $version and admission-floor ready in $BIN ($((SECONDS - start)) s)"
