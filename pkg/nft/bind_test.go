package nft

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// FuzzBoundView drives two rulesets through the same fragments, one planning
// against a view bound to it (the hashes in its entries), the other against a view
// of its own, and requires the same transactions and the same kernel content:
// binding is a memory layout, never a change in what is planned. Contested
// elements, owners leaving, refused transactions, per-owner plans and full
// re-reads of the kernel (a new view bound) are drawn from the input.
func FuzzBoundView(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	f.Add([]byte{5, 5, 5, 1, 1, 1, 9, 9, 9, 2, 2, 2, 7, 7, 7, 3, 3, 3, 0, 0, 0, 4, 4, 4})
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &kernelDraw{b: data}
		bound, plain := newTestRuleset(), newTestRuleset()
		kb, kp := NewFake(), NewFake()
		vb, vp := NewView(), NewView()
		bound.Bind(vb)
		ctx := context.Background()
		for step := 0; len(d.b) > 0 && step < 32; step++ {
			owner := fmt.Sprint("o", d.pick(4))
			var frag Fragment
			if d.pick(5) != 0 {
				var eps []string
				for i, n := 0, d.pick(4); i < n; i++ {
					eps = append(eps, fmt.Sprintf("10.244.0.%d", d.pick(6)))
				}
				// Few cluster IPs, so owners contest elements.
				frag = svcFragment("svc-"+owner, fmt.Sprintf("10.96.0.%d", d.pick(3)), eps...)
			}
			bound.SetFragment(owner, frag)
			plain.SetFragment(owner, frag)

			var txb, txp *Tx
			switch d.pick(4) {
			case 0: // a resync: read the kernel again
				var err error
				if vb, err = kb.Read(ctx, FamilyIPv4, "t"); err != nil {
					t.Fatal(err)
				}
				if vp, err = kp.Read(ctx, FamilyIPv4, "t"); err != nil {
					t.Fatal(err)
				}
				bound.Bind(vb)
				txb, txp = PlanFull(bound, vb), PlanFull(plain, vp)
			case 1:
				txb, txp = PlanOwners(bound, vb, owner), PlanOwners(plain, vp, owner)
			default:
				txb, txp = Plan(bound, vb), Plan(plain, vp)
			}
			if got, want := txText(txb), txText(txp); got != want {
				t.Fatalf("step %d: bound view plans\n%s\nunbound plans\n%s", step, got, want)
			}
			// The kernel refuses what the draw says, or what it must (a per-owner
			// plan may name another owner's chain not created yet); both sides alike.
			refused := d.pick(6) == 0
			if !refused {
				errb, errp := kb.Apply(ctx, txb), kp.Apply(ctx, txp)
				if (errb == nil) != (errp == nil) {
					t.Fatalf("step %d: kernel answers differ: %v, %v", step, errb, errp)
				}
				refused = errb != nil
			}
			if refused {
				bound.Requeue(txb)
				plain.Requeue(txp)
				continue
			}
			vb.Commit(txb)
			vp.Commit(txp)
			if got, want := boundHashes(vb), boundHashes(vp); !slices.Equal(got, want) {
				t.Fatalf("step %d: bound view records\n%v\nunbound\n%v", step, got, want)
			}
		}
		final := PlanFull(bound, vb)
		if err := kb.Apply(ctx, final); err != nil {
			t.Fatal(err)
		}
		vb.Commit(final)
		if got, want := kb.Ruleset(FamilyIPv4, "t").Text(), bound.Text(); got != want {
			t.Fatalf("kernel holds\n%s\nwant\n%s", got, want)
		}
		// Once everything is committed, the bound view's own map holds nothing the
		// ruleset holds.
		for id := range vb.Elements {
			if bound.elements.has(id) {
				t.Fatalf("bound view's map keeps %q, which the ruleset holds", id)
			}
		}
	})
}

// boundHashes lists what a view records of the kernel's elements, sorted.
func boundHashes(v *View) []string {
	var out []string
	for id, h := range v.Elements {
		out = append(out, fmt.Sprintf("%q=%x", id, h))
	}
	if v.bound != nil {
		for id, e := range v.bound.elements.all() {
			if e.inKernel() {
				out = append(out, fmt.Sprintf("%q=%x", id, e.kernel))
			}
		}
	}
	slices.Sort(out)
	return out
}

// txText is a transaction's content, for comparing plans.
func txText(tx *Tx) string {
	s := fmt.Sprintf("recreate=%v sets=%d newChains=%d delChains=%v delSets=%v\n", tx.Recreate, len(tx.AddSets), len(tx.NewChains), tx.DelChains, tx.DelSets)
	for _, c := range tx.Chains {
		s += "chain " + c.Name + "\n"
	}
	for _, e := range tx.DelElements {
		s += "del " + e.String() + " " + e.Set + "\n"
	}
	for _, e := range tx.Added() {
		s += "add " + e.String() + " " + e.Set + "\n"
	}
	return s
}

// TestBindFreesTheViewsMap: after a full read is bound, the view's own map holds
// only the kernel's elements no owner holds.
func TestBindFreesTheViewsMap(t *testing.T) {
	r := newTestRuleset()
	r.SetFragment("a", svcFragment("svc-a", "10.96.0.1", "10.244.1.1", "10.244.1.2"))
	k := NewFake()
	v := NewView()
	tx := PlanFull(r, v)
	if err := k.Apply(t.Context(), tx); err != nil {
		t.Fatal(err)
	}
	stale := Element{Set: "ips", Key: []Datum{ip("10.96.9.9")}}
	if err := k.Apply(t.Context(), &Tx{Family: FamilyIPv4, Table: "t", AddElements: []Element{stale}}); err != nil {
		t.Fatal(err)
	}
	read, err := k.Read(t.Context(), FamilyIPv4, "t")
	if err != nil {
		t.Fatal(err)
	}
	all := len(boundHashes(read))
	r.Bind(read)
	if len(read.Elements) != 1 || len(boundHashes(read)) != all {
		t.Fatalf("bound view: %d in its map (want the 1 stale), %d in all (want %d)", len(read.Elements), len(boundHashes(read)), all)
	}
	tx = PlanFull(r, read)
	if len(tx.DelElements) != 1 || tx.DelElements[0].ID() != stale.ID() || len(tx.Added()) != 0 {
		t.Fatalf("full plan against the bound view: del %v add %v, want only the stale element deleted", tx.DelElements, tx.Added())
	}
	// Binding another view gives the first its hashes back.
	r.Bind(NewView())
	if len(boundHashes(read)) != all || len(read.Elements) != all {
		t.Fatalf("unbound view has %d elements, want %d", len(read.Elements), all)
	}
}
