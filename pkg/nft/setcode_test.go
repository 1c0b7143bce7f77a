package nft

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestElementIDsBySetCode: an ID splits back into its set and key, whatever the
// number of set names the process has seen, concurrently, and no set's IDs start
// with another set's prefix (the deletion of a set walks IDs by prefix).
func TestElementIDsBySetCode(t *testing.T) {
	var wg sync.WaitGroup
	names := make([]string, 300) // codes past one uvarint byte
	for i := range names {
		names[i] = fmt.Sprintf("set-code-test-%d", i)
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				setCode(names[(i*7+w)%len(names)])
			}
		}()
	}
	wg.Wait()
	for _, name := range names {
		e := Element{Set: name, Key: []Datum{Port(443)}}
		set, key := splitID(e.ID())
		if set != name || key != string(concatBytes(e.Key)) {
			t.Fatalf("%s: ID splits into %q/%q", name, set, key)
		}
		for _, other := range names {
			if other != name && strings.HasPrefix(e.ID(), idPrefix(other)) {
				t.Fatalf("an ID of %s starts with %s's prefix", name, other)
			}
		}
	}
}
