package sm_test

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
)

// With the progress thread, receives complete while the receiving
// application thread stays away from the engine: a pipelined message larger
// than the fragment ring, a rendezvous (the pull done, or the clear-to-send
// answered, by the progress thread), and another pipelined message. The
// sender's blocking sends can only return if the receiver progresses, and
// the ring's order proves the first two receives complete by then.
func TestProgressThreadCompletesReceivesWhileAway(t *testing.T) {
	for _, pull := range []bool{true, false} {
		t.Run(fmt.Sprintf("pull=%v", pull), func(t *testing.T) {
			single := cma.NewCopier(cma.Params{Pull: pull, Threshold: 500})
			ps := small(2, 2) // fragment ring: 2 × 64 bytes
			pr := ps
			pr.Progress = "thread"
			a, b := pairWith(t, ps, pr, single)
			sizes := []int{400, 600, 400} // pipelined, rendezvous, pipelined
			sb, rb := buffer(t, 3*1000), buffer(t, 3*1000)
			reqs := make([]transports.Request, len(sizes))
			for i, n := range sizes {
				fill(sb[i*1000:i*1000+n], i)
				var err error
				if reqs[i], err = b.Irecv(0, rb[i*1000:i*1000+n]); err != nil {
					t.Fatal(err)
				}
			}
			// From here on, b's application makes no call into b.
			for i, n := range sizes {
				if err := a.Send(1, sb[i*1000:i*1000+n]); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			for i := range 2 {
				if !reqs[i].Done() {
					t.Errorf("receive %d (%d bytes) not complete after the sender got past it", i, sizes[i])
				}
			}
			if err := b.Wait(reqs...); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(sb, rb) {
				t.Fatal("payload differs")
			}
			closeAll(t, a, b)
		})
	}
}

// With polling progress nothing moves without the receiver: after the
// sender has filled the ring, a posted receive stays incomplete however long
// the receiver stays away (the sender's non-blocking send stays pending).
func TestPollingProgressNeedsTheReceiver(t *testing.T) {
	a, b := pair(t, small(2, 2), nil)
	sb, rb := buffer(t, 400), buffer(t, 400)
	rr := irecv(t, b, rb)
	sr := isend(t, a, sb)
	for range 1000 {
		a.Progress()
	}
	if sr.Done() || rr.Done() {
		t.Fatalf("send done %v, receive done %v: something progressed the receiver", sr.Done(), rr.Done())
	}
	both(t, func() error { return b.Wait(rr) }, func() error { return a.Wait(sr) })
}

// sm.progress=thread wakes its goroutine only while an operation above
// the eager limit is open: eager traffic alone never wakes it, a large
// receive wakes the receiver's, a large send the sender's, and each
// endpoint goes dormant again (the entry points skip the hand-off) once its
// last large operation is done. Each round's pipelined message is many
// fragment rings long, so the sender's blocking send returns only if the
// receiver's goroutine drains it while the receiving application stays
// away: in the first round the goroutine comes out of the park it was made
// in, in the second out of the park it went back to after a dormant spell.
func TestProgressThreadWakesOnlyForLargeOperations(t *testing.T) {
	p := small(2, 2) // fragment ring: 2 × 64 bytes
	p.Progress = "thread"
	a, b := pair(t, p, nil)
	awake := func() [2]bool { return [2]bool{a.ProgressAwake(), b.ProgressAwake()} }

	eager := buffer(t, p.EagerLimit)
	for i := range 10 { // ten round trips, more than the FIFO's depth
		fill(eager, i)
		if err := a.Send(1, eager); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Recv(0, eager); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(0, eager); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Recv(1, eager); err != nil {
			t.Fatal(err)
		}
	}
	if got := awake(); got != [2]bool{} {
		t.Fatalf("after eager traffic only: awake %v, want neither", got)
	}
	// An endpoint with a Memory hook is awake at once and stays so: a
	// device router may send a message of any size by rendezvous.
	if d, _ := pairMem(t, p, p, nil, &fakeDevice{}); !d.ProgressAwake() {
		t.Error("an endpoint with a Memory hook is dormant")
	}

	const large = 1000
	for round := range 2 {
		if round == 1 {
			waitFor(t, "the receiver's progress goroutine to park again", b.ProgressParked)
		}
		sb, rb := buffer(t, large), buffer(t, large)
		fill(sb, round)
		r := irecv(t, b, rb)
		if got := awake(); got != [2]bool{false, true} {
			t.Fatalf("round %d, after a %d-byte receive: awake %v, want the receiver only", round, large, got)
		}
		// From here on, b's application makes no call into b until Wait.
		if err := a.Send(1, sb); err != nil {
			t.Fatal(err)
		}
		if got := awake(); got != [2]bool{false, true} {
			t.Fatalf("round %d, after a %d-byte send: awake %v, want the receiver only (the sender's send is done)", round, large, got)
		}
		if err := b.Wait(r); err != nil {
			t.Fatal(err)
		}
		if got := awake(); got != [2]bool{} {
			t.Fatalf("round %d, after the receive's Wait: awake %v, want neither", round, got)
		}
		if !bytes.Equal(sb, rb) {
			t.Fatalf("round %d: payload differs", round)
		}
	}
	closeAll(t, a, b)
}

// waitFor polls cond until it holds, failing the test after ten seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// The progress goroutine is made with the endpoint (its thread and the
// process barrier's registration stay out of the first large operation):
// New returns once it runs on a thread of its own, and Close must end it
// whether or not it ever started polling.
func TestCloseEndsAnUnstartedProgressGoroutine(t *testing.T) {
	p := small(4, 4)
	p.Progress = "thread"
	a, b := pair(t, p, nil)
	if a.ProgressExited() || b.ProgressExited() {
		t.Fatal("progress goroutine gone before Close")
	}
	ta, tb := a.ProgressThread(), b.ProgressThread()
	if ta == 0 || tb == 0 || ta == tb {
		t.Fatalf("progress threads %d and %d after New: want two locked threads", ta, tb)
	}
	for _, tid := range []int{ta, tb} {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); err != nil {
			t.Fatalf("progress thread %d is not a thread of this process: %v", tid, err)
		}
	}
	closeAll(t, a, b)
	if !a.ProgressParked() || !b.ProgressParked() {
		t.Fatal("progress goroutine unparked without traffic")
	}
	if !a.ProgressExited() || !b.ProgressExited() {
		t.Fatalf("after Close: exited %v %v, want both", a.ProgressExited(), b.ProgressExited())
	}
}
