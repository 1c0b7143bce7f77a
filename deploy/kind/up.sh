#!/usr/bin/env bash
# Creates a kind cluster without kube-proxy, loads svcproxy's image, installs
# it with kubectl apply -k deploy/kind/ and checks that a ClusterIP answers
# from a pod. Needs kind, kubectl and a container engine; run from anywhere.
#   IMAGE_TAR  image archive to load (default bin/svcproxy-image.tar, built
#              by `make image` if missing)
#   KEEP=1     keep the cluster when the smoke check fails
# This script is not run by our CI: there is no container engine there (see
# docs/kind.md for what is tested instead).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
cluster=svcproxy # the name in deploy/kind/cluster.yaml
ctx="kind-$cluster"
tar="${IMAGE_TAR:-bin/svcproxy-image.tar}"

for tool in kind kubectl; do
	command -v "$tool" >/dev/null || { echo "up.sh: $tool not found" >&2; exit 1; }
done
[[ -f $tar ]] || make image

if ! kind get clusters | grep -qx "$cluster"; then
	kind create cluster --config deploy/kind/cluster.yaml
fi
kind load image-archive "$tar" --name "$cluster"
kubectl --context "$ctx" apply -k deploy/kind/
kubectl --context "$ctx" -n kube-system rollout status ds/svcproxy --timeout=120s

# Smoke check: a Deployment behind a Service, reached through its ClusterIP
# from a pod: agnhost serves /hostname, busybox's wget asks for it.
smoke() {
	kubectl --context "$ctx" create deployment smoke --image=registry.k8s.io/e2e-test-images/agnhost:2.53 \
		--replicas=2 -- /agnhost netexec --http-port=8080
	kubectl --context "$ctx" expose deployment smoke --port=80 --target-port=8080
	kubectl --context "$ctx" rollout status deployment/smoke --timeout=120s
	local ip
	ip="$(kubectl --context "$ctx" get service smoke -o jsonpath='{.spec.clusterIP}')"
	kubectl --context "$ctx" run smoke-client --rm -i --restart=Never --image=busybox:1.36 -- \
		sh -c "for i in 1 2 3 4 5 6; do wget -qO- -T 2 http://$ip/hostname && echo && exit 0; sleep 5; done; exit 1"
}
cleanup_smoke() {
	kubectl --context "$ctx" delete deployment,service smoke --ignore-not-found >/dev/null
}
if smoke; then
	cleanup_smoke
	echo "up.sh: svcproxy serves ClusterIPs on cluster $cluster (kubectl --context $ctx)"
	exit 0
fi
echo "up.sh: smoke check failed; svcproxy's logs:" >&2
kubectl --context "$ctx" -n kube-system logs ds/svcproxy --tail=50 >&2 || true
cleanup_smoke
[[ ${KEEP:-} == 1 ]] || kind delete cluster --name "$cluster"
exit 1
