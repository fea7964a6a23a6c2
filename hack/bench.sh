#!/usr/bin/env bash
# Every component benchmark, then one table: figure, budget (docs/design/contracts.md), ratio.
# Usage: hack/bench.sh [--quick]   (a few minutes; --quick shortens the webhook runs)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
exec "$PYTHON" -m benchmarks.run_all "$@"
