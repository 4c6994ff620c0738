package sm_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// Windows of Isends of every size around a small cell's limits arrive
// whole and in order, packed where a record fits an empty cell (an eager
// limit that fills the cell cannot be packed and goes as an eager cell),
// through a FIFO of two cells, so packs fill, are published full and
// wait for room.
func TestPackedWindowsAroundTheCellsLimit(t *testing.T) {
	p := sm.Params{Depth: 2, CellSize: 128, EagerLimit: 112, FragSize: 64, FragSlots: 2, Copy: "go", Streams: 2}
	a, b := pair(t, p, nil)
	sizes := []int{0, 1, 7, 8, 9, 48, 100, 104, 105, 111, 112, 113, 300}
	const rounds = 20
	both(t, func() error {
		for r := range rounds {
			var reqs []transports.Request
			for i, n := range sizes {
				src := make([]byte, n)
				fill(src, r*len(sizes)+i)
				q, err := a.Isend(1, src)
				if err != nil {
					return err
				}
				reqs = append(reqs, q)
			}
			if err := a.Wait(reqs...); err != nil {
				return err
			}
		}
		return nil
	}, func() error {
		want := make([]byte, 300)
		for r := range rounds {
			for i, n := range sizes {
				got := make([]byte, 300)
				m, err := b.Recv(0, got)
				if err != nil {
					return err
				}
				fill(want[:n], r*len(sizes)+i)
				if m != n || !bytes.Equal(got[:m], want[:n]) {
					return fmt.Errorf("round %d message %d: %d bytes, want %d (bytes equal: %v)", r, i, m, n, bytes.Equal(got[:m], want[:min(m, n)]))
				}
			}
		}
		return nil
	})
	if a.PackedMessages(1) == 0 {
		t.Error("nothing packed")
	}
}
