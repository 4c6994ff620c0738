package sm_test

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// countingCopy is memCopy's pull, counting the copies it has run.
type countingCopy struct {
	memCopy
	copies atomic.Int32
}

func (c *countingCopy) Copy(pid int, local []byte, at sm.Place, remote uintptr, pull bool) error {
	c.copies.Add(1)
	return c.memCopy.Copy(pid, local, at, remote, pull)
}

// parkRTS has a send a rendezvous to b and b park its request-to-send as
// an early message: a progress pass that finds nothing else to move.
func parkRTS(t *testing.T, a, b *sm.Endpoint, buf []byte) transports.Request {
	t.Helper()
	s, err := a.Isend(1, buf)
	if err != nil {
		t.Fatal(err)
	}
	if !b.Progress() {
		t.Fatal("rank 1's progress pass parked nothing: the request-to-send is not there")
	}
	return s
}

// deadline aborts both endpoints after 20 s, so that a wait that never
// ends fails the test with why instead of hanging it.
func deadline(t *testing.T, why string, eps ...*sm.Endpoint) {
	stop := time.AfterFunc(20*time.Second, func() {
		for _, ep := range eps {
			ep.Abort(errors.New(why))
		}
	})
	t.Cleanup(func() { stop.Stop() })
}

// A receive that matches a parked request-to-send does not copy when it
// is posted: the send posted after it goes out first, so that in an
// exchange both ranks copy at once (each rank's copy otherwise waits for
// the other's to finish before its own request-to-send leaves).
func TestMatchedRendezvousCopiesAfterTheNextPost(t *testing.T) {
	single := &countingCopy{}
	a, b := pair(t, small(8, 8), single)
	deadline(t, "exchange not done within 20 s", a, b)
	const n = 8192 // above memCopy's rendezvous threshold
	aOut, bOut, aIn, bIn := buffer(t, n), buffer(t, n), buffer(t, n), buffer(t, n)
	fill(aOut, 1)
	fill(bOut, 2)
	aSend := parkRTS(t, a, b, aOut)

	bRecv, err := b.Irecv(0, bIn)
	if err != nil {
		t.Fatal(err)
	}
	if got := single.copies.Load(); got != 0 {
		t.Fatalf("posting the receive ran %d copies, want none before the next call into the engine", got)
	}
	bSend, err := b.Isend(0, bOut)
	if err != nil {
		t.Fatal(err)
	}
	both(t, func() error {
		aRecv, err := a.Irecv(1, aIn)
		if err != nil {
			return err
		}
		return a.Wait(aSend, aRecv)
	}, func() error { return b.Wait(bRecv, bSend) })
	if !bytes.Equal(bIn, aOut) || !bytes.Equal(aIn, bOut) {
		t.Errorf("exchange corrupted: rank 1 got rank 0's bytes %v, rank 0 got rank 1's %v", bytes.Equal(bIn, aOut), bytes.Equal(aIn, bOut))
	}
	if got := single.copies.Load(); got != 2 {
		t.Errorf("%d single copies, want 2", got)
	}
}

// A blocking receive behind a receive whose matched copy has not run yet
// runs it: its sender may send nothing more until that copy's completion
// reaches it (a blocking send of the first message, then the second).
func TestBlockingReceiveRunsAMatchedCopy(t *testing.T) {
	tests := []struct {
		name string
		next int // bytes of the message the blocking receive waits for
	}{
		{"box", 8},
		{"eager cell", 64},
		{"pipelined", 1024},
		{"rendezvous", 8192},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := pair(t, small(8, 8), &countingCopy{})
			deadline(t, "receive not done within 20 s: the matched copy never ran", a, b)
			first, second := buffer(t, 8192), buffer(t, tc.next)
			fill(first, 3)
			fill(second, 4)
			s1 := parkRTS(t, a, b, first)
			in1, in2 := buffer(t, 8192), buffer(t, tc.next)
			r1, err := b.Irecv(0, in1)
			if err != nil {
				t.Fatal(err)
			}
			both(t, func() error {
				// The first send completes with rank 1's copy; only then
				// does the second message leave.
				if err := a.Wait(s1); err != nil {
					return err
				}
				return a.Send(1, second)
			}, func() error {
				if _, err := b.Recv(0, in2); err != nil {
					return err
				}
				return b.Wait(r1)
			})
			if !bytes.Equal(in1, first) || !bytes.Equal(in2, second) {
				t.Errorf("messages corrupted: first equal %v, second equal %v", bytes.Equal(in1, first), bytes.Equal(in2, second))
			}
		})
	}
}
