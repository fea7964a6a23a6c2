#!/usr/bin/env bash
# The real node tier's images, made without a registry (buildah, Debian's packages) into .tools/node/images as OCI
# archives that hack/control_plane/realnode.py imports into each node's containerd:
#   base          Debian bookworm (debootstrap, minbase) with Python 3.11 and pip: what python:3.11-slim-bookworm
#                 gives the Dockerfile (pip may install into the system Python, as in that image)
#   netaware      the project's own Dockerfile, built by hack/image.sh (`buildah bud`) on that base (its steps run
#                 as written): the command users build the image with
#   pause         the sandbox image (hack/control-plane/components/pause), kubelet's and containerd's sandbox setting
#   kube-scheduler  .tools/bin/kube-scheduler: the chart's second scheduler (secondScheduler.image)
# An image is rebuilt only when its inputs changed (a stamp per image); the base only when it is missing.
#
#   images.sh [IMAGE ...]   only those of base, netaware, pause, kube-scheduler, releases (default: every one);
#                           build.sh makes base and netaware while the Go binaries compile, the rest after them
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/lib.sh"

NODE="$ROOT/.tools/node"
IMAGES="$NODE/images"
mkdir -p "$IMAGES"
B=(buildah --root "$NODE/storage" --runroot /run/netaware-buildah --storage-driver overlay)
trap 'rm -rf /run/netaware-buildah' EXIT  # buildah's run-time state: nothing of it is needed after the build
export BUILDAH_ISOLATION=chroot
ALL="base pause kube-scheduler netaware releases"
for name in "$@"; do
  [[ " $ALL " == *" $name "* ]] || { echo "images.sh: no image $name (the images: $ALL)" >&2; exit 2; }
done
wanted=" ${*:-$ALL} "
wants() { [[ "$wanted" == *" $1 "* ]]; }

# stamp NAME INPUT...: true when the image's archive exists and was made from these inputs (files or strings)
stamp_matches() {
  local name="$1"; shift
  local want; want="$(for input in "$@"; do if [[ -e "$input" ]]; then sha256sum "$input"; else echo "$input"; fi; done | sha256sum | cut -c1-16)"
  echo "$want" >"$STAMPS/image-$name.want"
  [[ -s "$IMAGES/$name.tar" && -f "$STAMPS/image-$name" && "$(cat "$STAMPS/image-$name")" == "$want" ]]
}
stamp_done() { mv "$STAMPS/image-$1.want" "$STAMPS/image-$1"; }
export_image() {  # export_image NAME REFERENCE: the OCI archive containerd imports
  rm -f "$IMAGES/$1.tar.tmp"
  "${B[@]}" push --quiet "$2" "oci-archive:$IMAGES/$1.tar.tmp:$2" >/dev/null
  mv "$IMAGES/$1.tar.tmp" "$IMAGES/$1.tar"
  stamp_done "$1"
  echo "image $2 ($(du -m "$IMAGES/$1.tar" | cut -f1) MiB)"
}
from_rootfs() {  # from_rootfs REFERENCE DIR CONFIG...: an image whose only layer is DIR
  local container mount
  container="$("${B[@]}" from --quiet scratch)"
  mount="$("${B[@]}" mount "$container")"
  cp -a "$2/." "$mount/"
  "${B[@]}" umount "$container" >/dev/null
  "${B[@]}" config "${@:3}" "$container"
  "${B[@]}" commit --quiet --rm "$container" "$1" >/dev/null
}

start=$SECONDS
BASE=localhost/netaware-base:bookworm
if wants base && ! stamp_matches base "debootstrap bookworm minbase python3 python3-pip ca-certificates v1"; then
  rootfs="$NODE/base-rootfs"
  rm -rf "$rootfs"
  echo "debootstrap: Debian bookworm with Python (once)"
  debootstrap --variant=minbase --include=python3,python3-pip,ca-certificates bookworm "$rootfs" \
    http://deb.debian.org/debian >"$NODE/debootstrap.log" 2>&1 || { tail -20 "$NODE/debootstrap.log" >&2; exit 1; }
  rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  from_rootfs "$BASE" "$rootfs" --env PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3
  rm -rf "$rootfs"
  export_image base "$BASE"
fi

if wants pause && ! stamp_matches pause "$BIN/pause"; then
  dir="$(mktemp -d)"; install -m 0755 "$BIN/pause" "$dir/pause"
  from_rootfs localhost/pause:netaware "$dir" --entrypoint '["/pause"]' --user 65535:65535
  rm -rf "$dir"
  export_image pause localhost/pause:netaware
fi

if wants kube-scheduler && ! stamp_matches kube-scheduler "$BIN/kube-scheduler"; then
  SCHEDULER="localhost/kube-scheduler:$("$BIN/kube-scheduler" --version | awk '{print $2}')"
  dir="$(mktemp -d)"; install -D -m 0755 "$BIN/kube-scheduler" "$dir/usr/local/bin/kube-scheduler"
  from_rootfs "$SCHEDULER" "$dir" --env PATH=/usr/local/bin --entrypoint '["kube-scheduler"]'
  rm -rf "$dir"
  export_image kube-scheduler "$SCHEDULER"
fi

# The project's image from its own Dockerfile: every file the build context copies is an input (files not committed
# yet too: a new module is in the image).
mapfile -t sources < <(cd "$ROOT" && git ls-files --cached --others --exclude-standard Dockerfile .dockerignore pyproject.toml README.md requirements operators webhooks crds hack/examples hack/configs hack/image.sh | sort)
if wants netaware && ! stamp_matches netaware "$IMAGES/base.tar" "${sources[@]/#/$ROOT/}"; then
  echo "buildah bud: the Dockerfile on $BASE (hack/image.sh)"
  bash "$ROOT/hack/image.sh" --storage "$NODE/storage" --runroot /run/netaware-buildah --base "$BASE" --pull-never \
    --tag localhost/netaware:dev --output "$IMAGES/netaware.tar"
  stamp_done netaware
fi

# The previous release's image, for the upgrade test (tests/e2e/test_day_two.py): the image above with that release's
# wheel (tests/fixtures/releases, hack/cut-release.sh) installed over the package, tagged with its version. Its
# dependencies are the pinned ones of today's image: a release whose pins differ needs its own build.
for wheel in "$ROOT"/tests/fixtures/releases/*/netaware-*-py3-none-any.whl; do
  [[ -e "$wheel" ]] && wants releases || continue
  version="$(basename "$(dirname "$wheel")")"
  if ! stamp_matches "netaware-$version" "$IMAGES/netaware.tar" "$wheel"; then
    echo "the release $version's image: its wheel over localhost/netaware:dev"
    container="$("${B[@]}" from --quiet --pull-never localhost/netaware:dev)"
    "${B[@]}" copy --quiet "$container" "$wheel" /tmp/ >/dev/null
    "${B[@]}" run --user 0:0 "$container" -- sh -c \
      "pip install --quiet --no-cache-dir --no-index --no-deps --force-reinstall /tmp/$(basename "$wheel") && rm /tmp/*.whl"
    "${B[@]}" commit --quiet --rm "$container" "localhost/netaware:$version" >/dev/null
    export_image "netaware-$version" "localhost/netaware:$version"
  fi
done
echo "images ready in $IMAGES ($((SECONDS - start)) s)"
