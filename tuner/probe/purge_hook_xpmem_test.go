package probe

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/xpmem"
)

// H1X on the fake device (everything but the module) and, where it is
// loaded, on /dev/xpmem: the safe form passes with the stress visible in
// its counters; the unsafe form hangs, caught by the watchdog, with the
// stalled rank's stacks showing the hook blocked on the cache lock inside
// the table's growth.
func TestH1XSafePassesUnsafeIsCaught(t *testing.T) {
	devs := []string{xpmem.Fake}
	if _, err := xpmem.Probe(nil); err == nil {
		devs = append(devs, "/dev/xpmem")
	} else if testutil.Required("xpmem") {
		t.Fatalf("xpmem required by GOTUNE_REQUIRE but unavailable: %v", err)
	}
	p, err := Lookup("h1x")
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range devs {
		t.Run(strings.TrimPrefix(dev, "/dev/"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			o := transports.Options{xpmem.KeyDevice: dev}
			safe := p.RunOptions(ctx, false, time.Second, o)
			t.Log(safe.Line())
			if safe.Outcome != Passed || !strings.Contains(safe.Detail, "xpmem.hook=queue") {
				t.Fatalf("safe H1X: %s", safe.Line())
			}
			v := p.RunOptions(ctx, true, 500*time.Millisecond, o)
			t.Log(v.Line())
			if v.Outcome != HazardDetected || !strings.Contains(v.Detail, "hang") || !strings.Contains(v.Detail, "xpmem.hook=lock") {
				t.Fatalf("unsafe H1X: %s", v.Line())
			}
			found := false
			for _, s := range v.Stacks {
				if strings.Contains(s, "sync.(*Mutex).Lock") && strings.Contains(s, "xpmem.(*Transport).Invalidate") &&
					strings.Contains(s, "hostmem.(*Allocator).Free") && strings.Contains(s, "xpmem.(*cache).growLocked") {
					found = true
				}
			}
			if !found {
				t.Errorf("no stalled rank's stacks show Invalidate blocked on the cache lock under growLocked's Free: %v", v.Stacks)
			}
		})
	}
}

// Without the module, the probe says why it cannot run.
func TestH1XWithoutDeviceFails(t *testing.T) {
	p, err := Lookup("H1X")
	if err != nil {
		t.Fatal(err)
	}
	missing := t.TempDir() + "/xpmem"
	v := p.RunOptions(context.Background(), false, time.Second, transports.Options{xpmem.KeyDevice: missing})
	if v.Outcome != ProbeFailed || !strings.Contains(v.Detail, missing+" missing") {
		t.Fatalf("got %s", v.Line())
	}
}
