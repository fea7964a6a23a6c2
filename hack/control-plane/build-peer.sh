#!/usr/bin/env bash
# Build the upstream peer for the side-by-side benchmark (benchmarks/bench_peers.py) into .tools/bin:
# kubernetes-sigs/scheduler-plugins' own scheduler (cmd/scheduler), from the Go module proxy, at the version of
# scheduler-plugins/go.mod (its own module, pinned to Kubernetes 1.34.4: see the comment there). On demand only:
# not part of the README's test command (the conformance test skips, with the reason, when it is not built).
# Rebuilt only when that go.mod/go.sum changed (a stamp in .tools/stamps).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="$ROOT/.tools/bin"
STAMPS="$ROOT/.tools/stamps"
mkdir -p "$BIN" "$STAMPS"
command -v go >/dev/null || { echo "build-peer.sh: go is not installed" >&2; exit 1; }
dir="$HERE/scheduler-plugins"
stamp_of() { (cat "$dir/go.mod"; cat "$dir/go.sum" 2>/dev/null || true) | sha256sum | cut -c1-16; }
want="$(stamp_of)"
if [[ -x "$BIN/scheduler-plugins" && -f "$STAMPS/scheduler-plugins" && "$(cat "$STAMPS/scheduler-plugins")" == "$want" ]]; then
  echo "up to date: scheduler-plugins"; exit 0
fi
start=$SECONDS
version="$(awk '$1 == "require" && $2 == "sigs.k8s.io/scheduler-plugins" {print $3}' "$dir/go.mod")"
echo "building scheduler-plugins $version (sigs.k8s.io/scheduler-plugins/cmd/scheduler)"
(cd "$dir" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags="-s -w" -o "$BIN/scheduler-plugins.tmp" \
  sigs.k8s.io/scheduler-plugins/cmd/scheduler)
mv "$BIN/scheduler-plugins.tmp" "$BIN/scheduler-plugins"
stamp_of >"$STAMPS/scheduler-plugins"
echo "scheduler-plugins $version ready in $BIN ($((SECONDS - start)) s)"
