package sm_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

var smallestFIFO = transports.Options{"sm.depth": "1", "sm.frags": "1", "sm.cell": "128", "sm.eager": "64", "sm.frag": "64"}

func TestMain(m *testing.M) {
	// Both ranks send a burst of every protocol before receiving anything.
	launch.Register("head-to-head", func(r *launch.Rank) (any, error) {
		p, err := sm.ParseParams(smallestFIFO)
		if err != nil {
			return nil, err
		}
		ep, err := sm.New(transports.Env{Rank: r.ID, Size: r.Size, PIDs: r.PIDs, Segment: r.Segment}, p, nil, "sm")
		if err != nil {
			return nil, err
		}
		peer := 1 - r.ID
		sizes := []int{0, 8, 64, 65, 1000}
		buf, err := sys.MapAnon(1000, true)
		if err != nil {
			return nil, err
		}
		const burst = 300
		for i := range burst {
			n := sizes[i%len(sizes)]
			fill(buf[:n], i+r.ID*7919)
			if err := ep.Send(peer, buf[:n]); err != nil {
				return nil, err
			}
		}
		want := make([]byte, 1000)
		for i := range burst {
			n := sizes[i%len(sizes)]
			got, err := ep.Recv(peer, buf)
			if err != nil {
				return nil, err
			}
			fill(want[:n], i+peer*7919)
			if got != n || !bytes.Equal(buf[:n], want[:n]) {
				return nil, fmt.Errorf("message %d from rank %d: %d bytes, want %d, or content differs", i, peer, got, n)
			}
		}
		return burst, ep.Close()
	})
	launch.MaybeRunRank()
	os.Exit(m.Run())
}

func TestHeadToHeadAcrossProcesses(t *testing.T) {
	p, err := sm.ParseParams(smallestFIFO)
	if err != nil {
		t.Fatal(err)
	}
	res, err := launch.Run(context.Background(), launch.Job{Kind: "head-to-head", Size: 2, SegmentBytes: p.SegmentBytes(2)}, launch.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	for r, raw := range res {
		if string(raw) != "300" {
			t.Errorf("rank %d: %s", r, raw)
		}
	}
}
