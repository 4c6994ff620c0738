package probe

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
	"github.com/gotune/gotune/transports/hostmem"
	"github.com/gotune/gotune/transports/sm"
)

// The safe form passes; the unsafe form deadlocks in the registration
// cache and the watchdog (not an outer timeout) catches it, with every
// stalled rank's stacks showing the hook blocked on the cache lock inside
// the table's growth.
func TestH1SafePassesUnsafeIsCaught(t *testing.T) {
	p, ctx := passesSafe(t, "h1", time.Second, "regcache.entries=heap, alloc.purge=immediate") // the deadline stretched to h1MinStall
	v := p.Run(ctx, true, 500*time.Millisecond)
	caught(t, "unsafe H1", v, "hang", "regcache.entries=hooked")
	stacksShow(t, "unsafe H1", v, "sync.(*Mutex).Lock", "hostmem.(*RegCache).invalidateNow", "hostmem.(*Allocator).Free", "hostmem.(*RegCache).growLocked")
}

// The same unsafe cache with an allocator that never purges (and a cache
// that never overflows) runs through: no release ever fires inside the
// locked growth. That is how the bug hid behind allocator settings.
func TestH1UnsafeCacheWithoutPurgeRunsThrough(t *testing.T) {
	o := h1Options(nil, true)
	o[hostmem.KeyPurge] = hostmem.Never.String() // past H1's stress setting, on purpose
	sp, err := sm.ParseParams(o)
	if err != nil {
		t.Fatal(err)
	}
	params, _ := json.Marshal(h1Params{Options: o, Iterations: 8, Window: h1Window})
	out, err := launch.Run(context.Background(), launch.Job{Kind: h1Kind, Size: 2, SegmentBytes: sp.SegmentBytes(2),
		Params: params, Stall: h1MinStall}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		var rep h1Report
		if err := json.Unmarshal(out[r], &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Reg.Grows == 0 || rep.Alloc.Purges != 0 || rep.Messages != 8*h1Window {
			t.Errorf("rank %d: %+v: want the table grown, no purges, every message", r, rep)
		}
	}
}

// A candidate configuration runs under H1's stress settings: its purge
// policy is overridden, its other options kept.
func TestH1OptionsOverlay(t *testing.T) {
	cand := transports.Options{hostmem.KeyPurge: "never", hostmem.KeyCache: "8M", cma.KeyMode: "push"}
	for _, unsafe := range []bool{false, true} {
		o := h1Options(cand, unsafe)
		want := map[string]string{hostmem.KeyPurge: "immediate", hostmem.KeyCache: "8M", cma.KeyMode: "push", hostmem.KeyEntries: "heap"}
		if unsafe {
			want[hostmem.KeyEntries] = "hooked"
		}
		for k, w := range want {
			if o[k] != w {
				t.Errorf("unsafe=%v: %s=%q, want %q", unsafe, k, o[k], w)
			}
		}
	}
	if cand[hostmem.KeyPurge] != "never" {
		t.Error("h1Options changed the candidate's options")
	}
}
