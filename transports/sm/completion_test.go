package sm_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// heldCopy is fakeIPC completing by events that the test sets off: Start
// holds the copy back, release makes the held copies and fires their
// events, and once fail is set every event query fails with it.
type heldCopy struct {
	fakeIPC
	held  []func() error
	fired map[uint64]bool
	last  uint64
	fail  error
}

func (c *heldCopy) Start(pid int, local []byte, at sm.Place, remote uintptr, pull bool) (uint64, error) {
	c.last++
	token := c.last
	c.held = append(c.held, func() error {
		if err := c.Copy(pid, local, at, remote, pull); err != nil {
			return err
		}
		c.fired[token] = true
		return nil
	})
	return token, nil
}

func (c *heldCopy) Done(_ int, token uint64) (bool, error) {
	if c.fail != nil {
		return false, c.fail
	}
	return c.fired[token], nil
}

func (c *heldCopy) release(t *testing.T) {
	t.Helper()
	for _, run := range c.held {
		if err := run(); err != nil {
			t.Fatal(err)
		}
	}
	c.held = nil
}

// turns drives both endpoints until cond holds, failing the test after a
// bound on rounds (each round lets both move whatever they can).
func turns(t *testing.T, a, b *sm.Endpoint, what string, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		a.Progress()
		b.Progress()
	}
	t.Fatalf("%s never happened", what)
}

// eventPair is a channel whose single copies complete by held events, with
// n messages of size bytes posted from rank 0 to rank 1: pinned into device
// buffers (pushed by the sender) or device to device (pulled by the
// receiver). It returns the requests and checks the bytes at cleanup.
func eventPair(t *testing.T, push bool, n, size int) (a, b *sm.Endpoint, mech *heldCopy, sends, recvs []transports.Request) {
	dev := &fakeDevice{}
	mech = &heldCopy{fakeIPC: fakeIPC{dev: dev, threshold: 300}, fired: map[uint64]bool{}}
	a, b, sends, recvs = eventPairOver(t, mech, dev, push, n, size)
	return a, b, mech, sends, recvs
}

// eventPairOver is eventPair over the given mechanism and fake device.
func eventPairOver(t *testing.T, mech sm.EventCopy, dev *fakeDevice, push bool, n, size int) (a, b *sm.Endpoint, sends, recvs []transports.Request) {
	a, b = pairMem(t, small(4, 2), small(4, 2), mech, dev)
	for i := range n {
		var src, dst []byte
		if push {
			src = dev.allocPinned(t, size)
			fill(src, i+1)
		} else {
			src = dev.alloc(t, size)
			fill(dev.shadow(src), i+1)
		}
		dst = dev.alloc(t, size)
		s := isend(t, a, src)
		r := irecv(t, b, dst)
		sends, recvs = append(sends, s), append(recvs, r)
		t.Cleanup(func() {
			want := make([]byte, size)
			fill(want, i+1)
			if r.Done() && r.Err() == nil && !bytes.Equal(dev.shadow(dst), want) {
				t.Errorf("message %d corrupted", i)
			}
		})
	}
	return a, b, sends, recvs
}

// closeAll closes every endpoint, failing the test on any error.
func closeAll(t *testing.T, eps ...*sm.Endpoint) {
	t.Helper()
	for _, ep := range eps {
		if err := ep.Close(); err != nil {
			t.Error(err)
		}
	}
}

// done counts the completed requests.
func done(reqs []transports.Request) int {
	k := 0
	for _, r := range reqs {
		if r.Done() {
			k++
		}
	}
	return k
}

// With completion by events, the copying side answers FIN as soon as the
// copy is queued: a window of copies is in flight at once, nothing
// completes before its copy has, and then the other side completes from
// the event alone, without the copying side calling in again.
func TestEventCompletion(t *testing.T) {
	for _, tc := range []struct {
		name string
		push bool // the sender copies (pinned into device), else the receiver (device to device)
	}{{"pull", false}, {"push", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const window = 5
			a, b, mech, sends, recvs := eventPair(t, tc.push, window, 1000)
			turns(t, a, b, "a window of held copies", func() bool { return len(mech.held) == window })
			for range 100 {
				a.Progress()
				b.Progress()
			}
			if k := done(sends) + done(recvs); k != 0 {
				t.Fatalf("%d requests complete before their copies", k)
			}
			mech.release(t)
			copying, other := b, a
			mine, theirs := recvs, sends
			if tc.push {
				copying, other, mine, theirs = a, b, sends, recvs
			}
			turns(t, other, other, "completion from the events", func() bool { return done(theirs) == window })
			if k := done(mine); k != 0 {
				t.Errorf("%d of the copying side's requests complete without it calling in", k)
			}
			if err := copying.Wait(mine...); err != nil {
				t.Fatal(err)
			}
			if err := other.Wait(theirs...); err != nil {
				t.Fatal(err)
			}
			closeAll(t, a, b)
		})
	}
}

// An event that cannot be queried fails the message on both sides, naming
// the rank whose copy it was, and leaves nothing in flight.
func TestEventCompletionFailure(t *testing.T) {
	a, b, mech, sends, recvs := eventPair(t, false, 1, 1000)
	turns(t, a, b, "a held copy", func() bool { return len(mech.held) == 1 })
	mech.fail = errors.New("planted event failure")
	turns(t, a, b, "failure on both sides", func() bool { return done(sends)+done(recvs) == 2 })
	for _, r := range append(sends, recvs...) {
		if err := r.Err(); err == nil || !errors.Is(err, mech.fail) || !strings.Contains(err.Error(), "copy rank 1 started") {
			t.Errorf("got %v, want the planted failure of rank 1's copy", err)
		}
	}
	closeAll(t, a, b)
}

// An endpoint closed while a copy of its own is in flight says so.
func TestCloseWithCopyInFlight(t *testing.T) {
	a, b, mech, _, _ := eventPair(t, false, 1, 1000)
	turns(t, a, b, "a held copy", func() bool { return len(mech.held) == 1 })
	if err := b.Close(); err == nil || !strings.Contains(err.Error(), "in flight") {
		t.Errorf("close: got %v, want an error about the copy in flight", err)
	}
	mech.release(t)
	a.Progress()
}

// flushedCopy is heldCopy with marks deferred as cudaipc's flag defers
// them (sm.MarkFlusher): Start hands out numbers, FlushMarks stores the
// last one, and release runs the held copies and then lets the stored
// number land, so a token reads finished only once a flush has covered it
// and its copy has run.
type flushedCopy struct {
	heldCopy
	flushes         int
	stored, reached uint64
}

func (c *flushedCopy) Done(_ int, token uint64) (bool, error) { return token <= c.reached, nil }

func (c *flushedCopy) FlushMarks() error {
	c.flushes++
	c.stored = c.last
	return nil
}

func (c *flushedCopy) release(t *testing.T) {
	c.heldCopy.release(t)
	c.reached = c.stored
}

// With deferred marks, the copies a progress pass starts share one mark:
// a window started together costs fewer flushes than copies, every copy
// is covered by a flush, and both sides complete from the marks as with
// events.
func TestDeferredMarks(t *testing.T) {
	for _, tc := range []struct {
		name string
		push bool
	}{{"pull", false}, {"push", true}} {
		t.Run(tc.name, func(t *testing.T) {
			const window = 5
			dev := &fakeDevice{}
			mech := &flushedCopy{heldCopy: heldCopy{fakeIPC: fakeIPC{dev: dev, threshold: 300}, fired: map[uint64]bool{}}}
			a, b, sends, recvs := eventPairOver(t, mech, dev, tc.push, window, 1000)
			turns(t, a, b, "a window of held copies", func() bool { return len(mech.held) == window })
			if mech.flushes == 0 || mech.flushes >= window || mech.stored != mech.last {
				t.Fatalf("%d copies started, %d flushes, number %d stored of %d: want fewer flushes than copies, the last number stored",
					window, mech.flushes, mech.stored, mech.last)
			}
			if k := done(sends) + done(recvs); k != 0 {
				t.Fatalf("%d requests complete before their copies", k)
			}
			mech.release(t)
			if err := a.Wait(sends...); err != nil {
				t.Fatal(err)
			}
			if err := b.Wait(recvs...); err != nil {
				t.Fatal(err)
			}
			closeAll(t, a, b)
		})
	}
}

// Posting a window of pinned-to-device messages answers the peer's cells
// as they come: each request-to-send at its receive's post, each
// clear-to-send at the next send's post, so the copies of all but the
// last message start before either side waits. Posting device-to-device
// messages starts no pull: those wait for the passes.
func TestPostingStartsPushes(t *testing.T) {
	for _, tc := range []struct {
		name string
		push bool
		want int
	}{{"pull", false, 0}, {"push", true, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, mech, sends, recvs := eventPair(t, tc.push, 5, 1000)
			if got := len(mech.held); got != tc.want {
				t.Errorf("%d copies started by posting 5 messages, want %d", got, tc.want)
			}
			turns(t, a, b, "the window's completion", func() bool { mech.release(t); return done(sends)+done(recvs) == 10 })
			closeAll(t, a, b)
		})
	}
}
