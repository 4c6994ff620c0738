package bench_test

import (
	"strings"
	"testing"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/hostmem"
	"github.com/gotune/gotune/transports/sm"
)

// The alloc pattern in real rank processes, validated, under every purge
// policy and with huge pages, over both transports.
func TestAllocPatternAcrossProcesses(t *testing.T) {
	configs := []transports.Options{
		{hostmem.KeyPurge: "immediate"},
		{hostmem.KeyPurge: "delayed", hostmem.KeyDelay: "3"},
		{hostmem.KeyPurge: "never", hostmem.KeyCache: "512K"}, // small cache: evictions and unmaps
		{hostmem.KeyTHP: "on", hostmem.KeyPurge: "immediate"},
	}
	for _, tr := range []string{"sm", "cma"} {
		for _, o := range configs {
			t.Run(tr+"/"+o[hostmem.KeyPurge]+"/"+o[hostmem.KeyTHP], func(t *testing.T) {
				sizes := []int{8, 64 << 10, 256 << 10}
				if o[hostmem.KeyTHP] == "on" {
					sizes = []int{8, 2 << 20} // huge-page classes start at 2 MiB
				}
				spec := bench.Spec{Transport: tr, Options: o, Pattern: bench.AllocChurn, Sizes: sizes,
					Reps: 2, Iters: 4, Warmup: 1, Window: 4, Validate: true}
				res := mustRun(t, spec)
				checkPoints(t, spec, res.Points)
			})
		}
	}
}

func TestAllocatorOptionsAreCheckedForEveryTransport(t *testing.T) {
	cases := []struct {
		opts transports.Options
		err  string
	}{
		{transports.Options{hostmem.KeyPurge: "never", hostmem.KeyCache: "64M", hostmem.KeyTHP: "on", hostmem.KeyEntries: "heap"}, ""},
		{transports.Options{hostmem.KeyPurge: "never", sm.KeyDepth: "8"}, ""},
		{transports.Options{"alloc.cahce": "64M"}, `"alloc.cahce"`},
		{transports.Options{hostmem.KeyPurge: "later"}, `alloc.purge="later"`},
		{transports.Options{hostmem.KeyPurge: "never", "sm.dpeth": "8"}, `"sm.dpeth"`},
	}
	for _, tr := range []string{"sm", "cma"} {
		for _, c := range cases {
			spec := bench.Spec{Transport: tr, Options: c.opts, Pattern: bench.AllocChurn, Sizes: []int{8}}
			err := spec.Normalize()
			switch {
			case c.err == "" && err != nil:
				t.Errorf("%s %v: %v", tr, c.opts, err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("%s %v: got %v, want an error containing %s", tr, c.opts, err, c.err)
			}
		}
	}
	if it, wu := bench.DefaultIters(bench.AllocChurn, 1<<20); it != 20 || wu != 2 {
		t.Errorf("alloc defaults at 1 MiB: %d/%d, want bw's 20/2", it, wu)
	}
}
