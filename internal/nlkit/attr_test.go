package nlkit

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/mdlayher/netlink"
)

type walked struct {
	Type uint16
	Off  int
	Val  []byte
}

func TestAttrs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      []byte
		want    []walked
		err     error // Attrs.Err
		walkErr error // WalkAttrs
	}{
		{name: "empty"},
		{name: "one, padded", in: []byte{6, 0, 1, 0, 'a', 'b', 0, 0},
			want: []walked{{1, 0, []byte("ab")}}},
		{name: "two, flags cleared", in: []byte{5, 0, 2, 0x80, 7, 0, 0, 0, 8, 0, 3, 0x40, 1, 2, 3, 4},
			want: []walked{{2, 0, []byte{7}}, {3, 8, []byte{1, 2, 3, 4}}}},
		{name: "empty value", in: []byte{4, 0, 9, 0},
			want: []walked{{9, 0, []byte{}}}},
		{name: "last one unpadded", in: []byte{4, 0, 1, 0, 5, 0, 2, 0, 'x'},
			want: []walked{{1, 0, []byte{}}, {2, 4, []byte("x")}}},
		{name: "trailing bytes", in: []byte{4, 0, 1, 0, 0, 0},
			want: []walked{{1, 0, []byte{}}}, err: ErrTrailing},
		{name: "length under a header", in: []byte{3, 0, 1, 0},
			err: ErrTruncated, walkErr: ErrTruncated},
		{name: "runs past the end", in: []byte{4, 0, 1, 0, 12, 0, 2, 0, 1, 2, 3, 4},
			want: []walked{{1, 0, []byte{}}}, err: ErrTruncated, walkErr: ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []walked
			a := Attrs{B: tc.in}
			for a.Next() {
				got = append(got, walked{a.Type, a.Off, a.Val})
			}
			if a.Err != tc.err {
				t.Errorf("Attrs.Err = %v, want %v", a.Err, tc.err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Attrs (-want +got):\n%s", diff)
			}
			var walkedAttrs []walked
			err := WalkAttrs(tc.in, func(typ uint16, off int, v []byte) { walkedAttrs = append(walkedAttrs, walked{typ, off, v}) })
			if err != tc.walkErr {
				t.Errorf("WalkAttrs = %v, want %v", err, tc.walkErr)
			}
			if diff := cmp.Diff(tc.want, walkedAttrs); diff != "" {
				t.Errorf("WalkAttrs (-want +got):\n%s", diff)
			}
		})
	}
}

// The encoders write what the netlink package marshals, after whatever the
// buffer already holds.
func TestEncodersAsTheNetlinkPackage(t *testing.T) {
	for _, tc := range []struct {
		name   string
		encode func(b []byte) []byte
		want   func(ae *netlink.AttributeEncoder)
	}{
		{"bytes", func(b []byte) []byte { return AppendAttr(b, 1, []byte{1, 2, 3}) },
			func(ae *netlink.AttributeEncoder) { ae.Bytes(1, []byte{1, 2, 3}) }},
		{"aligned bytes", func(b []byte) []byte { return AppendAttr(b, 2, []byte{1, 2, 3, 4}) },
			func(ae *netlink.AttributeEncoder) { ae.Bytes(2, []byte{1, 2, 3, 4}) }},
		{"empty", func(b []byte) []byte { return AppendAttr(b, 3, nil) },
			func(ae *netlink.AttributeEncoder) { ae.Bytes(3, nil) }},
		{"string", func(b []byte) []byte { return AppendStringAttr(b, 4, "svcproxy") },
			func(ae *netlink.AttributeEncoder) { ae.String(4, "svcproxy") }},
		{"nested", func(b []byte) []byte {
			b, outer := BeginNested(b, 5|netlink.Nested)
			b = AppendAttr(b, 1, []byte{9})
			b, inner := BeginNested(b, 2|netlink.Nested)
			b = AppendStringAttr(b, 1, "ab")
			EndNested(b, inner)
			EndNested(b, outer)
			return AppendAttr(b, 6, []byte{1, 2})
		}, func(ae *netlink.AttributeEncoder) {
			ae.Nested(5, func(n *netlink.AttributeEncoder) error {
				n.Bytes(1, []byte{9})
				n.Nested(2, func(m *netlink.AttributeEncoder) error { m.String(1, "ab"); return nil })
				return nil
			})
			ae.Bytes(6, []byte{1, 2})
		}},
	} {
		for _, prefix := range [][]byte{nil, {0xaa}, {0xaa, 0xbb, 0xcc, 0xdd, 0xee}} {
			ae := netlink.NewAttributeEncoder()
			tc.want(ae)
			want, err := ae.Encode()
			if err != nil {
				t.Fatal(err)
			}
			got := tc.encode(append([]byte(nil), prefix...))
			if !bytes.HasPrefix(got, prefix) {
				t.Fatalf("%s: overwrote the prefix", tc.name)
			}
			if diff := cmp.Diff(want, got[len(prefix):]); diff != "" {
				t.Errorf("%s after %d bytes (-netlink +nlkit):\n%s", tc.name, len(prefix), diff)
			}
		}
	}
}

func TestAttrLen(t *testing.T) {
	for n, want := range map[int]int{0: 4, 1: 8, 3: 8, 4: 8, 5: 12, 16: 20} {
		if got := AttrLen(n); got != want || len(AppendAttr(nil, 1, make([]byte, n))) != want {
			t.Errorf("AttrLen(%d) = %d, want %d", n, got, want)
		}
	}
}

func TestGenl(t *testing.T) {
	if _, err := Genl([]byte{1, 2}); err == nil {
		t.Fatal("decoded a message without its genlmsghdr")
	}
	// Host byte order, unlike Msg: a u16 of 0x0102.
	ad, err := Genl(append([]byte{4, 1, 0, 0}, AppendAttr(nil, 1, []byte{2, 1})...))
	if err != nil {
		t.Fatal(err)
	}
	if !ad.Next() || ad.Type() != 1 || ad.Uint16() != 0x0102 {
		t.Fatalf("attribute %d = %#x", ad.Type(), ad.Bytes())
	}
}

func TestErrorsAreDistinct(t *testing.T) {
	if errors.Is(ErrTrailing, ErrTruncated) {
		t.Fatal("trailing bytes and a truncated attribute must be told apart")
	}
}
