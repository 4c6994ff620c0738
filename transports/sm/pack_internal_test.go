package sm

import (
	"encoding/binary"
	"strings"
	"testing"
)

// A packed cell's records are read back as written, and a record whose
// length runs past the records, or a header cut short, is a corrupt
// channel, reported as one, not read past the cell.
func TestPackedRecords(t *testing.T) {
	e, p := &Endpoint{name: "sm", rank: 1}, &peer{rank: 0}
	rec := func(n int, fill byte) []byte {
		b := make([]byte, recordSize(n))
		binary.LittleEndian.PutUint64(b, uint64(n))
		for i := range n {
			b[recordHeader+i] = fill
		}
		return b
	}
	good := append(append(rec(8, 1), rec(0, 2)...), rec(13, 3)...)
	var lens []int
	for off := 0; off < len(good); {
		msg, next := e.record(p, good, off)
		for _, c := range msg {
			if c != byte(len(lens)+1) {
				t.Fatalf("record %d: byte %#x", len(lens), c)
			}
		}
		lens, off = append(lens, len(msg)), next
	}
	if len(lens) != 3 || lens[0] != 8 || lens[1] != 0 || lens[2] != 13 {
		t.Fatalf("records of %v bytes, want [8 0 13]", lens)
	}
	for _, tc := range []struct {
		name string
		recs []byte
	}{
		{"length past the records", rec(8, 1)[:12]},
		{"header cut short", rec(8, 1)[:4]},
		{"a huge length", func() []byte { b := rec(8, 1); binary.LittleEndian.PutUint64(b, 1<<63); return b }()},
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); !strings.Contains(r, "corrupt channel 0->1") {
					t.Errorf("%s: recovered %q, want a corrupt-channel panic", tc.name, r)
				}
			}()
			e.record(p, tc.recs, 0)
		}()
	}
}
