package ib

import (
	"encoding/binary"
	"strings"
	"testing"
)

// slotWith is a receive slot holding a header of kind with length ln and
// payload bytes after it.
func slotWith(kind byte, ln uint64, payload int) ([]byte, int) {
	s := make([]byte, hdrLen+4096)
	s[0] = kind
	binary.LittleEndian.PutUint32(s[4:], 7)
	binary.LittleEndian.PutUint64(s[8:], ln)
	return s, hdrLen + payload
}

// A peer's header is checked before it is trusted: every length a peer
// can lie about is refused with an error that names it.
func TestParseHeader(t *testing.T) {
	for _, tc := range []struct {
		name    string
		kind    byte
		ln      uint64
		payload int
		n       int // the completion's length when not header plus payload
		error   string
	}{
		{"eager", kEager, 100, 100, 0, ""},
		{"eager of nothing", kEager, 0, 0, 0, ""},
		{"eager shorter than it says", kEager, 100, 50, 0, "eager message 7 of 100 bytes in a 82-byte completion"},
		{"eager over the limit", kEager, 2048, 2048, 0, "ib.eager=1024"},
		{"a request to send", kRTS, 1 << 40, 0, 0, ""},
		{"a length that is no int", kRTS, 1 << 63, 0, 0, "claims 9223372036854775808 bytes"},
		{"a completion shorter than a header", kCTS, 10, 0, 8, "8-byte message"},
		{"a completion longer than its slot", kCTS, 10, 0, hdrLen + 8192, "slot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, n := slotWith(tc.kind, tc.ln, tc.payload)
			if tc.n != 0 {
				n = tc.n
			}
			h, err := parseHeader(s, n, 1024)
			switch {
			case tc.error == "" && err != nil:
				t.Fatalf("a legal header failed: %v", err)
			case tc.error == "" && (h.kind != tc.kind || h.seq != 7 || uint64(h.len) != tc.ln):
				t.Fatalf("header %+v, want kind %d, seq 7, len %d", h, tc.kind, tc.ln)
			case tc.error != "" && (err == nil || !strings.Contains(err.Error(), tc.error)):
				t.Fatalf("err = %v, want one that says %q", err, tc.error)
			}
		})
	}
}

// Whatever a slot holds and whatever length its completion reports,
// parseHeader returns a header whose eager payload lies inside the slot,
// or an error.
func FuzzParseHeader(f *testing.F) {
	for _, seed := range []struct {
		kind    byte
		ln      uint64
		payload int
	}{{kEager, 100, 100}, {kRTS, 1 << 63, 0}, {kCTS, 5, 0}, {kEager, 1 << 40, 10}} {
		s, n := slotWith(seed.kind, seed.ln, seed.payload)
		f.Add(s[:hdrLen], n)
	}
	f.Fuzz(func(t *testing.T, hdr []byte, n int) {
		s := make([]byte, hdrLen+1024)
		copy(s, hdr)
		h, err := parseHeader(s, n, 1024)
		if err != nil {
			return
		}
		if h.len < 0 || (h.kind == kEager && hdrLen+h.len > len(s)) {
			t.Fatalf("header %+v accepted for a %d-byte completion in a %d-byte slot", h, n, len(s))
		}
	})
}
