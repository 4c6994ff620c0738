package xpmem_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/payload"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/hostmem"
	"github.com/gotune/gotune/transports/transporttest"
	"github.com/gotune/gotune/transports/xpmem"
)

// devices are the devices a test runs on: the fake always, the module's
// when it is loaded (GOTUNE_REQUIRE=xpmem: it must be).
func devices(t *testing.T) []string {
	_, err := xpmem.Probe(nil)
	return transporttest.Devices(t, "xpmem", xpmem.Fake, sys.XPMEMDevice, err)
}

func TestMain(m *testing.M) {
	transporttest.Main(m, map[string]launch.Func{"xpmem-traffic": trafficRank})
}

// scenario is a traffic job: Rounds rounds of every size each way, from
// buffers of a hooked allocator (Fresh: a new buffer per message, freed
// and purged at once: the sender's releases reach the receiver's cache).
type scenario struct {
	Options transports.Options `json:"options"`
	Sizes   []int              `json:"sizes"`
	Rounds  int                `json:"rounds"`
	Fresh   bool               `json:"fresh"`
}

type report struct {
	Stats    xpmem.Stats `json:"stats"`
	Messages int         `json:"messages"`
	Version  uint32      `json:"version"`
}

// key names message msg.
func key(msg int) uint64 { return uint64(msg)<<32 ^ 0xa5 }

func trafficRank(r *launch.Rank) (any, error) {
	s, err := transporttest.Params[scenario](r)
	if err != nil {
		return nil, err
	}
	env := transporttest.Env(r, s.Options)
	t, err := xpmem.New(env)
	if err != nil {
		return nil, err
	}
	if err := xpmem.Check(t, env); err != nil {
		return nil, err
	}
	cfg := hostmem.DefaultConfig()
	cfg.Purge = hostmem.Immediate
	heap, err := hostmem.New(cfg)
	if err != nil {
		return nil, err
	}
	unhook := heap.OnRelease(t.Invalidate)
	peer := transporttest.Peer(r)
	var rep report
	keep := map[int][]byte{}
	buffer := func(n int) ([]byte, error) {
		if s.Fresh {
			return heap.Alloc(n)
		}
		if b, ok := keep[n]; ok {
			return b, nil
		}
		b, err := heap.Alloc(n)
		keep[n] = b
		return b, err
	}
	msg := 0
	for round := range s.Rounds {
		for _, n := range s.Sizes {
			for from := range 2 {
				msg++
				b, err := buffer(n)
				if err != nil {
					return nil, err
				}
				if from == r.ID {
					payload.Fill(b, key(msg))
					if err := t.Send(peer, b); err != nil {
						return nil, fmt.Errorf("round %d, %d bytes: %w", round, n, err)
					}
				} else {
					clear(b)
					got, err := t.Recv(peer, b)
					if err != nil {
						return nil, fmt.Errorf("round %d, %d bytes: %w", round, n, err)
					}
					if k := payload.Check(b, key(msg)); got != n || k >= 0 {
						return nil, fmt.Errorf("payload validation failed: round %d, %d bytes from rank %d: got %d bytes, first difference at byte %d", round, n, from, got, k)
					}
					rep.Messages++
				}
				if s.Fresh {
					// The receive completes once the sender's FIN is in;
					// both free only after the pair's barrier, so a buffer
					// is never released under a copy.
					if err := r.Barrier(); err != nil {
						return nil, err
					}
					if err := heap.Free(b); err != nil {
						return nil, err
					}
				}
			}
		}
		r.Beat()
	}
	rep.Stats, rep.Version = t.Stats(), t.Version()
	if err := r.Barrier(); err != nil { // no rank removes its segment under a peer's copy
		return nil, err
	}
	unhook()
	if err := t.Close(); err != nil {
		return nil, err
	}
	return rep, heap.Close()
}

func run(t *testing.T, s scenario) []report {
	t.Helper()
	seg := transporttest.SharedBytes(t, "xpmem", 2, s.Options)
	return transporttest.Results[report](t, transporttest.Job{Kind: "xpmem-traffic", Params: s, Segment: seg})
}

// Validated messages at every protocol boundary (eager, the single-copy
// threshold, the fragment size, attachment alignment), each way, in both
// modes: the second round finds its attachments in the cache.
func TestTrafficAtEveryBoundary(t *testing.T) {
	const eager, thr = 4096, 32 << 10
	sizes := []int{1, eager - 1, eager, eager + 1, thr - 1, thr, thr + 1, 64<<10 - 1, 64 << 10, 64<<10 + 1, 200 << 10, 1 << 20, 3<<20 + 5}
	for _, dev := range devices(t) {
		for _, mode := range []string{"pull", "push"} {
			t.Run(strings.TrimPrefix(dev, "/dev/")+"_"+mode, func(t *testing.T) {
				o := transports.Options{"xpmem.device": dev, "xpmem.mode": mode, "sm.eager": "4K", "xpmem.threshold": "32K"}
				reps := run(t, scenario{Options: o, Sizes: sizes, Rounds: 2})
				for r, rep := range reps {
					st := rep.Stats
					t.Logf("rank %d: version %#x, %d messages, %+v", r, rep.Version, rep.Messages, st)
					if rep.Messages != 2*len(sizes) {
						t.Errorf("rank %d: %d validated messages, want %d", r, rep.Messages, 2*len(sizes))
					}
					if st.Hits == 0 || st.Misses == 0 {
						t.Errorf("rank %d: cache hits %d, misses %d: a second round must hit", r, st.Hits, st.Misses)
					}
					if rep.Version != 0x26005 && dev == xpmem.Fake {
						t.Errorf("fake version %#x", rep.Version)
					}
				}
			})
		}
	}
}

// Buffers freed (and purged at once) between messages: the sender's
// allocator hook posts release notices, the receiver drops the attachments
// they cover before its next copy, every message still validates, and
// the cache holds no attachment of released memory for long.
func TestInvalidationUnderTraffic(t *testing.T) {
	for _, dev := range devices(t) {
		t.Run(strings.TrimPrefix(dev, "/dev/"), func(t *testing.T) {
			o := transports.Options{"xpmem.device": dev, "xpmem.align": "4K"}
			reps := run(t, scenario{Options: o, Sizes: []int{64 << 10, 96 << 10, 1 << 20}, Rounds: 4, Fresh: true})
			for r, rep := range reps {
				st := rep.Stats
				t.Logf("rank %d: %+v", r, st)
				if st.Posted == 0 || st.Notices == 0 || st.Invalidations == 0 {
					t.Errorf("rank %d: posted %d, notices read %d, invalidations %d: releases must reach the peer's cache", r, st.Posted, st.Notices, st.Invalidations)
				}
				if st.Entries > 3 {
					t.Errorf("rank %d: %d cached attachments at the end: released ranges stay attached", r, st.Entries)
				}
			}
		})
	}
}

// The cache's size bounds what stays attached: 0 attaches and detaches
// for every message, 1 evicts.
func TestCacheSize(t *testing.T) {
	sizes := []int{64 << 10, 512 << 10, 2 << 20}
	for _, c := range []struct {
		cache string
		check func(xpmem.Stats) error
	}{
		{"0", func(s xpmem.Stats) error {
			if s.Hits != 0 || s.Attaches != s.Detaches || s.Attaches != 7 {
				return fmt.Errorf("hits %d, attaches %d, detaches %d: want 0 and one of each per copy (the check's and 6 messages)", s.Hits, s.Attaches, s.Detaches)
			}
			return nil
		}},
		{"1", func(s xpmem.Stats) error {
			if s.Evictions == 0 || s.Entries != 1 {
				return fmt.Errorf("evictions %d, entries %d", s.Evictions, s.Entries)
			}
			return nil
		}},
	} {
		t.Run("cache="+c.cache, func(t *testing.T) {
			o := transports.Options{"xpmem.device": xpmem.Fake, "xpmem.cache": c.cache, "xpmem.align": "4K"}
			for r, rep := range run(t, scenario{Options: o, Sizes: sizes, Rounds: 2}) {
				if err := c.check(rep.Stats); err != nil {
					t.Errorf("rank %d: %v (%+v)", r, err, rep.Stats)
				}
			}
		})
	}
}

func TestMissingDeviceIsNotSupported(t *testing.T) {
	p := t.TempDir() + "/xpmem"
	_, err := xpmem.Probe(transports.Options{"xpmem.device": p})
	if !errors.Is(err, transports.ErrNotSupported) || !strings.Contains(err.Error(), p+" missing") {
		t.Fatalf("got %v, want ErrNotSupported saying %s is missing", err, p)
	}
}

func parse(o transports.Options) (xpmem.Params, error) { return xpmem.ParseParams(o, 4096) }

func TestParseParams(t *testing.T) {
	transporttest.ParseErrors(t, parse, []transporttest.ParseCase{
		{nil, ""},
		{transports.Options{"xpmem.mode": "push", "xpmem.cache": "0", "xpmem.align": "2M", "xpmem.threshold": "16K", "xpmem.device": "fake", "xpmem.hook": "lock"}, ""},
		{transports.Options{"xpmem.mode": "both"}, `xpmem.mode="both"`},
		{transports.Options{"xpmem.threshold": "4096"}, "xpmem.threshold=4096"},
		{transports.Options{"xpmem.cache": "-1"}, `xpmem.cache="-1"`},
		{transports.Options{"xpmem.cache": "many"}, `xpmem.cache="many"`},
		{transports.Options{"xpmem.align": "3K"}, "xpmem.align=3072"},
		{transports.Options{"xpmem.align": "1K"}, "xpmem.align=1024"},
		{transports.Options{"xpmem.device": ""}, "xpmem.device: empty"},
		{transports.Options{"xpmem.hook": "maybe"}, `xpmem.hook="maybe"`},
	})
	if p, _ := parse(nil); !p.Pull || p.Threshold != 4097 || p.Cache != xpmem.DefaultCache || p.Align != xpmem.DefaultAlign || p.Device != sys.XPMEMDevice || p.LockedHook {
		t.Errorf("defaults: %+v", p)
	}
}

// Each documented default is what ParseParams uses without the option.
func TestOptionDefaultsAreTheBuiltIns(t *testing.T) {
	transporttest.DefaultsAreBuiltIns(t, xpmem.Options, false, parse)
}
