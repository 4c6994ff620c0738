package sweep

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
	"github.com/gotune/gotune/tuner/probe"
	"github.com/gotune/gotune/tuner/store"
)

// A probe that scales with the ranks runs at the ranks per node the
// profile serves, above 3, and its verdict is stored for that count: a
// run for another count does not reuse it. Up to 3 ranks it runs and is
// keyed as before.
func TestProbeAtTheNodesRanks(t *testing.T) {
	var asked []int
	p := &probe.Probe{ID: "HX", ScalesWithRanks: true,
		RunOptions: func(ctx context.Context, _ bool, _ time.Duration, _ transports.Options) probe.Verdict {
			asked = append(asked, probe.RanksFrom(ctx))
			return probe.Verdict{Outcome: probe.Passed, Detail: "ok"}
		}}
	dir := t.TempDir()
	s, err := store.Open(filepath.Join(dir, MeasurementsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, err := store.Open(filepath.Join(dir, "quarantine.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	for _, tc := range []struct {
		ranks  int
		asked  int  // the count the probe was given (0: none)
		stored bool // a verdict for this count is already in the store
	}{
		{16, 16, false},
		{16, 0, true},
		{32, 32, false},
		{2, 0, false},
		{3, 0, true}, // up to 3 ranks the probe runs alike: one verdict
	} {
		asked = nil
		r := &Runner{plan: Quick(), store: s, quarantine: q, ctx: t.Context(), progress: io.Discard, start: time.Now()}
		r.plan.RanksPerNode = tc.ranks
		rec, reused, err := r.probeOnce(p, false, transports.Options{sm.KeyDepth: "64"})
		if err != nil || rec.Outcome != "passed" {
			t.Fatalf("%d ranks: %+v, %v", tc.ranks, rec, err)
		}
		if reused != tc.stored || (!tc.stored && (len(asked) != 1 || asked[0] != tc.asked)) {
			t.Errorf("%d ranks: reused %v, probe asked %v; want reused %v, asked at %d", tc.ranks, reused, asked, tc.stored, tc.asked)
		}
	}
	var keys []string
	for _, rec := range s.Records() {
		keys = append(keys, rec.Key)
	}
	if n := strings.Count(strings.Join(keys, "\n"), ":ranks="); n != 2 {
		t.Errorf("%d verdicts keyed by a rank count, want 2 (16 and 32)", n)
	}
}

// A mended profile (new routes, the same options) is vouched for by the
// run its options already had in this process: the probe does not run
// again, and the verdict says whose run it is. New options run anew.
func TestProbeRunOncePerOptions(t *testing.T) {
	runs := 0
	p := &probe.Probe{ID: "HX",
		RunOptions: func(context.Context, bool, time.Duration, transports.Options) probe.Verdict {
			runs++
			return probe.Verdict{Outcome: probe.Passed, Detail: "ok"}
		}}
	dir := t.TempDir()
	s, err := store.Open(filepath.Join(dir, MeasurementsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, err := store.Open(filepath.Join(dir, "quarantine.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	r := &Runner{plan: Quick(), store: s, quarantine: q, ctx: t.Context(), progress: io.Discard, start: time.Now()}
	opts := transports.Options{sm.KeyDepth: "64"}
	var configs []string
	for i, tc := range []struct {
		routes   transports.Options
		opts     transports.Options
		wantRuns int
		sameAs   int // index of the verdict whose run it is (-1: its own)
	}{
		{transports.Options{"route.0": "sm"}, opts, 1, -1},
		{transports.Options{"route.0": "sm", "route.65536": "cma"}, opts, 1, 0},
		{transports.Options{"route.0": "sm"}, transports.Options{sm.KeyDepth: "32"}, 2, -1},
	} {
		r.routes = tc.routes
		rec, _, err := r.probeOnce(p, false, tc.opts)
		if err != nil || rec.Outcome != "passed" {
			t.Fatalf("verdict %d: %+v, %v", i, rec, err)
		}
		configs = append(configs, rec.Config)
		want := ""
		if tc.sameAs >= 0 {
			want = configs[tc.sameAs]
		}
		if runs != tc.wantRuns || rec.SameRunAs != want || (i > 0 && rec.Config == configs[0]) {
			t.Errorf("verdict %d: probe ran %d times, config %s same run as %q; want %d runs, same run as %q, a config of its own",
				i, runs, rec.Config, rec.SameRunAs, tc.wantRuns, want)
		}
		if !hasPrefix(s, fmt.Sprintf("verdict:HX:false:%s:", rec.Config)) {
			t.Errorf("verdict %d: not stored under its config", i)
		}
	}
}

func hasPrefix(s *store.Store, prefix string) bool {
	for _, rec := range s.Records() {
		if strings.HasPrefix(rec.Key, prefix) {
			return true
		}
	}
	return false
}
