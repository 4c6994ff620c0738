package bench_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// Alternates run side by side in one pair, each through its own
// transport and options, and each gets validated points of every size.
func TestAlternatesShareOnePair(t *testing.T) {
	alts := []bench.Alternate{
		{Name: "sm", Transport: "sm"},
		{Name: "cma", Transport: "cma"},
		{Name: "sm-deep", Transport: "sm", Options: transports.Options{sm.KeyDepth: "128", sm.KeyProgress: "thread"}},
	}
	for _, pat := range []bench.Pattern{bench.Bandwidth, bench.Latency, bench.BiBandwidth} {
		spec := bench.Spec{Alternates: alts, Pattern: pat, Sizes: []int{8, 8192, 1 << 20}, Reps: 3, Iters: 5, Warmup: 1, Window: 4, Validate: true, Settle: 4096}
		res := mustRun(t, spec)
		if len(res.Points) != 0 || len(res.Alternates) != len(alts) {
			t.Fatalf("%s: %d points and %d alternates, want 0 and %d", pat, len(res.Points), len(res.Alternates), len(alts))
		}
		for i, pts := range res.Alternates {
			if len(pts) != len(spec.Sizes) {
				t.Fatalf("%s: alternate %s: %d points, want %d", pat, alts[i].Name, len(pts), len(spec.Sizes))
			}
			for k, p := range pts {
				if p.Size != spec.Sizes[k] || len(p.Samples) != spec.Reps || p.Median <= 0 || !p.Validated {
					t.Errorf("%s: alternate %s size %d: %+v", pat, alts[i].Name, spec.Sizes[k], p)
				}
			}
		}
	}
}

// A broken alternate fails the run, named; its healthy neighbour alone
// runs through.
func TestAlternateFailuresNameTheAlternate(t *testing.T) {
	spec := bench.Spec{Alternates: []bench.Alternate{{Name: "good", Transport: "sm"}, {Name: "broken", Transport: "sm-corrupt"}},
		Pattern: bench.Bandwidth, Sizes: []int{4096}, Reps: 2, Iters: 4, Warmup: 1, Window: 4, Validate: true}
	_, err := bench.Run(context.Background(), spec, 0, launch.Hooks{})
	if err == nil || !strings.Contains(err.Error(), "alternate broken") || !strings.Contains(err.Error(), "payload validation failed") {
		t.Fatalf("got %v, want the broken alternate's validation failure", err)
	}
	spec.Alternates = spec.Alternates[:1]
	mustRun(t, spec)
}

func TestAlternateSpecErrors(t *testing.T) {
	two := []bench.Alternate{{Name: "a", Transport: "sm"}, {Name: "b", Transport: "cma"}}
	for _, tc := range []struct {
		spec bench.Spec
		want string
	}{
		{bench.Spec{Alternates: []bench.Alternate{{Name: "a", Transport: "sm"}, {Name: "a", Transport: "cma"}}, Pattern: bench.Bandwidth, Sizes: []int{8}}, `name "a"`},
		{bench.Spec{Alternates: []bench.Alternate{{Transport: "sm"}}, Pattern: bench.Bandwidth, Sizes: []int{8}}, `name ""`},
		{bench.Spec{Alternates: []bench.Alternate{{Name: "x", Transport: "nope"}}, Pattern: bench.Bandwidth, Sizes: []int{8}}, `alternate x: unknown transport "nope"`},
		{bench.Spec{Alternates: []bench.Alternate{{Name: "x", Transport: "sm", Options: transports.Options{"sm.dpeth": "4"}}}, Pattern: bench.Bandwidth, Sizes: []int{8}}, `alternate x: `},
		{bench.Spec{Alternates: two, Pattern: bench.AllToAll, Ranks: 4, Sizes: []int{8}}, "only a pair's patterns"},
		{bench.Spec{Alternates: two, Pattern: bench.Bandwidth, Sizes: []int{8}, Nodes: 2}, "one node only"},
		{bench.Spec{Alternates: two, Transport: "cma", Pattern: bench.Bandwidth, Sizes: []int{8}}, "not the first alternate's"},
	} {
		if err := tc.spec.Normalize(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want an error with %q", tc.spec.Alternates, err, tc.want)
		}
	}
}
