#!/usr/bin/env bash
# Runs the node suite (test/e2enode): test/e2e's control plane plus a real
# kubelet and containerd with the standard CNI plugins on each worker, so that
# svcproxy runs as its DaemonSet's pod from its image. Offline: the images are
# built here as OCI archives and imported. E2ENODE_RUN=regexp selects tests,
# E2ENODE_KEEP=1 keeps the logs after a pass. Must run as root.
#
# Everything runs in a private mount namespace: the mounts containerd and
# kubelet make (overlays, pod volumes, network namespace files) and the tmpfs
# over /var/log (kubelet's pod log links) never appear in the machine's.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [[ $(id -u) -ne 0 ]]; then
	echo "e2e-node: must run as root (network namespaces, cgroups, containerd)" >&2
	exit 1
fi

# Packages: containerd and runc (the CRI runtime), containernetworking-plugins
# (bridge, host-local, portmap), util-linux (nsenter, unshare), iproute2, the
# iptables and nftables tools (the kube-proxy image carries this machine's
# iptables; the checks read rulesets), procps (sysctl).
missing=()
for pair in containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins \
	nsenter:util-linux ip:iproute2 iptables:iptables nft:nftables sysctl:procps; do
	tool="${pair%%:*}"
	if [[ $tool == /* ]]; then [[ -x $tool ]] && continue; else command -v "$tool" >/dev/null 2>&1 && continue; fi
	missing+=("${pair#*:}")
done
if ((${#missing[@]})); then
	echo "e2e-node: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq "${missing[@]}" >/dev/null ||
		{ apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null; }
fi

if [[ -z ${E2ENODE_IN_MOUNTNS:-} ]]; then
	# libcni caches results in /var/lib/cni: an empty directory to mount over.
	mkdir -p /var/lib/cni
	exec unshare --mount --propagation private -- env E2ENODE_IN_MOUNTNS=1 "$0" "$@"
fi
mount -t tmpfs e2enode-varlog /var/log
mount -t tmpfs e2enode-cni /var/lib/cni

start=$SECONDS
k8s="$(hack/build-k8s-bins.sh | tail -n1)"
nodebins="$(hack/build-kubelet.sh | tail -n1)"

# Images, as OCI archives (docker-save layout) for `ctr images import`.
images="$root/bin/e2enode-images"
rm -rf "$images"
mkdir -p "$images"
tmp="$(mktemp -d)"
export CGO_ENABLED=0
go build -o "$tmp/imagebuild" ./test/e2enode/imagebuild
go build -trimpath -ldflags "-s -w" -o "$tmp/pause" ./test/e2enode/pause
go build -trimpath -ldflags "-s -w" -o "$tmp/echoserver" ./hack/echoserver
"$tmp/imagebuild" -o "$images/pause.tar" -tag svcproxy-e2enode/pause:1 -entrypoint /pause -file "$tmp/pause:/pause"
"$tmp/imagebuild" -o "$images/echoserver.tar" -tag svcproxy-e2enode/echoserver:1 -entrypoint /echoserver \
	-file "$tmp/echoserver:/echoserver"
go run ./hack/image -o "$images/svcproxy.tar" -tag svcproxy:dev
# kube-proxy's image: the cached kube-proxy binary and, for its iptables mode,
# this machine's iptables-nft with the libraries and extensions it loads (what
# upstream's distroless-iptables base carries).
kp=(-file "$k8s/kube-proxy:/usr/local/bin/kube-proxy")
xt="$(readlink -f /usr/sbin/xtables-nft-multi)"
libs=("$xt" /usr/lib/x86_64-linux-gnu/xtables/*.so)
declare -A seen=()
for f in "${libs[@]}"; do
	kp+=(-file "$f:$f")
	for l in $(ldd "$f" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
		[[ -n ${seen[$l]:-} ]] && continue
		seen[$l]=1
		kp+=(-file "$l:$l")
	done
done
for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore \
	iptables-nft iptables-nft-save iptables-nft-restore ip6tables-nft ip6tables-nft-save ip6tables-nft-restore; do
	kp+=(-link "/usr/sbin/$n:xtables-nft-multi")
done
kp+=(-file /etc/protocols:/etc/protocols -file /etc/services:/etc/services)
"$tmp/imagebuild" -o "$images/kube-proxy.tar" -tag registry.k8s.io/kube-proxy:v1.37.2 \
	-entrypoint /usr/local/bin/kube-proxy -env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${kp[@]}"
unset CGO_ENABLED
mkdir -p bin
go build -ldflags "$(hack/version-ldflags.sh)" -o bin/svcproxy ./cmd/svcproxy
rm -rf "$tmp"

# Per-run prefix for namespaces, cgroups and directories: the pid lets the
# next run clean up after a killed one.
# shellcheck source=hack/lib/suite.sh
source hack/lib/suite.sh
prefix="$(suite_prefix spe2enode)"
kill_cgroups() { # glob of cgroup names
	local d p
	for d in /sys/fs/cgroup/pids/$1; do
		[[ -d $d ]] || continue
		for p in $(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
	done
	sleep 0.5
	for d in /sys/fs/cgroup/*/$1; do
		[[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
}
cleanup() {
	kill_cgroups "${prefix}*"
	suite_delete_netns "$prefix"
}
# Cgroups of killed runs (owner pid gone).
for d in /sys/fs/cgroup/pids/spe2enode-*; do
	[[ -d $d ]] || continue
	owner="${d##*/spe2enode-}"; owner="${owner%%-*}"
	kill -0 "$owner" 2>/dev/null || kill_cgroups "spe2enode-$owner-*"
done
# Work dirs (logs) of failed or killed runs are kept for an hour.
find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'spe2enode-*' -type d -mmin +60 -exec rm -rf {} + 2>/dev/null || true
go test -c -tags e2enode -o bin/e2enode.test ./test/e2enode/
args=(-test.v -test.count=1 -test.timeout=40m)
[[ -n ${E2ENODE_RUN:-} ]] && args+=(-test.run "$E2ENODE_RUN")
echo "e2e-node: k8s binaries $k8s, kubelet $nodebins, prefix $prefix, prepared in $((SECONDS - start))s" >&2
ls -l "$images" >&2
rc=0
suite_run cleanup env \
	E2ENODE_K8S_BINS="$k8s" \
	E2ENODE_NODE_BINS="$nodebins" \
	E2ENODE_IMAGES="$images" \
	E2ENODE_SVCPROXY_BIN="$root/bin/svcproxy" \
	E2ENODE_REPO="$root" \
	E2ENODE_PREFIX="$prefix" \
	bin/e2enode.test "${args[@]}" || rc=$?
echo "e2e-node: total $((SECONDS - start))s" >&2
exit "$rc"
