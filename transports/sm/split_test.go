package sm_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// splitCopy is a single copy within this process that routes every
// rendezvous RouteSplit, counting pulls and pushes (and their bytes);
// pushErr, when set, fails every push with it.
type splitCopy struct {
	mu             sync.Mutex
	pulls, pushes  int
	pulled, pushed int
	pushErr        error
}

func (c *splitCopy) Name() string                              { return "split" }
func (c *splitCopy) Pull() bool                                { return true }
func (c *splitCopy) Rendezvous(n int) bool                     { return n > 64 }
func (c *splitCopy) RouteFor(int, sm.Place, sm.Place) sm.Route { return sm.RouteSplit }
func (c *splitCopy) Copy(pid int, local []byte, at sm.Place, remote uintptr, pull bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case pull:
		c.pulls, c.pulled = c.pulls+1, c.pulled+len(local)
	case c.pushErr != nil:
		return c.pushErr
	default:
		c.pushes, c.pushed = c.pushes+1, c.pushed+len(local)
	}
	return memCopy{}.Copy(pid, local, at, remote, pull)
}

// memCopy is a single copy within this process along one route.
type memCopy struct{ route sm.Route }

func (memCopy) Name() string                                { return "memcopy" }
func (memCopy) Pull() bool                                  { return true }
func (memCopy) Rendezvous(n int) bool                       { return n > 4096 }
func (m memCopy) RouteFor(int, sm.Place, sm.Place) sm.Route { return m.route }
func (memCopy) Copy(_ int, local []byte, _ sm.Place, remote uintptr, pull bool) error {
	far := sys.BytesAt(remote, len(local)) // one process: the peer's address is ours
	if pull {
		copy(local, far)
	} else {
		copy(far, local)
	}
	return nil
}

// splitExchange sends one message of each size from a to b, one at a time,
// into receive buffers of capacity bytes (0: the message's size), and
// checks the bytes that arrived; it returns the first send and receive
// errors.
func splitExchange(t *testing.T, a, b *sm.Endpoint, sizes []int, capacity int) (send, recv error) {
	t.Helper()
	for i, n := range sizes {
		sb, rb := buffer(t, n), buffer(t, max(capacity, n))
		if capacity > 0 {
			rb = rb[:capacity]
		}
		fill(sb, i+3)
		var got int
		var s, r error
		both(t, func() error { s = a.Send(1, sb); return nil }, func() error { got, r = b.Recv(0, rb); return nil })
		send, recv = errors.Join(send, s), errors.Join(recv, r)
		if s == nil && (r == nil || errors.Is(r, transports.ErrTruncated)) {
			want := min(n, len(rb))
			if got != want || !bytes.Equal(rb[:want], sb[:want]) {
				t.Errorf("message %d (%d bytes into %d): received %d bytes, equal %v", i, n, len(rb), got, bytes.Equal(rb[:want], sb[:want]))
			}
		}
	}
	return send, recv
}

// A split copy moves the first part by the receiver's pull and the rest by
// the sender's push, each byte once; the first message with a peer pulls
// whole (nothing proves the receiver may read the sender before), as do
// messages too short to share.
func TestSplitCopyMovesEachPartOnce(t *testing.T) {
	mech := &splitCopy{}
	a, b := pair(t, small(2, 2), mech)
	sizes := []int{100 << 10, 64 << 10, 300<<10 + 7, 63 << 10, 1 << 20}
	if s, r := splitExchange(t, a, b, sizes, 0); s != nil || r != nil {
		t.Fatalf("send %v, receive %v", s, r)
	}
	total := 0
	for _, n := range sizes {
		total += n
	}
	// Pulled whole: the first message and 63 KiB (below twice the 32 KiB
	// part); the other three a part each way.
	if mech.pulls != 5 || mech.pushes != 3 || mech.pulled+mech.pushed != total {
		t.Errorf("%d pulls (%d bytes), %d pushes (%d bytes) for %d bytes; want 5 pulls and 3 pushes, each byte once",
			mech.pulls, mech.pulled, mech.pushes, mech.pushed, total)
	}
	closeAll(t, a, b)
}

// A message longer than the receive buffer fills the buffer (both parts
// within it) and fails with ErrTruncated; the sender completes.
func TestSplitCopyTruncates(t *testing.T) {
	mech := &splitCopy{}
	a, b := pair(t, small(2, 2), mech)
	if s, r := splitExchange(t, a, b, []int{100 << 10}, 0); s != nil || r != nil { // the first pulls whole
		t.Fatalf("first message: send %v, receive %v", s, r)
	}
	s, r := splitExchange(t, a, b, []int{500 << 10}, 300<<10)
	if s != nil || !errors.Is(r, transports.ErrTruncated) {
		t.Errorf("send %v, receive %v; want the send fine and ErrTruncated", s, r)
	}
	if mech.pushes != 1 || mech.pulled+mech.pushed != 100<<10+300<<10 {
		t.Errorf("%d pushes, %d bytes moved; want 1 push and the 400 KiB the buffers took", mech.pushes, mech.pulled+mech.pushed)
	}
	closeAll(t, a, b)
}

// The sender's part refused (ErrNotSupported) is pulled by the receiver,
// which splits no more with that peer; any other failure of it fails the
// message on both sides.
func TestSplitCopySenderPartFails(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		ok   bool
	}{
		{"refused", sys.NotSupported("process_vm_writev", "planted refusal", syscall.EPERM), true},
		{"peer gone", fmt.Errorf("process_vm_writev: %w", syscall.ESRCH), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mech := &splitCopy{}
			a, b := pair(t, small(2, 2), mech)
			if s, r := splitExchange(t, a, b, []int{100 << 10}, 0); s != nil || r != nil {
				t.Fatalf("first message: send %v, receive %v", s, r)
			}
			mech.pushErr = c.err
			s, r := splitExchange(t, a, b, []int{200 << 10, 200 << 10}, 0)
			if c.ok {
				if s != nil || r != nil {
					t.Fatalf("send %v, receive %v; want both intact", s, r)
				}
				if mech.pulls != 1+2+1 { // the first whole; then a part and the handed-back part; then whole
					t.Errorf("%d pulls, want 4", mech.pulls)
				}
				closeAll(t, a, b)
				return
			}
			if s == nil || r == nil || !errors.Is(r, syscall.ESRCH) {
				t.Errorf("send %v, receive %v; want both failed, the receive naming ESRCH", s, r)
			}
		})
	}
}
