# shellcheck shell=bash
# Sourced by hack/build-k8s-bins.sh and hack/build-kubelet.sh: builds
# Kubernetes binaries from a pinned Go module (k8s.io/kubernetes and its
# staging replaces) into a cache keyed by the module's go.mod, go.sum and the
# Go version, so that only a change of one of them rebuilds (a CI cache under
# ~/.cache stays valid across clean clones).

k8s_version="v1.37.2"

# k8s_cache_dir MODULE_DIR CACHE_NAME prints the cache directory of that
# module's binaries: ${XDG_CACHE_HOME:-$HOME/.cache}/CACHE_NAME/<first 16 hex
# digits of sha256(go.mod, go.sum, go version)>.
k8s_cache_dir() {
	local key
	key="$( (cat "$1/go.mod" "$1/go.sum"; go version) | sha256sum | cut -c1-16)"
	echo "${XDG_CACHE_HOME:-$HOME/.cache}/$2/$key"
}

# k8s_build LABEL MODULE_DIR CACHE_NAME NAME=PACKAGE...
# Builds each NAME from PACKAGE (test:PACKAGE: its test binary, go test -c) with CGO_ENABLED=0 and the
# k8s.io/component-base/version ldflags (otherwise the binaries report a
# dummy version) into ${XDG_CACHE_HOME:-$HOME/.cache}/CACHE_NAME/<key>/,
# unless all are there already. Prints that directory on the last line of
# stdout; progress goes to stderr. BUILD_TAGS, when set, are go build's -tags.
k8s_build() {
	local label="$1" mod="$2" name="$3"
	shift 3
	local cache b
	cache="$(k8s_cache_dir "$mod" "$name")"

	local have=1
	for b in "$@"; do [[ -x "$cache/${b%%=*}" ]] || have=0; done
	if ((have)); then
		echo "$label cached in $cache" >&2
		echo "$cache"
		return 0
	fi

	mkdir -p "$cache"
	local tmp
	tmp="$(mktemp -d "$cache/.build.XXXXXX")"
	# shellcheck disable=SC2064 # expand now: tmp is local
	trap "rm -rf '$tmp'" EXIT

	local major minor pkg ldflags
	major="${k8s_version#v}"; major="${major%%.*}"
	minor="${k8s_version#v*.}"; minor="${minor%%.*}"
	pkg=k8s.io/component-base/version
	ldflags="-s -w -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
	ldflags+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000"

	(
		cd "$mod" || exit 1
		export CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false"
		start=$SECONDS
		go mod download
		for b in "$@"; do
			echo "building ${b%%=*} (${b#*=})" >&2
			case "${b#*=}" in
			# A test binary (e2e.test): vet over every dependency would double the build.
			test:*) go test -c -vet=off -trimpath -ldflags "$ldflags" -o "$tmp/${b%%=*}" "${b#*=test:}" ;;
			*) go build -trimpath -tags "${BUILD_TAGS:-}" -ldflags "$ldflags" -o "$tmp/${b%%=*}" "${b#*=}" ;;
			esac
		done
		for b in "$@"; do mv -f "$tmp/${b%%=*}" "$cache/${b%%=*}"; done
		echo "built $label in $((SECONDS - start))s into $cache" >&2
	)
	rm -rf "$tmp"
	trap - EXIT
	echo "$cache"
}
