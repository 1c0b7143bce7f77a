#!/usr/bin/env bash
# make conformance: runs upstream's own [sig-network] e2e specs (e2e.test of
# k8s.io/kubernetes v1.37.2) on the node suite's cluster (test/e2enode,
# TestConformance) against each proxy in turn: svcproxy from `kubectl apply -k`,
# then kube-proxy's DaemonSet in iptables and in nftables mode. Writes
# docs/conformance.md (a row per spec, a column per proxy). Must run as root.
#
#   CONFORMANCE_PROXIES   space separated, default "svcproxy kube-proxy-iptables kube-proxy-nftables"
#   CONFORMANCE_FOCUS     --ginkgo.focus, default the specs docs/conformance.md names
#   CONFORMANCE_SKIP      --ginkgo.skip, default the specs it skips, with why
#   CONFORMANCE_REPORT    where the report goes, default docs/conformance.md ("" for none)
#   CONFORMANCE_PROCS     parallel ginkgo processes, default 4
#   CONFORMANCE_REPORTS   where each proxy's JUnit report and log go, default bin/conformance
#   CONFORMANCE_HOLD=FILE keeps the cluster after the last proxy until FILE exists
#   CONFORMANCE_DUALSTACK 1: a second run of the [Feature:IPv6DualStack] specs on the
#                         cluster built dual-stack; default 1 unless CONFORMANCE_FOCUS is set
#   CONFORMANCE_IF_CACHED=1  do nothing (and say so) unless e2e.test is cached:
#                         CI's choice, as a cold build of it alone takes ~50 min here
#
# Offline: e2e.test, agnhost, regression-issue-74839 and CoreDNS are built from
# pinned modules and cached (hack/build-conformance-bins.sh); upstream's test
# images are put together here from them and this machine's Debian tools.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=hack/lib/e2enode.sh
source hack/lib/e2enode.sh

if [[ -n ${CONFORMANCE_IF_CACHED:-} ]]; then
	# shellcheck source=hack/lib/k8s-build.sh
	source hack/lib/k8s-build.sh
	if [[ ! -x "$(k8s_cache_dir test/conformance/e2ebin svcproxy-conformance)/e2e.test" ]]; then
		echo "conformance: skipped: e2e.test is not cached (hack/build-conformance-bins.sh builds it; ~50 min cold on 2 cores)" >&2
		exit 0
	fi
fi
if [[ $(id -u) -ne 0 ]]; then
	echo "conformance: must run as root (network namespaces, cgroups, containerd)" >&2
	exit 1
fi
# The tools upstream's agnhost image carries (Alpine's bind-tools, curl,
# netcat-openbsd, iproute2, bash, socat), Debian's, and nginx's package to
# unpack (never installed: its service would start on this machine).
e2enode_packages nc.openbsd:netcat-openbsd dig:bind9-dnsutils socat:socat ping:iputils-ping \
	wget:wget curl:curl bash:bash conntrack:conntrack
e2enode_enter_mountns "$0" "$@"

start=$SECONDS
k8s="$(hack/build-k8s-bins.sh | tail -n1)"
nodebins="$(hack/build-kubelet.sh | tail -n1)"
bins="$(hack/build-conformance-bins.sh | tail -n2)"
e2ebins="$(head -n1 <<<"$bins")"
dnsbin="$(tail -n1 <<<"$bins")"
images="$root/bin/e2enode-images"
e2enode_images "$images" "$k8s"

# Upstream's test images (test/utils/image/manifest.go of v1.37.2), offline.
tmp="$(mktemp -d)"
path=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# The toolbox: every program of these Debian packages, with its libraries.
# /bin/sh is dash, as Alpine's is a POSIX shell that runs PATH's nc and wget.
toolbox=(-link /bin/sh:dash)
for pkg in dash bash coreutils grep sed mawk findutils hostname procps wget curl netcat-openbsd \
	iproute2 bind9-dnsutils socat iputils-ping; do
	while read -r f; do
		[[ -f $f && -x $f && ! -L $f ]] || continue
		[[ $(od -An -c -N4 "$f" | tr -d ' ') == '177ELF' ]] || continue
		toolbox+=(-bin "$f")
	done < <(dpkg -L "$pkg" | grep -E '^/(usr/)?s?bin/')
done
nc="$(dpkg -L netcat-openbsd | grep -E 'bin/nc.openbsd$')"
toolbox+=(-link "${nc%.openbsd}:nc.openbsd" -link /usr/bin/awk:mawk)
printf 'root:x:0:0:root:/root:/bin/sh\nuser-defined-in-image:x:1000:1000::/home:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$tmp/passwd"
printf 'root:x:0:\ngroup-defined-in-image:x:50000:user-defined-in-image\nnogroup:x:65534:\n' >"$tmp/group"
printf 'hosts: files dns\n' >"$tmp/nsswitch.conf"
toolbox+=(-file "$tmp/passwd:/etc/passwd" -file "$tmp/group:/etc/group" -file "$tmp/nsswitch.conf:/etc/nsswitch.conf"
	-file /etc/services:/etc/services -file /etc/protocols:/etc/protocols -dir /tmp)
bin/imagebuild -o "$images/agnhost.tar" -tag registry.k8s.io/e2e-test-images/agnhost:2.66.1 \
	-entrypoint /agnhost -cmd pause -env "$path" "${toolbox[@]}" \
	-file "$e2ebins/agnhost:/agnhost" -link /agnhost-2:agnhost -dir /uploads
bin/imagebuild -o "$images/busybox.tar" -tag registry.k8s.io/e2e-test-images/busybox:1.37.0-2 \
	-cmd sh -env "$path" "${toolbox[@]}"
# distroless-iptables (the KubeProxy spec's host exec pod): the toolbox with
# the conntrack tool and iptables-nft.
bin/imagebuild -o "$images/distroless-iptables.tar" -tag registry.k8s.io/build-image/distroless-iptables:v0.9.9 \
	-env "$path" "${toolbox[@]}" -bin /usr/sbin/conntrack -bin "$(readlink -f /usr/sbin/xtables-nft-multi)" \
	-link /usr/sbin/iptables:xtables-nft-multi -link /usr/sbin/ip6tables:xtables-nft-multi
bin/imagebuild -o "$images/regression-issue-74839.tar" -tag registry.k8s.io/e2e-test-images/regression-issue-74839:1.5 \
	-entrypoint /regression-issue-74839 -file "$e2ebins/regression-issue-74839:/regression-issue-74839"
bin/imagebuild -o "$images/pause-upstream.tar" -tag registry.k8s.io/pause:3.10.2 -entrypoint /pause -file bin/pause:/pause
# nginx: Debian's, unpacked from its package; it serves its default page on 80.
debs="${XDG_CACHE_HOME:-$HOME/.cache}/svcproxy-conformance/debs"
mkdir -p "$debs"
if ! ls "$debs"/nginx_*.deb >/dev/null 2>&1; then
	(cd "$debs" && { apt-get download nginx 2>/dev/null || { apt-get update -qq && apt-get download nginx; }; })
fi
dpkg -x "$(ls "$debs"/nginx_*.deb | head -n1)" "$tmp/nginx"
printf 'daemon off;\nerror_log stderr;\nevents {}\nhttp {\n  access_log off;\n  server { listen 80; location / { return 200 "nginx\\n"; } }\n}\n' >"$tmp/nginx.conf"
bin/imagebuild -o "$images/nginx.tar" -tag registry.k8s.io/e2e-test-images/nginx:1.27.0-2 \
	-entrypoint "/usr/sbin/nginx -c /etc/nginx/nginx.conf" -bin "$tmp/nginx/usr/sbin/nginx:/usr/sbin/nginx" \
	-file "$tmp/nginx.conf:/etc/nginx/nginx.conf" -file "$tmp/passwd:/etc/passwd" -file "$tmp/group:/etc/group" \
	-dir /var/lib/nginx -dir /var/log/nginx -dir /run -dir /tmp
bin/imagebuild -o "$images/coredns.tar" -tag svcproxy-e2enode/coredns:1 -entrypoint /coredns \
	-file "$dnsbin/coredns:/coredns"
rm -rf "$tmp"

e2enode_prepare_run
echo "conformance: k8s binaries $k8s, kubelet $nodebins, e2e.test $e2ebins, prefix $prefix, prepared in $((SECONDS - start))s" >&2
ls -l "$images" >&2
reports="${CONFORMANCE_REPORTS:-$root/bin/conformance}"
rm -rf "$reports"
rc=0
e2enode_run "$k8s" "$nodebins" "$images" \
	E2ENODE_WORKERS=3 \
	E2ENODE_CLUSTER_DNS=10.96.0.10 \
	CONFORMANCE_E2E_TEST="$e2ebins/e2e.test" \
	CONFORMANCE_REPORTS="$reports" \
	-- -test.v -test.count=1 -test.timeout=5h -test.run TestConformance || rc=$?
# The [Feature:IPv6DualStack] specs, on the same cluster built dual-stack: when
# the whole selection runs (no CONFORMANCE_FOCUS), or CONFORMANCE_DUALSTACK=1.
dual="${CONFORMANCE_DUALSTACK:-}"
if [[ -z $dual ]]; then
	dual=1
	[[ -z ${CONFORMANCE_FOCUS:-} ]] || dual=0
fi
if [[ $dual == 1 ]]; then
	e2enode_run "$k8s" "$nodebins" "$images" \
		E2ENODE_FAMILY=dual \
		E2ENODE_WORKERS=3 \
		E2ENODE_CLUSTER_DNS=10.96.0.10 \
		CONFORMANCE_E2E_TEST="$e2ebins/e2e.test" \
		CONFORMANCE_REPORTS="$reports" \
		-- -test.v -test.count=1 -test.timeout=5h -test.run TestConformance || rc=$?
fi
report="${CONFORMANCE_REPORT-docs/conformance.md}"
if [[ -n $report ]]; then
	go run ./test/conformance/report -reports "$reports" -o "$report" || rc=1
fi
echo "conformance: total $((SECONDS - start))s" >&2
exit "$rc"
