package nft

import (
	"encoding/binary"
	"strings"
	"sync"
	"sync/atomic"
)

// An element ID starts with its set's code, not its name: a number the process
// gives each set name the first time it sees it (uvarint: one byte for the first
// 128 names). "endpoints-07\x00" in each of 300k IDs was 4 MiB of the desired
// ruleset at 30k Services, and every ID is hashed and compared. Codes are the
// same for every ruleset and view of the process, so IDs from either match.

// setCodes is the registry: an immutable snapshot read without a lock, replaced
// under mu when a name is added.
var setCodes struct {
	mu  sync.Mutex
	cur atomic.Pointer[setCodeTable]
}

type setCodeTable struct {
	byName map[string]uint64
	names  []string
}

// setCode returns the code of the set name, giving it one if it has none.
func setCode(name string) uint64 {
	if t := setCodes.cur.Load(); t != nil {
		if c, ok := t.byName[name]; ok {
			return c
		}
	}
	setCodes.mu.Lock()
	defer setCodes.mu.Unlock()
	old := setCodes.cur.Load()
	next := &setCodeTable{byName: map[string]uint64{}}
	if old != nil {
		if c, ok := old.byName[name]; ok {
			return c
		}
		for n, c := range old.byName {
			next.byName[n] = c
		}
		next.names = old.names
	}
	c := uint64(len(next.names))
	next.byName[name] = c
	next.names = append(next.names[:len(next.names):len(next.names)], name)
	setCodes.cur.Store(next)
	return c
}

// setName is the name whose code is c ("" for none).
func setName(c uint64) string {
	if t := setCodes.cur.Load(); t != nil && c < uint64(len(t.names)) {
		return t.names[c]
	}
	return ""
}

// idPrefix is how the IDs of the set's elements start.
func idPrefix(set string) string {
	return string(binary.AppendUvarint(nil, setCode(set)))
}

// writeIDPrefix writes idPrefix(set) to b.
func writeIDPrefix(b *strings.Builder, set string) { writeUvarint(b, setCode(set)) }

// idPrefixLen is len(idPrefix(set)).
func idPrefixLen(set string) int { return uvarintLen(setCode(set)) }

// splitID returns the set name and the key bytes of an element ID.
func splitID(id string) (set, key string) {
	if id == "" {
		return "", ""
	}
	c, n := uvarintOf(id)
	return setName(c), id[n:]
}

// elementID is the ID of the element of set whose key bytes are key.
func elementID(set string, key []byte) string { return idPrefix(set) + string(key) }
