#!/usr/bin/env bash
# Build netaware's image from the Dockerfile with buildah (no Docker engine needed) into an OCI archive, and push
# it to a registry when asked:
#
#   hack/image.sh                                        # dist/netaware-<appVersion>.oci.tar
#   hack/image.sh --push registry.example.com/team/netaware:0.2.0   # ... and pushed there
#
# Then point the chart at it: --set image.repository=registry.example.com/team/netaware --set image.tag=0.2.0.
# Without a registry, load the archive into the cluster's nodes instead:
#   kind load image-archive dist/netaware-0.2.0.oci.tar           (tag: localhost/netaware:0.2.0)
#   k3d image import dist/netaware-0.2.0.oci.tar
#   minikube image load dist/netaware-0.2.0.oci.tar
# and install with --set image.repository=localhost/netaware --set image.tag=0.2.0 --set image.pullPolicy=Never.
#
# Options: --tag REF (default localhost/netaware:<appVersion>), --output FILE (the archive), --push REF (buildah
# push: your registry credentials, `buildah login`), --base IMAGE (the Dockerfile's BASE; default its own,
# python:3.11.11-slim-bookworm, pulled), --storage DIR and --runroot DIR (buildah's storage and run-time state;
# default buildah's own), --pull-never (BASE is in the storage already). Needs buildah (Debian: apt-get install buildah) and root or rootless buildah.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="$(awk -F'"' '/^appVersion:/ {print $2}' "$ROOT/helm/netaware/Chart.yaml")"
TAG="localhost/netaware:$VERSION"
OUTPUT="$ROOT/dist/netaware-$VERSION.oci.tar"
PUSH="" BASE="" STORAGE="" RUNROOT="" PULL=()
usage() { sed -n '2,20s/^# \{0,1\}//p' "$0"; }
while (($#)); do
  case "$1" in
    --tag) TAG="$2"; shift 2 ;;
    --output) OUTPUT="$2"; shift 2 ;;
    --push) PUSH="$2"; shift 2 ;;
    --base) BASE="$2"; shift 2 ;;
    --storage) STORAGE="$2"; shift 2 ;;
    --runroot) RUNROOT="$2"; shift 2 ;;
    --pull-never) PULL=(--pull-never); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "hack/image.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v buildah >/dev/null || { echo "hack/image.sh: buildah is not installed (Debian: apt-get install buildah)" >&2; exit 1; }
B=(buildah)
if [[ -n "$STORAGE" ]]; then
  B+=(--root "$STORAGE" --runroot "${RUNROOT:-$STORAGE.run}" --storage-driver overlay)
fi
export BUILDAH_ISOLATION="${BUILDAH_ISOLATION:-chroot}"
args=(bud --quiet --layers --network host "${PULL[@]}" -t "$TAG" -f "$ROOT/Dockerfile")
[[ -n "$BASE" ]] && args+=(--build-arg "BASE=$BASE")
# The build steps trust what this machine trusts (its egress may present its own CA): the host's bundle is mounted
# into each RUN step, never copied into a layer.
[[ -s /etc/ssl/certs/ca-certificates.crt ]] && args+=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro)
log="$(mktemp)"
# buildah re-executes itself from a sealed memfd copy for each RUN step; under load the kernel can refuse the seal
# with EBUSY (pages of the copy still pinned), a transient failure: tried again (finished layers are cached) up to
# three times for that error only.
for attempt in 1 2 3; do
  if "${B[@]}" "${args[@]}" "$ROOT" >"$log" 2>&1; then break; fi
  if [[ $attempt -lt 3 ]] && grep -q 'sealing memfd copy: Device or resource busy' "$log"; then
    echo "buildah bud: transient EBUSY sealing its memfd copy (attempt $attempt), trying again"; sleep 2; continue
  fi
  tail -30 "$log" >&2; rm -f "$log"; exit 1
done
rm -f "$log"
mkdir -p "$(dirname "$OUTPUT")"
rm -f "$OUTPUT.tmp"
"${B[@]}" push --quiet "$TAG" "oci-archive:$OUTPUT.tmp:$TAG" >/dev/null
mv "$OUTPUT.tmp" "$OUTPUT"
echo "image $TAG: $OUTPUT ($(du -m "$OUTPUT" | cut -f1) MiB)"
if [[ -n "$PUSH" ]]; then
  "${B[@]}" push --quiet "$TAG" "docker://$PUSH"
  echo "pushed $PUSH"
fi
