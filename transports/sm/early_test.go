package sm_test

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// earlySizes are one message of each path: an eager cell, one fragment,
// several fragments.
var earlySizes = []int{64, 20 << 10, 200 << 10}

// sendAhead posts sends of n bytes from a to rank 1, which the ring takes
// whole, drives a's progress until nothing moves, and checks that they
// completed without the receiver.
func sendAhead(t *testing.T, a *sm.Endpoint, n, count int) {
	t.Helper()
	reqs := make([]transports.Request, count)
	for i := range reqs {
		b := buffer(t, n)
		fill(b, i)
		var err error
		if reqs[i], err = a.Isend(1, b); err != nil {
			t.Fatal(err)
		}
	}
	for a.Progress() {
	}
	for i, r := range reqs {
		if !r.Done() {
			t.Fatalf("send %d of %d bytes did not fit the ring", i, n)
		}
	}
	if err := a.Wait(reqs...); err != nil {
		t.Fatal(err)
	}
}

// recvChecked receives message i of n bytes at b and checks its bytes.
func recvChecked(t *testing.T, b *sm.Endpoint, n, i int) {
	t.Helper()
	got, want := buffer(t, n), make([]byte, n)
	fill(want, i)
	if err := b.Wait(irecv(t, b, got)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("message %d of %d bytes: content differs", i, n)
	}
}

// A window of receives posted while its messages already wait in the
// ring takes them from the ring: posting does not drain the channel, so
// none is parked in the unexpected queue (and copied twice).
func TestPostedWindowTakesMessagesFromTheRing(t *testing.T) {
	for _, n := range earlySizes {
		t.Run(fmt.Sprintf("size=%d", n), func(t *testing.T) {
			a, b := pair(t, sm.DefaultParams(), nil)
			const count = 3
			sendAhead(t, a, n, count)
			bufs := make([][]byte, count)
			reqs := make([]transports.Request, count)
			for i := range reqs {
				bufs[i] = buffer(t, n)
				var err error
				if reqs[i], err = b.Irecv(0, bufs[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.Wait(reqs...); err != nil {
				t.Fatal(err)
			}
			want := make([]byte, n)
			for i, got := range bufs {
				fill(want, i)
				if !bytes.Equal(got, want) {
					t.Fatalf("message %d: content differs", i)
				}
			}
			if got := b.EarlyArrivals(); got != 0 {
				t.Errorf("%d of %d messages parked in the unexpected queue, want 0", got, count)
			}
		})
	}
}

// A wait takes what its receive needs and leaves the next message, which
// no receive awaits yet, in the ring for the receive posted after it.
func TestWaitLeavesTheNextMessageInTheRing(t *testing.T) {
	for _, n := range earlySizes {
		t.Run(fmt.Sprintf("size=%d", n), func(t *testing.T) {
			a, b := pair(t, sm.DefaultParams(), nil)
			sendAhead(t, a, n, 2)
			recvChecked(t, b, n, 0)
			if got := b.EarlyArrivals(); got != 0 {
				t.Fatalf("after the first receive %d messages parked, want 0", got)
			}
			recvChecked(t, b, n, 1)
			if got := b.EarlyArrivals(); got != 0 {
				t.Errorf("%d messages parked, want 0", got)
			}
		})
	}
}

// A rank that has nothing else to move drains its rings into the
// unexpected queue once sm.park has passed, so that a sender blocked on a
// full ring gets room (hazard H5); until then the message stays in the
// ring for a receive about to be posted. The parked message is then
// received intact.
func TestIdleProgressParksEarlyArrivalsAfterTheDelay(t *testing.T) {
	for _, park := range []time.Duration{0, time.Millisecond} {
		for _, n := range earlySizes {
			t.Run(fmt.Sprintf("park=%v/size=%d", park, n), func(t *testing.T) {
				p := sm.DefaultParams()
				p.Park = park
				a, b := pair(t, p, nil)
				now := time.Unix(1, 0)
				b.SetClock(func() time.Time { return now })
				sendAhead(t, a, n, 1)
				if park > 0 {
					for range 100 {
						b.Progress()
					}
					now = now.Add(park - time.Nanosecond)
					b.Progress()
					if got := b.EarlyArrivals(); got != 0 {
						t.Fatalf("%d messages parked before sm.park passed, want 0", got)
					}
					now = now.Add(time.Nanosecond)
				}
				if !b.Progress() {
					t.Fatal("progress moved nothing with a message waiting past sm.park")
				}
				if got := b.EarlyArrivals(); got != 1 {
					t.Fatalf("%d messages parked, want 1", got)
				}
				recvChecked(t, b, n, 0)
			})
		}
	}
}

// A pass that moves anything restarts sm.park's wait: a message held
// while a receive from another source completes is not parked by the
// first idle pass after it.
func TestMovingPassRestartsTheParkDelay(t *testing.T) {
	p := sm.DefaultParams()
	p.Park = time.Millisecond
	a, b := pair(t, p, nil)
	now := time.Unix(1, 0)
	b.SetClock(func() time.Time { return now })
	sendAhead(t, a, 64, 2)
	b.Progress() // starts the wait for the held message
	now = now.Add(p.Park / 2)
	recvChecked(t, b, 64, 0) // moves: takes the first message
	now = now.Add(p.Park / 2)
	for range 10 {
		b.Progress()
	}
	if got := b.EarlyArrivals(); got != 0 {
		t.Fatalf("%d messages parked %v after a moving pass, want 0", got, p.Park/2)
	}
	now = now.Add(p.Park)
	b.Progress()
	if got := b.EarlyArrivals(); got != 1 {
		t.Fatalf("%d messages parked, want 1", got)
	}
	recvChecked(t, b, 64, 1)
}
