# shellcheck shell=bash
# Sourced by hack/e2e-node.sh and hack/conformance.sh: what both need to run
# the node suite (test/e2enode) on this machine. Expects $root (the
# repository) and the working directory there.

# e2enode_packages [PATH:PACKAGE...] installs, idempotently, the packages the
# node suite needs, and any given: containerd and runc (the CRI runtime),
# containernetworking-plugins (bridge, host-local, portmap), util-linux
# (nsenter, unshare), iproute2, the iptables and nftables tools (the
# kube-proxy image carries this machine's iptables and nft; the checks read
# rulesets), procps (sysctl). A PATH starting with / is a file, else a command.
e2enode_packages() {
	local missing=() pair tool
	for pair in containerd:containerd runc:runc /usr/lib/cni/bridge:containernetworking-plugins \
		nsenter:util-linux ip:iproute2 iptables:iptables nft:nftables sysctl:procps "$@"; do
		tool="${pair%%:*}"
		if [[ $tool == /* ]]; then [[ -e $tool ]] && continue; else command -v "$tool" >/dev/null 2>&1 && continue; fi
		missing+=("${pair#*:}")
	done
	((${#missing[@]})) || return 0
	echo "e2e-node: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
		{ apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }
}

# e2enode_enter_mountns SCRIPT ARGS... re-executes SCRIPT in a private mount
# namespace (once), then mounts tmpfs over /var/log (kubelet's pod log links)
# and /var/lib/cni (libcni's cache): the mounts containerd and kubelet make
# never appear in the machine's.
e2enode_enter_mountns() {
	if [[ -z ${E2ENODE_IN_MOUNTNS:-} ]]; then
		mkdir -p /var/lib/cni
		exec unshare --mount --propagation private -- env E2ENODE_IN_MOUNTNS=1 "$@"
	fi
	mount -t tmpfs e2enode-varlog /var/log
	mount -t tmpfs e2enode-cni /var/lib/cni
}

# e2enode_images DIR K8S_BINS builds the suite's images as OCI archives
# (docker-save layout, for `ctr images import`) into DIR: pause, the echo
# server, svcproxy's (hack/image) and kube-proxy's. Leaves bin/imagebuild,
# bin/pause (for more images) and bin/svcproxy (the suite's own cleanup
# between phases) behind.
e2enode_images() {
	local images="$1" k8s="$2" tmp
	rm -rf "$images"
	mkdir -p "$images" bin
	tmp="$(mktemp -d)"
	CGO_ENABLED=0 go build -o bin/imagebuild ./test/e2enode/imagebuild
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o bin/pause ./test/e2enode/pause
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/echoserver" ./hack/echoserver
	bin/imagebuild -o "$images/pause.tar" -tag svcproxy-e2enode/pause:1 -entrypoint /pause -file bin/pause:/pause
	bin/imagebuild -o "$images/echoserver.tar" -tag svcproxy-e2enode/echoserver:1 -entrypoint /echoserver \
		-file "$tmp/echoserver:/echoserver"
	CGO_ENABLED=0 go run ./hack/image -o "$images/svcproxy.tar" -tag svcproxy:dev
	# kube-proxy's image: the cached kube-proxy binary; for its iptables mode,
	# this machine's iptables-nft with the extensions it loads (what upstream's
	# distroless-iptables base carries); for its nftables mode, nft (knftables
	# runs it). -bin adds the libraries each needs.
	local kp=(-file "$k8s/kube-proxy:/usr/local/bin/kube-proxy" -bin "$(readlink -f /usr/sbin/xtables-nft-multi)"
		-bin /usr/sbin/nft) f n
	for f in /usr/lib/x86_64-linux-gnu/xtables/*.so; do kp+=(-bin "$f"); done
	for n in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore \
		iptables-nft iptables-nft-save iptables-nft-restore ip6tables-nft ip6tables-nft-save ip6tables-nft-restore; do
		kp+=(-link "/usr/sbin/$n:xtables-nft-multi")
	done
	kp+=(-file /etc/protocols:/etc/protocols -file /etc/services:/etc/services)
	bin/imagebuild -o "$images/kube-proxy.tar" -tag registry.k8s.io/kube-proxy:v1.37.2 \
		-entrypoint /usr/local/bin/kube-proxy -env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "${kp[@]}"
	go build -ldflags "$(hack/version-ldflags.sh)" -o bin/svcproxy ./cmd/svcproxy
	rm -rf "$tmp"
}

# e2enode_kill_cgroups GLOB kills the processes of, and removes, the cgroups
# named GLOB.
e2enode_kill_cgroups() {
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

# e2enode_prepare_run sets $prefix (per run: namespaces, cgroups, directories;
# the pid lets the next run clean up after a killed one), defines
# e2enode_cleanup, cleans up after killed runs and builds bin/e2enode.test.
e2enode_prepare_run() {
	# shellcheck source=hack/lib/suite.sh
	source hack/lib/suite.sh
	prefix="$(suite_prefix spe2enode)"
	local d owner
	for d in /sys/fs/cgroup/pids/spe2enode-*; do
		[[ -d $d ]] || continue
		owner="${d##*/spe2enode-}"
		owner="${owner%%-*}"
		kill -0 "$owner" 2>/dev/null || e2enode_kill_cgroups "spe2enode-$owner-*"
	done
	# Work dirs (logs) of failed or killed runs are kept for an hour.
	find "${TMPDIR:-/tmp}" -maxdepth 1 -name 'spe2enode-*' -type d -mmin +60 -exec rm -rf {} + 2>/dev/null || true
	go test -c -tags e2enode -o bin/e2enode.test ./test/e2enode/
}

e2enode_cleanup() {
	e2enode_kill_cgroups "${prefix}*"
	suite_delete_netns "$prefix"
}

# e2enode_run K8S_BINS NODE_BINS IMAGES [NAME=VALUE...] -- TEST_ARGS... runs
# bin/e2enode.test (after e2enode_prepare_run) with the suite's environment
# and the given variables, through suite_run, and returns its status.
e2enode_run() {
	local k8s="$1" nodebins="$2" images="$3" vars=()
	shift 3
	while [[ $# -gt 0 && $1 != -- ]]; do
		vars+=("$1")
		shift
	done
	shift
	suite_run e2enode_cleanup env \
		E2ENODE_K8S_BINS="$k8s" \
		E2ENODE_NODE_BINS="$nodebins" \
		E2ENODE_IMAGES="$images" \
		E2ENODE_SVCPROXY_BIN="$root/bin/svcproxy" \
		E2ENODE_REPO="$root" \
		E2ENODE_PREFIX="$prefix" \
		"${vars[@]}" bin/e2enode.test "$@"
}
