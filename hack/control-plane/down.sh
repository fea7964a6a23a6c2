#!/usr/bin/env bash
# Stop the loopback control plane started by up.sh:  hack/control-plane/down.sh [--dir DIR]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
[[ -x "$PYTHON" ]] || PYTHON=python3
cd "$ROOT" && exec "$PYTHON" -m hack.control_plane.cluster down "$@"
