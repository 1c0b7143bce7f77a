package main

import (
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

func procStatusMiB(field string) float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field) {
			f := strings.Fields(l)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// heapMiB is the Go heap in use after a collection: what the process keeps.
func heapMiB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}

// scanMiB is the part of the heap that holds pointers, as of the last
// collection: what every collection marks (heapMiB runs one first).
func scanMiB() float64 {
	s := []metrics.Sample{{Name: "/gc/scan/heap:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return float64(s[0].Value.Uint64()) / (1 << 20)
}

// cpuTime is the user and system CPU this process used so far (the kernel's work
// on our netlink transactions is system time of ours).
func cpuTime() time.Duration {
	user, sys := cpuTimes()
	return user + sys
}

// sysTime is the process's CPU time so far in the kernel: in a sync, mostly
// nftables validating and inserting what the proxy sent.
func sysTime() time.Duration {
	_, sys := cpuTimes()
	return sys
}

func cpuTimes() (user, sys time.Duration) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// loadAvg is the machine's 1-minute load average.
func loadAvg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
