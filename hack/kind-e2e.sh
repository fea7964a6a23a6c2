#!/usr/bin/env bash
# End-to-end on a real cluster: build the image, create a kind cluster, load the image, install the
# chart, and smoke-test it (CRDs served, controllers ready, an AppGroup gets its status, a pod gets
# its bandwidth annotations from the webhook).
#
# Needs Docker, kind, kubectl and helm (hack/install-k8s-tools.sh provides the last two). Not
# runnable on machines without a Docker engine (such as the CI and development VMs of this project).
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER="${CLUSTER:-netaware-e2e}"
IMAGE="${IMAGE:-ghcr.io/netaware/netaware:e2e}"
NAMESPACE=netaware-system
PATH="$PWD/.tools/bin:$PATH"

command -v docker >/dev/null || { echo "kind-e2e: docker is required" >&2; exit 2; }
command -v kind >/dev/null || { echo "kind-e2e: kind is required (https://kind.sigs.k8s.io)" >&2; exit 2; }
[[ -x .tools/bin/helm ]] || bash hack/install-k8s-tools.sh

docker build -t "$IMAGE" .
kind get clusters | grep -qx "$CLUSTER" || kind create cluster --name "$CLUSTER" --wait 120s
trap '[[ "${KEEP:-}" == 1 ]] || kind delete cluster --name "$CLUSTER"' EXIT
kind load docker-image "$IMAGE" --name "$CLUSTER"

helm upgrade --install netaware helm/netaware --namespace "$NAMESPACE" --create-namespace --wait --timeout 5m \
  --set image.repository="${IMAGE%:*}" --set image.tag="${IMAGE##*:}" --set image.pullPolicy=Never \
  --set secondScheduler.enabled=true --set descheduler.enabled=true

kubectl wait --for=condition=Established crd/appgroups.appgroup.diktyo.x-k8s.io --timeout=60s
kubectl apply -f hack/examples/appgroup-a1.yaml
for _ in $(seq 60); do
  order="$(kubectl get appgroup a1 -o jsonpath='{.status.topologyOrder[*].workload.selector}' || true)"
  [[ -n "$order" ]] && break; sleep 2
done
[[ -n "$order" ]] || { echo "kind-e2e: AppGroup a1 got no status" >&2; exit 1; }
echo "a1 topology order: $order"

kubectl apply -f hack/pod-p1.yaml
annotation="$(kubectl get pod p1-deployment-6b7c8d-xyz12 -o jsonpath='{.metadata.annotations.netaware\.io/bandwidth-source}')"
[[ -n "$annotation" ]] || { echo "kind-e2e: the webhook did not annotate the pod" >&2; exit 1; }
echo "webhook: $annotation"
kubectl get nodeslos
echo "kind-e2e: passed"
