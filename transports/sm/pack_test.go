package sm_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

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

// A packed Isend is seen by its receiver at once, though the sender makes
// no further call (a rank that computes after an Isend, the overlap Isend
// is for): by a blocking receive polling the cell, and by a posted one
// taken by progress passes; a second record joins the open cell.
func TestPackedSendIsSeenWithoutAnotherCall(t *testing.T) {
	for _, posted := range []bool{false, true} {
		t.Run(fmt.Sprintf("posted=%v", posted), func(t *testing.T) {
			a, b := pair(t, sm.DefaultParams(), nil)
			got := make(chan error, 1)
			go func() {
				for i := range 2 {
					buf := make([]byte, 64)
					var n int
					var err error
					if posted {
						var r transports.Request
						if r, err = b.Irecv(0, buf); err == nil {
							err = b.Wait(r)
							n = r.Len()
						}
					} else {
						n, err = b.Recv(0, buf)
					}
					if err == nil && (n != 8+i || buf[0] != byte(i+1)) {
						err = fmt.Errorf("message %d: %d bytes starting %d", i, n, buf[0])
					}
					got <- err
				}
			}()
			var reqs []transports.Request
			for i := range 2 {
				msg := bytes.Repeat([]byte{byte(i + 1)}, 8+i)
				r, err := a.Isend(1, msg)
				if err != nil {
					t.Fatal(err)
				}
				reqs = append(reqs, r)
				select { // the sender makes no call until the receiver has it
				case err := <-got:
					if err != nil {
						t.Fatal(err)
					}
				case <-time.After(20 * time.Second):
					t.Fatalf("message %d, packed, not received within 20 s of its Isend", i)
				}
			}
			if n := a.PackedMessages(1); n != 2 {
				t.Errorf("%d messages packed, want 2", n)
			}
			if err := a.Wait(reqs...); err != nil {
				t.Fatal(err)
			}
		})
	}
}
