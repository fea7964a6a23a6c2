#!/usr/bin/env bash
# Cut a release: package the chart (helm package) and build the wheel of the working tree into
# tests/fixtures/releases/<version>/, where the upgrade tests install it from when it has become the previous
# release (tests/e2e/test_upgrade.py; hack/control-plane/images.sh builds its image from the wheel). Run it on the
# commit that is the release, once the chart's version and appVersion and pyproject's version say it; keep only the
# last release's folder (the tests install the newest one below the working tree's version).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
HELM="${HELM:-$ROOT/.tools/bin/helm}"
version="$(awk '$1 == "version:" {print $2; exit}' "$ROOT/helm/netaware/Chart.yaml")"
python_version="$(awk -F'"' '/^version = / {print $2; exit}' "$ROOT/pyproject.toml")"
[[ "$version" == "$python_version" ]] || { echo "cut-release: chart $version and pyproject $python_version differ" >&2; exit 1; }
out="$ROOT/tests/fixtures/releases/$version"
mkdir -p "$out"
"$HELM" package "$ROOT/helm/netaware" -d "$out" >/dev/null
"${PYTHON:-python3}" -m pip wheel -q --no-deps --wheel-dir "$out" "$ROOT"
echo "release $version: $(ls "$out" | tr '\n' ' ')"
