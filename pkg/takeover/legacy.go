package takeover

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/svcproxy/svcproxy/internal/netns"
	"github.com/svcproxy/svcproxy/internal/nlkit"
)

// iptables-legacy (x_tables) cannot be edited over netlink, and rewriting its
// tables means replacing them whole through setsockopt, as iptables-legacy-restore
// does. svcproxy only reads them: which legacy tables exist (/proc/net/ip_tables_names
// lists those instantiated in this namespace; asking for another would create it),
// and which of kube-proxy's chains they hold (getsockopt IPT_SO_GET_ENTRIES, the read
// half of iptables-legacy-save). Then it says what to run.

// legacyChainRE matches every iptables-save line that declares, fills or jumps to a
// kube-proxy chain (isKubeProxyChain); kubelet's chains and everything else pass.
const legacyChainRE = `(^:|-[AIjg] )(KUBE-(SERVICES|EXTERNAL-SERVICES|NODEPORTS|POSTROUTING|MARK-MASQ|FORWARD|PROXY-FIREWALL|PROXY-CANARY|NODE-PORT|LOAD-BALANCER|SOURCE-RANGES-FIREWALL|IPVS-FILTER|IPVS-OUT-FILTER|FIRE-WALL|PORTALS-CONTAINER|PORTALS-HOST|NODEPORT-CONTAINER|NODEPORT-HOST)|KUBE-(SVC|SVL|EXT|FW|SEP|XLB)-[^ ]+)( |$)`

// legacyHint is what Report.LegacyHint says to run on the node: each legacy table
// rewritten without kube-proxy's chains and jumps, atomically per table.
const legacyHint = `iptables-legacy-save -c | grep -vE '` + legacyChainRE + `' | iptables-legacy-restore -c; ` +
	`ip6tables-legacy-save -c | grep -vE '` + legacyChainRE + `' | ip6tables-legacy-restore -c`

// legacyFamily describes x_tables of one family: the /proc list of its tables, the
// socket to ask, and where an entry's target_offset lies (ipt_entry, ip6t_entry).
type legacyFamily struct {
	name, tablesFile  string
	af, level         int
	targetOffsetField int
}

var legacyFamilies = []legacyFamily{
	{"ip", "ip_tables_names", unix.AF_INET, unix.IPPROTO_IP, 88},
	{"ip6", "ip6_tables_names", unix.AF_INET6, unix.IPPROTO_IPV6, 140},
}

const (
	soGetInfo    = 64 // IPT_SO_GET_INFO, IP6T_SO_GET_INFO
	soGetEntries = 65 // IPT_SO_GET_ENTRIES, IP6T_SO_GET_ENTRIES
	tableNameLen = 32 // XT_TABLE_MAXNAMELEN
	getInfoLen   = 84 // struct ipt_getinfo
	entriesHead  = 40 // struct ipt_get_entries up to entrytable (8-aligned)
)

// checkLegacy records kube-proxy's chains in iptables-legacy, and what to run, in r.
func checkLegacy(o Options, r *Report) error {
	if o.NetNSFd != 0 && o.NetNSPath == "" {
		return nil // the namespace is only known by descriptor: its /proc view is not reachable
	}
	var found []string
	read := func() error {
		var err error
		found, err = legacyKubeProxyChains()
		return err
	}
	var err error
	if o.NetNSPath != "" {
		err = netns.Do(o.NetNSPath, read)
	} else {
		err = read()
	}
	if err != nil {
		return fmt.Errorf("iptables-legacy: %w", err)
	}
	if len(found) > 0 {
		r.Legacy, r.LegacyHint = found, legacyHint
	}
	return nil
}

// legacyKubeProxyChains lists kube-proxy's chains in this thread's namespace's legacy
// tables, as "family table chain".
func legacyKubeProxyChains() ([]string, error) {
	var out []string
	for _, f := range legacyFamilies {
		b, err := os.ReadFile("/proc/thread-self/net/" + f.tablesFile)
		if errors.Is(err, fs.ErrNotExist) {
			continue // no x_tables for this family in the kernel
		}
		if err != nil {
			return nil, err
		}
		tables := strings.Fields(string(b))
		if len(tables) == 0 {
			continue
		}
		chains, err := legacyChains(f, tables)
		if err != nil {
			return nil, err
		}
		out = append(out, chains...)
	}
	sort.Strings(out)
	return out, nil
}

func legacyChains(f legacyFamily, tables []string) ([]string, error) {
	// Any IP socket reaches x_tables' getsockopt (iptables-legacy uses a raw one,
	// which would need CAP_NET_RAW; reading needs only CAP_NET_ADMIN, like the rest).
	fd, err := unix.Socket(f.af, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket for %s x_tables: %w", f.name, err)
	}
	defer unix.Close(fd)
	var out []string
	for _, table := range tables {
		if len(table) >= tableNameLen {
			continue
		}
		info := make([]byte, getInfoLen)
		copy(info, table)
		if err := getsockopt(fd, f.level, soGetInfo, info); err != nil {
			return nil, fmt.Errorf("%s table %s info: %w", f.name, table, err)
		}
		size := binary.NativeEndian.Uint32(info[80:84])
		entries := make([]byte, entriesHead+int(size))
		copy(entries, table)
		binary.NativeEndian.PutUint32(entries[tableNameLen:], size)
		if err := getsockopt(fd, f.level, soGetEntries, entries); err != nil {
			return nil, fmt.Errorf("%s table %s entries: %w", f.name, table, err)
		}
		for _, c := range legacyChainNames(entries[entriesHead:], f.targetOffsetField) {
			if isKubeProxyChain(c) {
				out = append(out, f.name+" "+table+" "+c)
			}
		}
	}
	return out, nil
}

func getsockopt(fd, level, opt int, buf []byte) error {
	l := uint32(len(buf))
	_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&l)), 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// legacyChainNames returns the user-defined chains of an x_tables entry blob: each
// starts with an entry whose target is ERROR and whose target data is the chain's
// name (the blob ends with one named ERROR). Every offset is checked against the blob.
func legacyChainNames(blob []byte, targetOffsetField int) []string {
	const targetHead = 32 // struct xt_entry_target: u16 size, name[29], u8 revision
	var out []string
	for off := 0; off+targetOffsetField+4 <= len(blob); {
		target := int(binary.NativeEndian.Uint16(blob[off+targetOffsetField:]))
		next := int(binary.NativeEndian.Uint16(blob[off+targetOffsetField+2:]))
		if next <= 0 || off+next > len(blob) {
			break
		}
		if target > 0 && target+targetHead < next {
			t := blob[off+target : off+next]
			if nlkit.CString(t[2:31]) == "ERROR" {
				if name := nlkit.CString(t[targetHead:min(len(t), targetHead+tableNameLen)]); name != "ERROR" && name != "" {
					out = append(out, name)
				}
			}
		}
		off += next
	}
	return out
}
