package nlkit

import "testing"

func TestCString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""}, {"svcproxy", "svcproxy"}, {"svc\x00proxy", "svc"}, {"\x00", ""}, {"name\x00", "name"},
	} {
		if got := CString([]byte(tc.in)); got != tc.want {
			t.Errorf("CString(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMsgNeedsHeader(t *testing.T) {
	for _, b := range [][]byte{nil, {1, 2, 3}} {
		if _, err := Msg(b); err == nil {
			t.Errorf("Msg(%v) decoded a message without its nfgenmsg header", b)
		}
	}
	// A header and one attribute: type 1, "ab".
	ad, err := Msg([]byte{2, 0, 0, 0, 6, 0, 1, 0, 'a', 'b', 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	if !ad.Next() || ad.Type() != 1 || CString(ad.Bytes()) != "ab" {
		t.Fatalf("attribute: type %d %q", ad.Type(), ad.Bytes())
	}
}
