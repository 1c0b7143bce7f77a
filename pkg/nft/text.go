package nft

import (
	"fmt"
	"sort"
	"strings"
)

// Text prints the ruleset as `nft list table` does, in canonical order: sets by name,
// then chains by name, elements sorted. (nft prints elements in the kernel's hash
// order; tests compare after sorting element lists, see NormalizeListing.)
func (r *Ruleset) Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table %s %s {\n", r.Family, r.Table)
	byset := map[string][]Element{}
	for _, e := range r.Elements() {
		byset[e.Set] = append(byset[e.Set], e)
	}
	var blocks []string
	present := r.PresentSets()
	for _, name := range sortedKeys(present) {
		blocks = append(blocks, setText(present[name], byset[name]))
	}
	for _, name := range sortedKeys(r.Chains) {
		blocks = append(blocks, chainText(r.Chains[name]))
	}
	b.WriteString(strings.Join(blocks, "\n"))
	b.WriteString("}\n")
	return b.String()
}

func setText(s *Set, elems []Element) string {
	var b strings.Builder
	kind := "set"
	if s.IsMap() {
		kind = "map"
	}
	fmt.Fprintf(&b, "\t%s %s {\n", kind, s.Name)
	if len(s.KeyExpr) > 0 {
		fmt.Fprintf(&b, "\t\ttypeof %s", joinOperands(s.KeyExpr))
	} else {
		fmt.Fprintf(&b, "\t\ttype %s", typesText(s.Key))
	}
	switch {
	case s.Verdict:
		b.WriteString(" : verdict")
	case len(s.DataExpr) > 0:
		b.WriteString(" : " + joinOperands(s.DataExpr))
	case len(s.Data) > 0:
		b.WriteString(" : " + typesText(s.Data))
	}
	b.WriteString("\n")
	if s.Size > 0 {
		fmt.Fprintf(&b, "\t\tsize %d\n", s.Size)
	}
	var flags []string
	if s.Dynamic {
		flags = append(flags, "dynamic")
	}
	if s.Timeout {
		flags = append(flags, "timeout")
	}
	if len(flags) > 0 {
		fmt.Fprintf(&b, "\t\tflags %s\n", strings.Join(flags, ","))
	}
	if len(elems) > 0 && !s.Dynamic {
		texts := make([]string, len(elems))
		for i, e := range elems {
			texts[i] = e.String()
		}
		sort.Strings(texts)
		fmt.Fprintf(&b, "\t\telements = { %s }\n", strings.Join(texts, ",\n\t\t\t     "))
	}
	b.WriteString("\t}\n")
	return b.String()
}

// String prints the element as nft prints it inside an elements list.
func (e Element) String() string {
	s := joinData(e.Key)
	if e.Timeout > 0 {
		s += " timeout " + formatDuration(e.Timeout)
	}
	if e.Comment != "" {
		s += ` comment "` + limitComment(e.Comment) + `"`
	}
	switch {
	case e.Verdict != nil:
		s += " : " + e.Verdict.String()
	case len(e.Data) > 0:
		s += " : " + joinData(e.Data)
	}
	return s
}

func chainText(c *Chain) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\tchain %s {\n", c.Name)
	if c.Hook != nil {
		fmt.Fprintf(&b, "\t\ttype %s hook %s priority %s; policy accept;\n", c.Hook.Type, c.Hook.Hook, priorityText(c.Hook.Hook, c.Hook.Priority))
	}
	for _, r := range c.Rules {
		fmt.Fprintf(&b, "\t\t%s\n", r)
	}
	b.WriteString("\t}\n")
	return b.String()
}

func typesText(ts []DataType) string {
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.String()
	}
	return strings.Join(parts, " . ")
}

// priorityText prints standard priorities by name as nft does: "dstnat" only in
// prerouting, "srcnat" only in postrouting, "filter" anywhere.
func priorityText(hook string, p int32) string {
	names := []struct {
		v    int32
		name string
		hook string
	}{{-100, "dstnat", "prerouting"}, {0, "filter", ""}, {100, "srcnat", "postrouting"}}
	for _, n := range names {
		if n.hook != "" && n.hook != hook {
			continue
		}
		switch {
		case p == n.v:
			return n.name
		case p > n.v-10 && p < n.v:
			return fmt.Sprintf("%s - %d", n.name, n.v-p)
		case p < n.v+10 && p > n.v:
			return fmt.Sprintf("%s + %d", n.name, p-n.v)
		}
	}
	return fmt.Sprint(p)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// NormalizeListing puts a `nft list table` text in canonical order so that it can be
// compared with Text: blocks (sets, chains) sorted by name, element lists sorted, and
// the elements of dynamic sets left out (the kernel's traffic state, which Text
// never prints).
func NormalizeListing(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) < 2 {
		return s
	}
	head, body := lines[0], lines[1:len(lines)-1]
	var blocks []string
	var cur []string
	for _, l := range body {
		if l == "" {
			continue
		}
		cur = append(cur, l)
		if l == "\t}" {
			blocks = append(blocks, normalizeBlock(cur))
			cur = nil
		}
	}
	sort.Slice(blocks, func(i, j int) bool { return blockKey(blocks[i]) < blockKey(blocks[j]) })
	return head + "\n" + strings.Join(blocks, "\n") + "}\n"
}

func blockKey(b string) string {
	first := strings.SplitN(strings.TrimSpace(b), "\n", 2)[0]
	f := strings.Fields(first)
	kind := "0"
	if f[0] == "chain" {
		kind = "1"
	}
	return kind + " " + f[1]
}

// normalizeBlock joins a multi-line elements list into one sorted list, or drops it
// in a dynamic set.
func normalizeBlock(lines []string) string {
	dynamic := false
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "flags" && strings.Contains(","+f[1]+",", ",dynamic,") {
			dynamic = true
		}
	}
	var out []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if !strings.HasPrefix(strings.TrimSpace(l), "elements = {") {
			out = append(out, l)
			continue
		}
		joined := strings.TrimSpace(l)
		for !strings.HasSuffix(joined, "}") && i+1 < len(lines) {
			i++
			joined += " " + strings.TrimSpace(lines[i])
		}
		inner := strings.TrimSuffix(strings.TrimPrefix(joined, "elements = {"), "}")
		var elems []string
		for _, e := range strings.Split(inner, ",") {
			if e = strings.TrimSpace(e); e != "" {
				elems = append(elems, e)
			}
		}
		if dynamic {
			continue
		}
		sort.Strings(elems)
		out = append(out, "\t\telements = { "+strings.Join(elems, ",\n\t\t\t     ")+" }")
	}
	return strings.Join(out, "\n") + "\n"
}
