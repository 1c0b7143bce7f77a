# shellcheck shell=bash
# Sourced by hack/e2e.sh, hack/e2e-node.sh and hack/bench.sh: the per-run
# namespace prefix, the removal of a run's namespaces, and running a compiled
# suite so that a signal reaches the process that tears its cluster down.

# suite_prefix NAME prints a per-run prefix NAME-<pid>-<random>- for
# namespaces (and cgroups): the pid lets a later run clean up after a killed
# one.
suite_prefix() {
	echo "$1-$$-$(od -An -N2 -tx2 /dev/urandom | tr -d ' ')-"
}

# suite_delete_netns PREFIX kills the processes in, and deletes, every
# network namespace whose name starts with PREFIX (and no other).
suite_delete_netns() {
	local n p
	for n in $(ls /run/netns 2>/dev/null | grep "^$1" || true); do
		for p in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
		ip netns del "$n" 2>/dev/null || true
	done
}

suite_pid=""
suite_cleanup=""
suite_on_signal() {
	[[ -n $suite_pid ]] && kill -TERM "$suite_pid" 2>/dev/null && wait "$suite_pid" || true
	"$suite_cleanup"
	exit 130
}

# suite_run CLEANUP COMMAND...: runs COMMAND (a compiled test binary, not
# `go test`, possibly behind env) in the background and returns its exit
# status. CLEANUP runs when the script exits; INT, TERM and HUP are passed to
# the binary (which tears its cluster down), then CLEANUP runs.
suite_run() {
	suite_cleanup="$1"
	shift
	trap "$suite_cleanup" EXIT
	trap suite_on_signal INT TERM HUP
	"$@" &
	suite_pid=$!
	local rc=0
	wait "$suite_pid" || rc=$?
	suite_pid=""
	return "$rc"
}
