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
	transporttest.Main(m, map[string]launch.Func{"head-to-head": headToHeadRank})
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
