package sweep

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
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
	s, q := probeStores(t)
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
// again, and the verdict says whose run it is, with no time of its own.
// New options, another rank count or other versions run anew.
func TestProbeRunOncePerOptions(t *testing.T) {
	runs := 0
	p := &probe.Probe{ID: "HX", ScalesWithRanks: true,
		RunOptions: func(context.Context, bool, time.Duration, transports.Options) probe.Verdict {
			runs++
			return probe.Verdict{Outcome: probe.Passed, Detail: "ok", Duration: time.Second}
		}}
	s, q := probeStores(t)
	r := &Runner{plan: Quick(), store: s, quarantine: q, ctx: t.Context(), progress: io.Discard, start: time.Now()}
	r.plan.RanksPerNode = 2
	opts := transports.Options{sm.KeyDepth: "64"}
	var configs []string
	for _, tc := range []struct {
		name     string
		routes   string
		opts     transports.Options
		ranks    int
		gotune   string
		wantRuns int
		sameAs   int // index of the verdict whose run it is (-1: its own)
	}{
		{"first", "sm", opts, 2, "v1", 1, -1},
		{"new routes", "sm,cma", opts, 2, "v1", 1, 0},
		{"new options", "sm", transports.Options{sm.KeyDepth: "32"}, 2, "v1", 2, -1},
		{"another rank count", "sm,cma,sm", opts, 16, "v1", 3, -1},
		{"other versions", "sm,xpmem", opts, 2, "v2", 4, -1},
	} {
		r.routes = transports.Options{"route": tc.routes}
		r.plan.RanksPerNode = tc.ranks
		r.meta.Provenance.Gotune = tc.gotune
		rec, _, err := r.probeOnce(p, false, tc.opts)
		if err != nil || rec.Outcome != "passed" {
			t.Fatalf("%s: %+v, %v", tc.name, rec, err)
		}
		if slices.Contains(configs, rec.Config) {
			t.Errorf("%s: config %s, an earlier verdict's", tc.name, rec.Config)
		}
		configs = append(configs, rec.Config)
		want, wantSec := "", 1.0
		if tc.sameAs >= 0 {
			want, wantSec = configs[tc.sameAs], 0
		}
		if runs != tc.wantRuns || rec.SameRunAs != want || rec.Seconds != wantSec {
			t.Errorf("%s: probe ran %d times, config %s same run as %q, %.0f s; want %d runs, same run as %q, %.0f s",
				tc.name, runs, rec.Config, rec.SameRunAs, rec.Seconds, tc.wantRuns, want, wantSec)
		}
		if !hasPrefix(s, fmt.Sprintf("verdict:HX:false:%s:", rec.Config)) {
			t.Errorf("%s: not stored under its config", tc.name)
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

// probeStores are a run's store and a host's quarantine store for probe
// verdicts, closed when the test ends.
func probeStores(t *testing.T) (run, quarantine *store.Store) {
	t.Helper()
	dir := t.TempDir()
	var err error
	if run, err = store.Open(filepath.Join(dir, MeasurementsFile)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { run.Close() })
	if quarantine, err = store.Open(filepath.Join(dir, "quarantine.jsonl")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { quarantine.Close() })
	return run, quarantine
}
