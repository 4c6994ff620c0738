package msgengine

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gotune/gotune/transports"
)

// msg is a fake wire's message: what a sender started, or an arrival.
type msg struct {
	seq  uint32
	data []byte
}

// fake is a transport without a wire: sends are recorded, arrivals are
// handed in by the test, and Progress runs queued steps.
type fake struct {
	e        Engine[Request, *Request, *msg]
	peers    []*Peer[*Request, *msg]
	started  []*Request
	steps    []func()
	sleeps   int
	released map[*Request]int
}

func newFake(rank, size, eager int) *fake {
	f := &fake{released: map[*Request]int{}}
	f.e.Init("fake", rank, size, eager, Hooks[*Request, *msg]{
		Start: func(r *Request) { f.started = append(f.started, r) },
		Match: f.match,
		Progress: func() bool {
			if len(f.steps) == 0 {
				return false
			}
			s := f.steps[0]
			f.steps = f.steps[1:]
			s()
			return true
		},
		Release: func(r *Request) { f.released[r]++ },
	})
	f.peers = make([]*Peer[*Request, *msg], size)
	for r := range size {
		if r != rank {
			f.peers[r] = &Peer[*Request, *msg]{Rank: r}
			f.e.AddPeer(f.peers[r])
		}
	}
	return f
}

// match copies an arrival into its receive, as an eager transport does.
func (f *fake) match(r *Request, a *msg) {
	if a.seq != r.Seq {
		panic(fmt.Sprintf("arrival %d matched receive %d", a.seq, r.Seq))
	}
	r.MsgLen = len(a.data)
	r.N = copy(r.Buf, a.data)
	f.e.FinishRecv(r)
}

// arrive hands the engine a message from peer, numbered in order.
func (f *fake) arrive(peer int, seq uint32, s string) {
	f.e.Deliver(f.peers[peer], &msg{seq: seq, data: []byte(s)})
}

func TestMatchingOrder(t *testing.T) {
	// Events on the pair with rank 1: "r" posts a receive, "a" delivers
	// the next message; receives take the messages in order whichever
	// comes first.
	for _, c := range []struct {
		events     string
		unexpected int // arrivals left waiting
		posted     int // receives left waiting
	}{
		{"rrraaa", 0, 0},
		{"aaarrr", 0, 0},
		{"arra", 0, 0},
		{"arara", 1, 0},
		{"araa", 2, 0},
		{"rrar", 0, 2},
		{"", 0, 0},
	} {
		t.Run(c.events, func(t *testing.T) {
			f := newFake(0, 2, 8)
			var recvs []*Request
			arrived := uint32(0)
			for _, ev := range c.events {
				switch ev {
				case 'r':
					q, err := f.e.Irecv(1, make([]byte, 8))
					if err != nil {
						t.Fatal(err)
					}
					recvs = append(recvs, q.(*Request))
				case 'a':
					f.arrive(1, arrived, fmt.Sprint("m", arrived))
					arrived++
				}
			}
			p := f.peers[1]
			if p.Unexpected.Len() != c.unexpected || p.Posted.Len() != c.posted {
				t.Errorf("%d unexpected, %d posted; want %d and %d", p.Unexpected.Len(), p.Posted.Len(), c.unexpected, c.posted)
			}
			for i, r := range recvs {
				if r.Seq != uint32(i) {
					t.Errorf("receive %d numbered %d", i, r.Seq)
				}
				if want := fmt.Sprint("m", i); i < int(arrived) && (!r.Done() || string(r.Buf[:r.Len()]) != want || r.Err() != nil) {
					t.Errorf("receive %d: done %v, %q, %v; want %q", i, r.Done(), r.Buf[:r.Len()], r.Err(), want)
				}
				if i >= int(arrived) && r.Done() {
					t.Errorf("receive %d done before its message", i)
				}
			}
		})
	}
}

func TestSendsAreNumberedPerPeer(t *testing.T) {
	f := newFake(1, 3, 8)
	for _, to := range []int{0, 2, 0, 0, 2} {
		if _, err := f.e.Isend(to, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, r := range f.started {
		got = append(got, fmt.Sprintf("%d:%d", r.Rank, r.Seq))
	}
	if want := "0:0 2:0 0:1 0:2 2:1"; strings.Join(got, " ") != want {
		t.Errorf("started %v, want %s", got, want)
	}
}

func TestCompletion(t *testing.T) {
	for _, c := range []struct {
		name     string
		send     bool
		buf, msg int    // bytes: the buffer, the message received
		err      error  // a send's completion
		wantN    int    // bytes moved
		wantErr  string // part of the error; "" for none
	}{
		{"send", true, 5, 0, nil, 5, ""},
		{"failed send moved nothing", true, 5, 0, errors.New("boom"), 0, "boom"},
		{"receive", false, 8, 5, nil, 5, ""},
		{"receive of an empty message", false, 8, 0, nil, 0, ""},
		{"truncated receive", false, 4, 6, nil, 4, "fake: message of 6 bytes from rank 1 into 4: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(0, 2, 8)
			var q transports.Request
			if c.send {
				q, _ = f.e.Isend(1, make([]byte, c.buf))
				f.e.Finish(q.(*Request), c.err)
			} else {
				q, _ = f.e.Irecv(1, make([]byte, c.buf))
				f.arrive(1, 0, strings.Repeat("z", c.msg))
			}
			r := q.(*Request)
			f.e.Finish(r, errors.New("a second completion is ignored"))
			if !r.Done() || r.Len() != c.wantN || f.released[r] != 1 {
				t.Errorf("done %v, %d bytes, released %d times; want done, %d bytes, released once", r.Done(), r.Len(), f.released[r], c.wantN)
			}
			switch err := r.Err(); {
			case c.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Errorf("error %v, want %q", err, c.wantErr)
			}
			if strings.Contains(c.name, "truncated") && !errors.Is(r.Err(), transports.ErrTruncated) {
				t.Errorf("%v is not ErrTruncated", r.Err())
			}
		})
	}
}

func TestPeerErrors(t *testing.T) {
	f := newFake(1, 3, 8)
	for _, c := range []struct {
		peer int
		want string
	}{
		{1, "fake: rank 1 has no peer 1 (job of 3)"},
		{-1, "fake: rank 1 has no peer -1 (job of 3)"},
		{3, "fake: rank 1 has no peer 3 (job of 3)"},
	} {
		if _, err := f.e.Isend(c.peer, nil); err == nil || err.Error() != c.want {
			t.Errorf("Isend to %d: %v, want %q", c.peer, err, c.want)
		}
		if _, err := f.e.Irecv(c.peer, nil); err == nil || err.Error() != c.want {
			t.Errorf("Irecv from %d: %v, want %q", c.peer, err, c.want)
		}
	}
	if f.e.Shut() {
		t.Error("a fresh engine says it was closed")
	}
	if !f.e.Shut() {
		t.Error("a closed engine says it was open")
	}
	if _, err := f.e.Isend(0, nil); err == nil || err.Error() != "fake: transport closed" {
		t.Errorf("Isend after Shut: %v", err)
	}
	if f.e.Name() != "fake" {
		t.Errorf("name %q", f.e.Name())
	}
}

func TestFail(t *testing.T) {
	boom := errors.New("boom")
	f := newFake(0, 2, 8)
	p := f.peers[1]
	f.arrive(1, 0, "early")
	eager, _ := f.e.Irecv(1, make([]byte, 8))
	small, _ := f.e.Irecv(1, make([]byte, 4))
	big, _ := f.e.Irecv(1, make([]byte, 64))
	rndv := big.(*Request)
	p.Posted.Reset()
	p.Posted.Push(small.(*Request))
	rndv.Rndv = true
	p.RndvRecv = append(p.RndvRecv, rndv)
	if !f.e.Fail(p, boom) {
		t.Fatal("the first failure was not recorded")
	}
	if f.e.Fail(p, errors.New("later")) || p.Err != boom {
		t.Errorf("a second failure replaced the first: %v", p.Err)
	}
	for _, c := range []struct {
		q    transports.Request
		want string // the error; "" for none
	}{
		{eager, ""},
		{small, "eager receive into 4 bytes from rank 1: boom"},
		{big, "rendezvous receive into 64 bytes from rank 1: boom"},
	} {
		err := c.q.Err()
		if !c.q.Done() || (c.want == "") != (err == nil) || (err != nil && (err.Error() != c.want || !errors.Is(err, boom))) {
			t.Errorf("done %v, error %v; want %q", c.q.Done(), err, c.want)
		}
	}
	if p.Posted.Len() != 0 || len(p.RndvRecv) != 0 {
		t.Errorf("%d posted and %d rendezvous receives left", p.Posted.Len(), len(p.RndvRecv))
	}
	// A message that came before the failure still reaches its receive.
	p.Unexpected.Push(&msg{seq: 3, data: []byte("late")})
	if late, _ := f.e.Irecv(1, make([]byte, 8)); !late.Done() || late.Err() != nil || late.Len() != 4 {
		t.Errorf("an arrival from before the failure: done %v, %d bytes, %v", late.Done(), late.Len(), late.Err())
	}
	// After the failure: a send and a receive end at once with it.
	s, _ := f.e.Isend(1, make([]byte, 100))
	r, _ := f.e.Irecv(1, nil)
	for _, q := range []transports.Request{s, r} {
		if !q.Done() || q.Err() != boom {
			t.Errorf("after the failure: done %v, %v", q.Done(), q.Err())
		}
	}
	if len(f.started) != 0 {
		t.Errorf("%d sends put on the wire of a failed pair", len(f.started))
	}
}

func TestOpErr(t *testing.T) {
	f := newFake(0, 2, 8)
	e := errors.New("e")
	for _, c := range []struct {
		r    Request
		want string
	}{
		{Request{Send: true, Buf: make([]byte, 8), Rank: 1}, "eager send of 8 bytes to rank 1: e"},
		{Request{Send: true, Buf: make([]byte, 9), Rank: 1}, "rendezvous send of 9 bytes to rank 1: e"},
		{Request{Send: true, Buf: make([]byte, 1), Rndv: true, Rank: 1}, "rendezvous send of 1 bytes to rank 1: e"},
		{Request{Buf: make([]byte, 4), MsgLen: 9, Rank: 1}, "rendezvous receive into 4 bytes from rank 1: e"},
		{Request{Buf: make([]byte, 4), MsgLen: 8, Rank: 1}, "eager receive into 4 bytes from rank 1: e"},
	} {
		if got := f.e.OpErr(&c.r, e).Error(); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}

func TestWait(t *testing.T) {
	f := newFake(0, 2, 8)
	f.e.hooks.Sleep = func() { f.sleeps++ }
	s, _ := f.e.Isend(1, []byte("abc"))
	r, _ := f.e.Irecv(1, make([]byte, 8))
	first := errors.New("first")
	// Progress completes them over three calls; then nothing moves until
	// Wait has slept, and the last step fails the send.
	f.steps = []func(){
		func() {},
		func() { f.arrive(1, 0, "hi") },
		func() {},
	}
	waitSend := func() {
		for f.sleeps == 0 {
			if !f.e.hooks.Progress() {
				f.e.hooks.Sleep()
			}
		}
		f.e.Finish(s.(*Request), first)
	}
	f.steps = append(f.steps, waitSend)
	err := f.e.Wait(r, s)
	if err != first {
		t.Errorf("Wait: %v, want the send's error", err)
	}
	// Both requests are recycled: the next two come back zeroed.
	a, _ := f.e.Irecv(1, nil)
	b, _ := f.e.Irecv(1, nil)
	if got := map[transports.Request]bool{a: true, b: true}; !got[s] || !got[r] || a.Done() || b.Done() || b.(*Request).Seq != 2 {
		t.Errorf("requests not recycled zeroed: %v %v", a, b)
	}
}

func TestWaitSleepsOnlyWhenIdle(t *testing.T) {
	for _, c := range []struct {
		name  string
		sleep bool
	}{{"sleeps", true}, {"spins", false}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(0, 2, 8)
			r, _ := f.e.Irecv(1, make([]byte, 8))
			spins := 0
			f.e.hooks.Progress = func() bool {
				spins++
				if !c.sleep && spins == 1000 {
					f.arrive(1, 0, "late")
				}
				return false
			}
			if c.sleep {
				f.e.hooks.Sleep = func() { f.sleeps++; f.arrive(1, 0, "late") }
			}
			if err := f.e.Wait(r); err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1, false: 0}[c.sleep]; f.sleeps != want {
				t.Errorf("slept %d times, want %d", f.sleeps, want)
			}
		})
	}
}

func TestSendRecv(t *testing.T) {
	f := newFake(0, 2, 8)
	f.steps = []func(){func() { f.e.Finish(f.started[0], nil) }}
	if err := f.e.Send(1, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	f.steps = []func(){func() { f.arrive(1, 0, "hello") }}
	n, err := f.e.Recv(1, make([]byte, 8))
	if n != 5 || err != nil {
		t.Errorf("Recv: %d, %v", n, err)
	}
	if _, err := f.e.Recv(2, nil); err == nil {
		t.Error("Recv from a rank outside the job")
	}
	if err := f.e.Send(0, nil); err == nil {
		t.Error("Send to itself")
	}
}

func TestEagerBufs(t *testing.T) {
	f := newFake(0, 2, 16)
	a := f.e.EagerBuf()
	if len(a) != 16 {
		t.Fatalf("eager buffer of %d bytes", len(a))
	}
	f.e.PutEagerBuf(a[:3])
	f.e.PutEagerBuf(make([]byte, 4)) // not one of its own: dropped
	if b := f.e.EagerBuf(); &b[0] != &a[0] || len(b) != 16 {
		t.Error("a returned buffer was not reused whole")
	}
	if c := f.e.EagerBuf(); &c[0] == &a[0] || len(c) != 16 {
		t.Error("a buffer in use was handed out again")
	}
}

func TestFindTakePartDone(t *testing.T) {
	rs := []*Request{{Seq: 4, Pending: 2}, {Seq: 7, Pending: 1}, {Seq: 9}}
	if r, ok := Find(rs, 7); !ok || r != rs[1] {
		t.Error("Find 7")
	}
	if _, ok := Find(rs, 5); ok {
		t.Error("Find 5 found one")
	}
	first := rs[0]
	for i, c := range []struct {
		seq  uint32
		last bool
		left int
	}{{4, false, 3}, {5, false, 3}, {7, true, 2}, {4, true, 1}} {
		r, last := PartDone(&rs, c.seq)
		if last != c.last || len(rs) != c.left || (last && r.Pending != 0) {
			t.Errorf("step %d: PartDone(%d) = %v with %d left, want %v with %d", i, c.seq, last, len(rs), c.last, c.left)
		}
	}
	if first.Pending != 0 {
		t.Errorf("request 4 has %d parts due", first.Pending)
	}
	if r, ok := Take(&rs, 9); !ok || r.Seq != 9 || len(rs) != 0 {
		t.Errorf("Take 9: %v %v, %d left", r, ok, len(rs))
	}
	if _, ok := Take(&rs, 9); ok {
		t.Error("Take from an empty list")
	}
}
