package sm_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// BenchmarkPingPong is the engine's round trip between two goroutines of
// one process (no pinning, so it shows engine overhead, not the machine's
// best latency; use gotune bench for that). ns/op is one round trip;
// allocs/op counts both sides and must stay 0
// (TestMessagePathsAllocateNothing asserts it).
func BenchmarkPingPong(b *testing.B) { pingPong(b, sm.DefaultParams()) }

// BenchmarkPingPongProgressThread is BenchmarkPingPong with the progress
// thread (sm.progress=thread): the owner word on every call.
func BenchmarkPingPongProgressThread(b *testing.B) {
	p := sm.DefaultParams()
	p.Progress = "thread"
	pingPong(b, p)
}

func pingPong(b *testing.B, p sm.Params) {
	for _, n := range []int{8, 64, 1024, 4096, 65536} {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			a, c := pair(b, p, nil)
			sa, sc := buffer(b, n), buffer(b, n)
			b.SetBytes(int64(2 * n))
			testutil.PairPingPong(b, nil, 0, a, c, sa, sc)
		})
	}
}

// BenchmarkSerialPingPong is the engine's own cost of a small message
// with nothing to wait for: one goroutine plays both ranks of a ping-pong
// (a sends, c receives and answers, a receives), so every poll finds its
// message and every line is in this core's cache. ns/op is one round
// trip, that is two messages' Send and Recv: what the blocking path adds
// to the lines' transfers in a real ping-pong (BenchmarkSMBesideFloor in
// bench, gotune bench --floor).
func BenchmarkSerialPingPong(b *testing.B) {
	for _, n := range []int{8, sm.BoxPayload, sm.BoxPayload + 8, 1024} {
		b.Run(fmt.Sprintf("size=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			a, c := pair(b, sm.DefaultParams(), nil)
			sa, sc := buffer(b, n), buffer(b, n)
			b.ResetTimer()
			for range b.N {
				if err := a.Send(1, sa); err != nil {
					b.Fatal(err)
				}
				if _, err := c.Recv(0, sc); err != nil {
					b.Fatal(err)
				}
				if err := c.Send(0, sc); err != nil {
					b.Fatal(err)
				}
				if _, err := a.Recv(1, sa); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStream is one-way throughput through windows of 64 messages, in
// both progress modes. With the thread, "thread" streams before anything
// started its goroutine (an endpoint that has moved only eager messages)
// and "thread-started" after one message above the eager limit: the
// hand-off's cost shows per message at small sizes.
func BenchmarkStream(b *testing.B) {
	for _, mode := range []string{"poll", "thread", "thread-started"} {
		for _, n := range []int{8, 4096, 65536, 1 << 20} {
			b.Run(fmt.Sprintf("progress=%s/size=%d", mode, n), func(b *testing.B) {
				p := sm.DefaultParams()
				p.Progress = strings.TrimSuffix(mode, "-started")
				stream(b, p, n, mode != p.Progress)
			})
		}
	}
}

func stream(b *testing.B, p sm.Params, n int, started bool) {
	a, c := pair(b, p, nil)
	if started {
		large := p.EagerLimit + 1
		sa, sc := buffer(b, large), buffer(b, large)
		both(b, func() error { return a.Send(1, sa) }, func() error { _, err := c.Recv(0, sc); return err })
	}
	streamOn(b, a, c, n)
}

// streamOn streams n-byte messages from a to c in windows of 64.
func streamOn(b *testing.B, a, c *sm.Endpoint, n int) {
	sa, sc := buffer(b, n), buffer(b, n)
	const window = 64
	done := make(chan error)
	go func() {
		reqs := make([]transports.Request, window)
		for i := 0; i < b.N; i += window {
			for w := range min(window, b.N-i) {
				reqs[w], _ = c.Irecv(0, sc)
			}
			if err := c.Wait(reqs[:min(window, b.N-i)]...); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	b.SetBytes(int64(n))
	reqs := make([]transports.Request, window)
	for i := 0; i < b.N; i += window {
		for w := range min(window, b.N-i) {
			reqs[w], _ = a.Isend(1, sa)
		}
		if err := a.Wait(reqs[:min(window, b.N-i)]...); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStreamSingleCopy is BenchmarkStream through a single copy
// within this process, pulled whole by the receiver or split between the
// two sides (cma.mode=split's protocol over memmove): what splitting buys
// when each side has a core to copy on. gotune bench -t cma --opt
// cma.mode=split measures the real one between processes.
func BenchmarkStreamSingleCopy(b *testing.B) {
	for _, route := range []sm.Route{sm.RoutePull, sm.RouteSplit} {
		for _, n := range []int{64 << 10, 256 << 10, 1 << 20} {
			b.Run(fmt.Sprintf("route=%s/size=%d", routeName(route), n), func(b *testing.B) {
				p := sm.DefaultParams()
				a, c := pair(b, p, memCopy{route})
				// A rendezvous first, so that the peer has been pulled
				// from once and the streamed messages split.
				large := p.EagerLimit + 1
				sa, sc := buffer(b, large), buffer(b, large)
				both(b, func() error { return a.Send(1, sa) }, func() error { _, err := c.Recv(0, sc); return err })
				streamOn(b, a, c, n)
			})
		}
	}
}

func routeName(r sm.Route) string {
	if r == sm.RouteSplit {
		return "split"
	}
	return "pull"
}
