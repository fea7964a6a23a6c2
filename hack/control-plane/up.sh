#!/usr/bin/env bash
# Start the loopback control plane (building it first if needed), with KWOK nodes from the example cluster:
#   hack/control-plane/up.sh [--dir DIR] [--nodes FILE.yaml ...] [--real-nodes N]   then: export KUBECONFIG=...
#   (--real-nodes: that many real nodes, kubelet and containerd, beside the KWOK ones; needs root)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[[ -x "$PYTHON" ]] || PYTHON=python3
bash "$HERE/build.sh" >/dev/null
if [[ " $* " != *" --nodes "* ]]; then set -- "$@" --nodes "$ROOT/hack/examples/cluster.yaml"; fi
cd "$ROOT" && exec "$PYTHON" -m hack.control_plane.cluster up "$@"
