package sm_test

import (
	"fmt"
	"testing"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
	"github.com/gotune/gotune/transports/transporttest"
)

var smallestFIFO = transports.Options{"sm.depth": "1", "sm.frags": "1", "sm.cell": "128", "sm.eager": "64", "sm.frag": "64"}

func TestMain(m *testing.M) {
	transporttest.Main(m, map[string]launch.Func{"head-to-head": headToHeadRank, "shared-ring": sharedRingRank})
}

// headToHeadRank: both ranks send a burst of every protocol before
// receiving anything.
func headToHeadRank(r *launch.Rank) (any, error) {
	p, err := sm.ParseParams(smallestFIFO)
	if err != nil {
		return nil, err
	}
	ep, err := sm.New(transporttest.Env(r, nil), p, nil, "sm")
	if err != nil {
		return nil, err
	}
	peer := transporttest.Peer(r)
	sizes := []int{0, 8, 64, 65, 1000}
	buf, err := sys.MapAnon(1000, true)
	if err != nil {
		return nil, err
	}
	const burst = 300
	for i := range burst {
		n := sizes[i%len(sizes)]
		transporttest.Pattern(buf[:n], i+r.ID*7919)
		if err := ep.Send(peer, buf[:n]); err != nil {
			return nil, err
		}
	}
	for i := range burst {
		n := sizes[i%len(sizes)]
		got, err := ep.Recv(peer, buf)
		if err != nil {
			return nil, err
		}
		if got != n {
			return nil, fmt.Errorf("message %d from rank %d: %d bytes, want %d", i, peer, got, n)
		}
		if err := transporttest.Verify(buf[:n], i+peer*7919, fmt.Sprintf("message %d from rank %d", i, peer)); err != nil {
			return nil, err
		}
	}
	return burst, ep.Close()
}

func TestHeadToHeadAcrossProcesses(t *testing.T) {
	p, err := sm.ParseParams(smallestFIFO)
	if err != nil {
		t.Fatal(err)
	}
	for r, n := range transporttest.Results[int](t, transporttest.Job{Kind: "head-to-head", Segment: p.SegmentBytes(2)}) {
		if n != 300 {
			t.Errorf("rank %d: %d", r, n)
		}
	}
}

// sharedRingOpts give each rank a fragment ring smaller than one of the
// messages it sends every peer, and a shallow FIFO.
var sharedRingOpts = transports.Options{"sm.depth": "4", "sm.frag": "4K", "sm.frags": "4"}

// sharedRingSizes are eager, one-fragment and many-fragment messages (40 KB
// through a 16 KiB ring).
var sharedRingSizes = []int{100, 3000, 40000}

// sharedRingRank: every rank posts sends of every size to every peer at
// once, then receives them one peer at a time, starting with the next rank:
// each rank's ring holds fragments for peers that do not receive them yet,
// so its other peers' messages get ring space only as those are parked.
func sharedRingRank(r *launch.Rank) (any, error) {
	p, err := sm.ParseParams(sharedRingOpts)
	if err != nil {
		return nil, err
	}
	ep, err := sm.New(transporttest.Env(r, nil), p, nil, "sm")
	if err != nil {
		return nil, err
	}
	n, most := r.Size, sharedRingSizes[len(sharedRingSizes)-1]
	seed := func(from, to, i int) int { return (from*n+to)*16 + i }
	var sends []transports.Request
	var bufs [][]byte
	for k := 1; k < n; k++ {
		to := (r.ID + n - k) % n // the previous rank first: it receives from us last
		for i, size := range sharedRingSizes {
			b, err := sys.MapAnon(size, true)
			if err != nil {
				return nil, err
			}
			transporttest.Pattern(b, seed(r.ID, to, i))
			q, err := ep.Isend(to, b)
			if err != nil {
				return nil, err
			}
			sends, bufs = append(sends, q), append(bufs, b)
		}
	}
	in, err := sys.MapAnon(most, true)
	if err != nil {
		return nil, err
	}
	got := 0
	for k := 1; k < n; k++ {
		from := (r.ID + k) % n
		for i, size := range sharedRingSizes {
			m, err := ep.Recv(from, in)
			if err != nil {
				return nil, err
			}
			if m != size {
				return nil, fmt.Errorf("message %d from rank %d: %d bytes, want %d", i, from, m, size)
			}
			if err := transporttest.Verify(in[:m], seed(from, r.ID, i), fmt.Sprintf("message %d from rank %d", i, from)); err != nil {
				return nil, err
			}
			got++
		}
	}
	for _, q := range sends {
		if err := ep.Wait(q); err != nil {
			return nil, err
		}
	}
	for _, b := range bufs {
		sys.Unmap(b)
	}
	return got, ep.Close()
}

// One fragment ring per rank serves all its peers: with every peer's
// messages posted at once and received one peer at a time, nothing waits
// for ring space forever, and every byte arrives.
func TestRingSharedByPeersAcrossProcesses(t *testing.T) {
	p, err := sm.ParseParams(sharedRingOpts)
	if err != nil {
		t.Fatal(err)
	}
	const ranks = 4
	for r, n := range transporttest.Results[int](t, transporttest.Job{Kind: "shared-ring", Size: ranks, Segment: p.SegmentBytes(ranks)}) {
		if want := (ranks - 1) * len(sharedRingSizes); n != want {
			t.Errorf("rank %d received %d messages, want %d", r, n, want)
		}
	}
}
