package sm_test

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/sm"
)

// pair builds two endpoints of one process over an anonymous mapping.
func pair(t testing.TB, p sm.Params, single sm.SingleCopy) (*sm.Endpoint, *sm.Endpoint) {
	return pairWith(t, p, p, single)
}

// pairWith builds two endpoints with their own parameters (same geometry,
// different local settings such as the progress mode).
func pairWith(t testing.TB, p0, p1 sm.Params, single sm.SingleCopy) (*sm.Endpoint, *sm.Endpoint) {
	t.Helper()
	return pairMem(t, p0, p1, single, nil)
}

// pairMem builds two endpoints whose buffers may be device memory (mem).
func pairMem(t testing.TB, p0, p1 sm.Params, single sm.SingleCopy, mem sm.Memory) (*sm.Endpoint, *sm.Endpoint) {
	t.Helper()
	seg, err := sys.MapAnon(p0.SegmentBytes(2), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Unmap(seg) })
	pid := os.Getpid()
	var eps [2]*sm.Endpoint
	for r, p := range []sm.Params{p0, p1} {
		env := transports.Env{Rank: r, Size: 2, PIDs: []int{pid, pid}, Segment: seg}
		if eps[r], err = sm.NewWithMemory(env, p, single, mem, "sm"); err != nil {
			t.Fatal(err)
		}
		ep := eps[r]
		// Before the segment goes: stop a progress thread (Close after an
		// abort skips delivering anything a test left queued).
		t.Cleanup(func() { ep.Abort(errors.New("test over")); ep.Close() })
	}
	return eps[0], eps[1]
}

func buffer(t testing.TB, n int) []byte {
	t.Helper()
	b, err := sys.MapAnon(max(n, 1), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Unmap(b) })
	return b[:n]
}

func fill(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*131 + i*7 + i>>8)
	}
}

// isend posts a send of buf from a to rank 1; irecv a receive into buf
// from rank 0 on b. Either fails the test when it cannot.
func isend(t testing.TB, a *sm.Endpoint, buf []byte) transports.Request {
	t.Helper()
	return posted(t)(a.Isend(1, buf))
}

func irecv(t testing.TB, b *sm.Endpoint, buf []byte) transports.Request {
	t.Helper()
	return posted(t)(b.Irecv(0, buf))
}

// posted fails the test on a post's error and returns its request.
func posted(t testing.TB) func(transports.Request, error) transports.Request {
	return func(r transports.Request, err error) transports.Request {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// burst sends every buffer of sends from a to b at once, into recvs,
// whose second half of receives is posted only once the first half has
// completed: those messages arrive before their receives.
func burst(t testing.TB, a, b *sm.Endpoint, sends, recvs [][]byte) {
	t.Helper()
	both(t, func() error {
		var reqs []transports.Request
		for _, s := range sends {
			r, err := a.Isend(1, s)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		return a.Wait(reqs...)
	}, func() error {
		var reqs []transports.Request
		for i, rb := range recvs {
			if i == len(recvs)/2 {
				if err := b.Wait(reqs...); err != nil {
					return err
				}
				reqs = nil
			}
			r, err := b.Irecv(0, rb)
			if err != nil {
				return err
			}
			reqs = append(reqs, r)
		}
		return b.Wait(reqs...)
	})
}

// both runs a and b concurrently and fails the test on either's error.
func both(t testing.TB, a, b func() error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, f := range []func() error{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f() }()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// small is a channel of depth cells of 128 bytes (eager up to 64) and a
// ring of slots fragments of 64 bytes, where two pipelined sends take
// turns.
func small(depth, slots int) sm.Params {
	return sm.Params{Depth: depth, CellSize: 128, EagerLimit: 64, FragSize: 64, FragSlots: slots, Copy: "go", Streams: 2}
}

// Messages of every protocol, in order, across many ring wrap-arounds.
func TestOrderedDeliveryAcrossWrapAround(t *testing.T) {
	sizes := []int{0, 1, 63, 64, 65, 127, 128, 129, 200, 385, 1000, 4096}
	movsb := small(3, 2)
	movsb.Copy = "movsb"
	threaded := small(1, 1)
	threaded.Progress = "thread"
	// Fragments of 192 bytes in a ring of one or two: tails of other
	// lengths leave room that does not fit the next fragment, which then
	// wraps to the ring's start.
	packed, packed1 := small(4, 2), small(4, 1)
	packed.FragSize, packed1.FragSize = 192, 192
	for _, p := range []sm.Params{small(1, 1), small(2, 1), small(3, 2), movsb, packed, packed1, sm.DefaultParams(), threaded} {
		t.Run(fmt.Sprintf("depth%d_frag%dx%d_%s_%s", p.Depth, p.FragSize, p.FragSlots, p.Copy, cmp.Or(p.Progress, "poll")), func(t *testing.T) {
			a, b := pair(t, p, nil)
			const rounds = 50
			sbuf, rbuf := buffer(t, 4096), buffer(t, 4096)
			both(t, func() error {
				for i := range rounds * len(sizes) {
					n := sizes[i%len(sizes)]
					fill(sbuf[:n], i)
					if err := a.Send(1, sbuf[:n]); err != nil {
						return err
					}
				}
				return nil
			}, func() error {
				want := make([]byte, 4096)
				for i := range rounds * len(sizes) {
					n := sizes[i%len(sizes)]
					got, err := b.Recv(0, rbuf)
					if err != nil {
						return err
					}
					fill(want[:n], i)
					if got != n || !bytes.Equal(rbuf[:n], want[:n]) {
						return fmt.Errorf("message %d: got %d bytes, want %d (content equal: %v)", i, got, n, bytes.Equal(rbuf[:got], want[:n]))
					}
				}
				return nil
			})
		})
	}
}

// Pipelined messages on both sides of every copy-routine boundary arrive
// intact with each sm.copy, from sources and into receive buffers at odd
// offsets.
func TestFragmentCopiesAcrossRoutineBoundaries(t *testing.T) {
	var sizes []int
	for _, b := range []int{sm.MoveStringInFrom, sm.MoveStringInMax + 1, sm.MoveStringMin, 2 * sm.MoveStringMin} {
		sizes = append(sizes, b-1, b, b+1)
	}
	sizes = append(sizes, 4097, 300_001)
	for _, mode := range []string{"auto", "go", "movsb"} {
		t.Run(mode, func(t *testing.T) {
			p := sm.DefaultParams()
			p.Copy = mode
			a, b := pair(t, p, nil)
			const most = 300_001 + 2
			sbuf, rbuf := buffer(t, most), buffer(t, most)
			both(t, func() error {
				for i, n := range sizes {
					off := i % 3
					fill(sbuf[off:off+n], i)
					if err := a.Send(1, sbuf[off:off+n]); err != nil {
						return err
					}
				}
				return nil
			}, func() error {
				want := make([]byte, most)
				for i, n := range sizes {
					off := (i + 1) % 3
					got, err := b.Recv(0, rbuf[off:])
					if err != nil {
						return err
					}
					fill(want[:n], i)
					if got != n || !bytes.Equal(rbuf[off:off+n], want[:n]) {
						return fmt.Errorf("message %d (%d bytes): got %d bytes (content equal: %v)", i, n, got, bytes.Equal(rbuf[off:off+got], want[:n]))
					}
				}
				return nil
			})
		})
	}
}

// Both ranks send a burst before receiving anything, at the smallest FIFO:
// each sender must drain its incoming channel while blocked.
func TestHeadToHeadSendsSmallestFIFO(t *testing.T) {
	for _, n := range []int{8, 64, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			a, b := pair(t, small(1, 1), nil)
			const burst = 200
			run := func(ep *sm.Endpoint, peer int) func() error {
				return func() error {
					s, r := buffer(t, n), buffer(t, n)
					for i := range burst {
						fill(s, i+peer*1000)
						if err := ep.Send(peer, s); err != nil {
							return err
						}
					}
					want := make([]byte, n)
					for i := range burst {
						if _, err := ep.Recv(peer, r); err != nil {
							return err
						}
						fill(want, i+(1-peer)*1000)
						if !bytes.Equal(r, want) {
							return fmt.Errorf("rank %d message %d corrupted", 1-peer, i)
						}
					}
					return nil
				}
			}
			both(t, run(a, 1), run(b, 0))
		})
	}
}

// A window of non-blocking sends of every protocol and of different
// lengths (so pipelined ones finish out of order when they take turns),
// half of them received late so that they arrive unexpected, lands every
// message in its own receive.
func TestNonBlockingWindow(t *testing.T) {
	const window = 16
	sizes := make([]int, window)
	for i := range sizes {
		switch i {
		case 0:
			sizes[i] = 40 // eager
		case 5:
			sizes[i] = 3000
		case 9:
			sizes[i] = 0
		default:
			sizes[i] = 1000 - 37*i
		}
	}
	offs := make([]int, window+1)
	for i, n := range sizes {
		offs[i+1] = offs[i] + n
	}
	for _, single := range []sm.SingleCopy{nil,
		cma.NewCopier(cma.Params{Pull: true, Threshold: 65}),
		cma.NewCopier(cma.Params{Pull: false, Threshold: 65, Chunk: 100})} {
		for _, streams := range []int{1, 2, window} {
			name := "sm"
			if single != nil {
				name = fmt.Sprintf("cma_pull=%v", single.Pull())
			}
			t.Run(fmt.Sprintf("%s_streams%d", name, streams), func(t *testing.T) {
				p := small(2, 2)
				p.Streams = streams
				a, b := pair(t, p, single)
				sb, rb := buffer(t, offs[window]), buffer(t, offs[window])
				for i := range window {
					fill(sb[offs[i]:offs[i+1]], i)
				}
				var sends, recvs [][]byte
				for i := range window {
					sends, recvs = append(sends, sb[offs[i]:offs[i+1]]), append(recvs, rb[offs[i]:offs[i+1]])
				}
				burst(t, a, b, sends, recvs)
				for i := range window {
					if !bytes.Equal(sb[offs[i]:offs[i+1]], rb[offs[i]:offs[i+1]]) {
						t.Fatalf("message %d (%d bytes) differs", i, sizes[i])
					}
				}
			})
		}
	}
}

// Pipelined sends take turns: when the first of two 5-fragment messages
// is complete, fragments of the second have already landed, and with
// sm.streams=1 at most the one behind the first's last. Both endpoints are
// driven from one goroutine.
func TestPipelinedSendsTakeTurns(t *testing.T) {
	for _, streams := range []int{1, 2} {
		t.Run(fmt.Sprint("streams", streams), func(t *testing.T) {
			p := small(64, 2)
			p.Streams = streams
			a, b := pair(t, p, nil)
			const n = 5 * 64
			sb, rb := buffer(t, 2*n), buffer(t, 2*n)
			fill(sb, 1)
			const unwritten = 0xef
			for i := range rb {
				sb[i] &^= 0x01 // even bytes: never the odd marker
				rb[i] = unwritten
			}
			r0, _ := b.Irecv(0, rb[:n])
			r1, _ := b.Irecv(0, rb[n:])
			s0, _ := a.Isend(1, sb[:n])
			s1, _ := a.Isend(1, sb[n:])
			landed := -1
			for _, r := range []transports.Request{r0, r1, s0, s1} {
				for !r.Done() {
					if !a.Progress() && !b.Progress() {
						t.Fatal("no progress with messages outstanding")
					}
					if landed < 0 && r0.Done() {
						landed = n - bytes.Count(rb[n:], []byte{unwritten})
					}
				}
			}
			if err := errors.Join(a.Wait(s0, s1), b.Wait(r0, r1)); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(sb, rb) {
				t.Fatal("payload differs")
			}
			// One progress pass of the receiver may also take the
			// fragment that followed the first message's last one.
			switch {
			case streams == 1 && landed > 64:
				t.Errorf("one message at a time, yet %d bytes of the second landed before the first completed", landed)
			case streams > 1 && landed <= 64:
				t.Errorf("%d bytes of the second message landed before the first completed: the sends did not take turns", landed)
			}
		})
	}
}

// Every protocol truncates the same way: the buffer is filled with the
// message's prefix, the receive fails with ErrTruncated, the send succeeds;
// a small Isend's (packed) too.
func TestTruncationIsAnError(t *testing.T) {
	mechanisms := map[string]sm.SingleCopy{
		"copy-in/copy-out": nil,
		"cma-pull":         cma.NewCopier(cma.Params{Pull: true, Threshold: 65}),
		"cma-push":         cma.NewCopier(cma.Params{Pull: false, Threshold: 65}),
	}
	for name, single := range mechanisms {
		for _, tc := range []struct {
			n     int
			isend bool
		}{{50, false}, {500, false}, {50, true}, {500, true}} {
			n := tc.n
			a, b := pair(t, small(2, 2), single)
			src := buffer(t, n)
			fill(src, n)
			both(t, func() error {
				var err error
				if tc.isend {
					var r transports.Request
					if r, err = a.Isend(1, src); err == nil {
						err = a.Wait(r)
					}
				} else {
					err = a.Send(1, src)
				}
				if err != nil {
					return fmt.Errorf("%s %d bytes (isend %v): sender: %w", name, n, tc.isend, err)
				}
				return a.Close()
			}, func() error {
				dst := buffer(t, 10)
				got, err := b.Recv(0, dst)
				if !errors.Is(err, transports.ErrTruncated) || got != 10 || !bytes.Equal(dst, src[:10]) {
					return fmt.Errorf("%s %d bytes (isend %v) into 10: got n=%d err=%v prefix ok=%v", name, n, tc.isend, got, err, bytes.Equal(dst, src[:10]))
				}
				return b.Close()
			})
		}
	}
}

// Messages that arrive before their receive is posted reuse buffers: with
// the collector off in ranks, allocation per early message would grow the
// heap with traffic.
func TestEarlyArrivalsDoNotGrowTheHeap(t *testing.T) {
	a, b := pair(t, sm.DefaultParams(), nil)
	const window, rounds, n = 16, 200, 100 << 10
	sb, rb := buffer(t, n), buffer(t, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	both(t, func() error {
		reqs := make([]transports.Request, window)
		for range rounds {
			for w := range window {
				reqs[w], _ = a.Isend(1, sb)
			}
			if err := a.Wait(reqs...); err != nil {
				return err
			}
			if _, err := a.Recv(1, sb[:0]); err != nil { // the receiver's "done"
				return err
			}
		}
		return nil
	}, func() error {
		for i := range rounds {
			// Park the whole window in the unexpected queue (progress with
			// no receive posted), then receive it.
			for b.EarlyArrivals() < uint64((i+1)*window) {
				b.Progress()
			}
			for range window {
				if _, err := b.Recv(0, rb); err != nil {
					return err
				}
			}
			if err := b.Send(0, rb[:0]); err != nil {
				return err
			}
		}
		return nil
	})
	runtime.ReadMemStats(&after)
	if got := b.EarlyArrivals(); got != window*rounds {
		t.Fatalf("%d messages parked, want %d", got, window*rounds)
	}
	perMessage := float64(after.TotalAlloc-before.TotalAlloc) / (window * rounds)
	if perMessage > n/10 {
		t.Errorf("%.0f bytes allocated per %d-byte message", perMessage, n)
	}
}

func TestParamsValidation(t *testing.T) {
	cases := []struct {
		opts transports.Options
		want string // substring of the error; "" means valid
	}{
		{nil, ""},
		{transports.Options{"sm.depth": "1", "sm.frags": "1"}, ""},
		{transports.Options{"sm.eager": "16K"}, ""},
		{transports.Options{"sm.depth": "0"}, "sm.depth=0"},
		{transports.Options{"sm.cell": "100"}, "sm.cell=100"},
		{transports.Options{"sm.cell": "128", "sm.eager": "200"}, "sm.eager=200"},
		{transports.Options{"sm.frag": "x"}, `sm.frag="x"`},
		{transports.Options{"sm.frags": "0"}, "sm.frags=0"},
		{transports.Options{"sm.copy": "memcpy"}, `sm.copy="memcpy"`},
		{transports.Options{"sm.copy": "movsb"}, ""},
		{transports.Options{"sm.progress": "thread"}, ""},
		{transports.Options{"sm.progress": "interrupt"}, `sm.progress="interrupt"`},
		{transports.Options{"sm.persist": "leak"}, ""},
		{transports.Options{"sm.persist": "keep"}, `sm.persist="keep"`},
		{transports.Options{"sm.frag": "2M", "sm.frags": "4"}, ""}, // the built-in 1M wrap gives way
		{transports.Options{"sm.frag": "2M", "sm.wrap": "1M"}, "sm.wrap=1048576"},
		{transports.Options{"sm.wrap": "1000"}, "sm.wrap=1000"},
		{transports.Options{"sm.wrap": "0"}, ""},
		{transports.Options{"sm.streams": "1"}, ""},
		{transports.Options{"sm.streams": "0"}, "sm.streams=0"},
	}
	for _, c := range cases {
		p, err := sm.ParseParams(c.opts)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.opts, err)
		case c.want != "" && (err == nil || !bytes.Contains([]byte(err.Error()), []byte(c.want))):
			t.Errorf("%v: got %v, want error containing %q", c.opts, err, c.want)
		case c.want == "" && p.EagerLimit > p.CellSize-16:
			t.Errorf("%v: eager %d does not fit cell %d", c.opts, p.EagerLimit, p.CellSize)
		}
	}
}

// A rank's fragment ring is committed as its fragments reach it: nothing
// while it sends only eager messages, one step for a large fragment
// (large ones cycle through the ring's first sm.wrap bytes), the whole
// ring only when a window of medium fragments walks it.
func TestFragmentRingIsCommittedAsItIsUsed(t *testing.T) {
	p := sm.DefaultParams()
	seg, err := sys.MapAnon(p.SegmentBytes(2), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sys.Unmap(seg) })
	pid := os.Getpid()
	var eps [2]*sm.Endpoint
	for r := range eps {
		env := transports.Env{Rank: r, Size: 2, PIDs: []int{pid, pid}, Segment: seg}
		if eps[r], err = sm.New(env, p, nil, "sm"); err != nil {
			t.Fatal(err)
		}
		ep := eps[r]
		t.Cleanup(func() { ep.Abort(errors.New("test over")); ep.Close() })
	}
	ring := seg[:p.RingBytes()] // rank 0's, the first in the segment
	resident := func() int {
		t.Helper()
		n, err := sys.ResidentPages(ring)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	send := func(size, count int) {
		t.Helper()
		src, dst := buffer(t, size), buffer(t, size)
		both(t, func() error {
			for range count {
				if err := eps[0].Send(1, src); err != nil {
					return err
				}
			}
			return nil
		}, func() error {
			for range count {
				if _, err := eps[1].Recv(0, dst); err != nil {
					return err
				}
			}
			return nil
		})
	}
	page := sys.PageSize
	for _, step := range []struct {
		what        string
		size, count int
		want        int // resident pages of the ring afterwards
	}{
		{"at attach", 0, 0, 0},
		{"eager messages only", p.EagerLimit, 200, 0},
		{"large fragments", 1 << 20, 20, (1 << 20) / page},
		{"a window of medium fragments", 16 << 10, 2 * p.RingBytes() / (16 << 10), p.RingBytes() / page},
	} {
		if step.count > 0 {
			send(step.size, step.count)
		}
		if got := resident(); got != step.want {
			t.Errorf("%s: %d pages of rank 0's ring resident, want %d", step.what, got, step.want)
		}
	}
}
