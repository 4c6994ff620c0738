package ib

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/hostmem"
	"github.com/gotune/gotune/transports/transporttest"
)

type scenario struct {
	Options transports.Options `json:"options,omitempty"`
	Unsafe  bool               `json:"unsafe,omitempty"` // regcache: keep stale registrations
}

// run starts size ranks of kind; no RDMA device skips the test (a failure
// when GOTUNE_REQUIRE names rdma).
func run(t *testing.T, kind string, size int, s scenario) (launch.Result, error) {
	t.Helper()
	return transporttest.Start(t, transporttest.Job{Kind: kind, Size: size, Params: s, Stall: 2 * time.Minute, Needs: "rdma"})
}

// results runs the job and decodes what each rank returns as a T.
func results[T any](t *testing.T, kind string, size int, s scenario) []T {
	t.Helper()
	res, err := run(t, kind, size, s)
	if err != nil {
		t.Fatal(err)
	}
	return transporttest.Decode[T](t, res)
}

func open(r *launch.Rank) (*Transport, scenario, error) {
	return transporttest.OpenScenario[*Transport](r, "ib", func(s scenario) transports.Env { return transporttest.Env(r, s.Options) })
}

func TestMain(m *testing.M) {
	transporttest.Main(m, map[string]launch.Func{
		"ib-exchange": exchangeRank,
		"ib-regcache": regcacheRank,
		"ib-alltoall": alltoallRank,
	})
}

type exchangeReport struct {
	Device string   `json:"device"`
	Reg    RegStats `json:"reg"`
}

// exchangeRank: both ranks send every size across the eager limit and
// rendezvous both ways before any receive is posted (unexpected eager
// messages and requests to send), then check every byte; then a stream of
// small messages over few credits, truncation at the eager and rendezvous
// sizes, and one more message to prove the pair is still in step.
func exchangeRank(r *launch.Rank) (any, error) {
	t, _, err := open(r)
	if err != nil {
		return nil, err
	}
	e := t.params.Eager
	sizes := []int{0, 1, max(e-1, 0), e, e + 1, 300000, 2 << 20}
	peer := transporttest.Peer(r)
	m, err := transporttest.NewMessages(sizes)
	if err != nil {
		return nil, err
	}
	sbuf, rbuf := m.Send, m.Recv
	m.Fill(func(i int) int { return i + 10*r.ID })
	var eager, rest []transports.Request
	for i, n := range sizes {
		q, err := t.Isend(peer, m.Out(i))
		if err != nil {
			return nil, err
		}
		if n <= e {
			eager = append(eager, q)
		} else {
			rest = append(rest, q)
		}
	}
	// Eager sends complete once posted: with few credits only after the
	// peer, waiting for its own, has taken the first ones out of its
	// slots as unexpected messages.
	if err := t.Wait(eager...); err != nil {
		return nil, err
	}
	for i := range sizes {
		q, err := t.Irecv(peer, m.In(i))
		if err != nil {
			return nil, err
		}
		rest = append(rest, q)
	}
	if err := t.Wait(rest...); err != nil {
		return nil, err
	}
	if err := m.Verify(func(i int) int { return i + 10*peer }, peer); err != nil {
		return nil, err
	}
	// A stream of 100 messages one way, receives posted as they go.
	for i := 0; i < 100; i++ {
		n := 1 + (i*977)%max(e, 1)
		if r.ID == 0 {
			transporttest.Pattern(sbuf[:n], 1000+i)
			if err := t.Send(peer, sbuf[:n]); err != nil {
				return nil, err
			}
		} else {
			got, err := t.Recv(peer, rbuf[:n])
			if err != nil {
				return nil, err
			}
			if got != n {
				return nil, fmt.Errorf("stream message %d: %d bytes, want %d", i, got, n)
			}
			if err := transporttest.Verify(rbuf[:n], 1000+i, fmt.Sprintf("stream message %d", i)); err != nil {
				return nil, err
			}
		}
	}
	// Truncation: eager, eager+1 into eager, and rendezvous into 10 bytes;
	// the part that fits arrives intact.
	for k, c := range [][2]int{{100, 10}, {e + 1, e}, {1 << 20, 10}} {
		if err := transporttest.Truncate(t, r.ID, sbuf, rbuf, c[0], c[1], 2000+k); err != nil {
			return nil, err
		}
	}
	if err := transporttest.InStep(t, peer, sbuf, rbuf); err != nil {
		return nil, err
	}
	rep := exchangeReport{Device: t.Device(), Reg: t.RegStats()}
	return rep, t.Close()
}

func TestExchange(t *testing.T) {
	for _, opts := range []transports.Options{
		{"ib.rndv": "read", "ib.wait": "poll"},
		{"ib.rndv": "write", "ib.wait": "event"},
		{"ib.rndv": "read", "ib.wait": "event", "ib.credits": "2", "ib.depth": "2"},
		{"ib.rndv": "write", "ib.credits": "1", "ib.eager": "0"},
		{"ib.rndv": "write", "ib.mtu": "256", "ib.eager": "64K", "ib.credits": "4"},
	} {
		t.Run(fmt.Sprint(opts), func(t *testing.T) {
			rep := results[exchangeReport](t, "ib-exchange", 2, scenario{Options: opts})[0]
			t.Logf("%s, registrations %+v", rep.Device, rep.Reg)
			if rep.Reg.Misses == 0 {
				t.Errorf("no rendezvous registered anything: %+v", rep.Reg)
			}
		})
	}
}

type regReport struct {
	Reg      RegStats      `json:"reg"`
	Alloc    hostmem.Stats `json:"alloc"`
	Messages int           `json:"messages"`
}

// regcacheRank: every iteration takes fresh rendezvous-size buffers from
// an allocator that purges at once (MADV_DONTNEED: the next use of the
// same addresses faults in new pages) and hooked to the transport's
// registration cache, exchanges validated payloads both ways, and frees
// them. A stale registration would move the old pages' bytes.
func regcacheRank(r *launch.Rank) (any, error) {
	t, s, err := open(r)
	if err != nil {
		return nil, err
	}
	t.reg.cache.SetKeepStale(s.Unsafe)
	cfg := hostmem.DefaultConfig()
	cfg.Purge = hostmem.Immediate
	heap, err := hostmem.New(cfg)
	if err != nil {
		return nil, err
	}
	defer heap.OnRelease(t.Invalidate)()
	sizes := []int{64 << 10, 200 << 10, 1 << 20}
	peer := transporttest.Peer(r)
	msgs := 0
	for i := 0; i < 12; i++ {
		n := sizes[i%len(sizes)]
		sb, err := heap.Alloc(n)
		if err != nil {
			return nil, err
		}
		rb, err := heap.Alloc(n)
		if err != nil {
			return nil, err
		}
		transporttest.Pattern(sb[:n], 100*i+r.ID)
		s, err := t.Isend(peer, sb[:n])
		if err != nil {
			return nil, err
		}
		q, err := t.Irecv(peer, rb[:n])
		if err != nil {
			return nil, err
		}
		if err := t.Wait(s, q); err != nil {
			return nil, err
		}
		if err := transporttest.Verify(rb[:n], 100*i+peer, fmt.Sprintf("iteration %d from rank %d", i, peer)); err != nil {
			return nil, err
		}
		msgs++
		if err := heap.Free(sb); err != nil {
			return nil, err
		}
		if err := heap.Free(rb); err != nil {
			return nil, err
		}
		if err := r.Barrier(); err != nil { // both ranks' buffers released before either reuses its own
			return nil, err
		}
	}
	rep := regReport{Reg: t.RegStats(), Alloc: heap.Stats(), Messages: msgs}
	return rep, t.Close()
}

// The registration cache is invalidated under traffic by the allocator's
// release hook; its unsafe twin (invalidations ignored) must be caught by
// the payload check.
func TestRegistrationCacheInvalidatedUnderTraffic(t *testing.T) {
	for _, rndv := range []string{"read", "write"} {
		t.Run(rndv, func(t *testing.T) {
			opts := transports.Options{"ib.rndv": rndv}
			rep := results[regReport](t, "ib-regcache", 2, scenario{Options: opts})[0]
			t.Logf("%+v", rep)
			if rep.Reg.Invalidations == 0 || rep.Reg.Misses < 12 {
				t.Errorf("fresh buffers every iteration, but the cache saw %+v", rep.Reg)
			}
			_, err := run(t, "ib-regcache", 2, scenario{Options: opts, Unsafe: true})
			if err == nil || !strings.Contains(err.Error(), "payload differs") {
				t.Fatalf("stale registrations went unnoticed: %v", err)
			}
			t.Logf("unsafe twin caught: %v", err)
		})
	}
}

// alltoallRank: three ranks, a queue pair per peer; each sends every other
// rank an eager and two rendezvous messages, receives posted first.
func alltoallRank(r *launch.Rank) (any, error) {
	t, _, err := open(r)
	if err != nil {
		return nil, err
	}
	e := t.params.Eager
	sizes := []int{e, e + 1, 100000}
	stride := sys.RoundUp(100000+e+1, 64)
	buf, err := sys.MapAnon(2*r.Size*len(sizes)*stride, true)
	if err != nil {
		return nil, err
	}
	at := func(p, k, dir, n int) []byte { return buf[((p*len(sizes)+k)*2+dir)*stride:][:n] }
	var reqs []transports.Request
	for p := 0; p < r.Size; p++ {
		for k, n := range sizes {
			if p == r.ID {
				continue
			}
			q, err := t.Irecv(p, at(p, k, 1, n))
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, q)
			s := at(p, k, 0, n)
			transporttest.Pattern(s, 10*r.ID+p+100*k)
			if q, err = t.Isend(p, s); err != nil {
				return nil, err
			}
			reqs = append(reqs, q)
		}
	}
	if err := t.Wait(reqs...); err != nil {
		return nil, err
	}
	for p := 0; p < r.Size; p++ {
		for k, n := range sizes {
			if p == r.ID {
				continue
			}
			if err := transporttest.Verify(at(p, k, 1, n), 10*p+r.ID+100*k, fmt.Sprintf("message %d from rank %d", k, p)); err != nil {
				return nil, err
			}
		}
	}
	return t.Device(), t.Close()
}

func TestThreeRanks(t *testing.T) {
	if _, err := run(t, "ib-alltoall", 3, scenario{}); err != nil {
		t.Fatal(err)
	}
}
