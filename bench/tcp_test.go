package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/tcp"
)

// transports/tcp's patterns: the transport's own tests may not import
// bench (imports point down), so its bench.Run coverage lives here.

// Every pattern, validated byte for byte, at eager and rendezvous sizes
// (either side of tcp.eager, and striped ones), through real rank processes.
func TestTCPPatternsValidated(t *testing.T) {
	sizes := []int{0, 8, 4096, 64 << 10, 64<<10 + 1, 1 << 20, 3<<20 + 5}
	for _, c := range []struct {
		name     string
		opts     transports.Options
		patterns []bench.Pattern
	}{
		{"defaults", nil, bench.Patterns},
		{"conns=4", transports.Options{tcp.KeyConns: "4"}, bench.Patterns},
		{"zerocopy=64K", transports.Options{tcp.KeyZeroCopy: "64K"}, []bench.Pattern{bench.Latency, bench.Bandwidth, bench.BiBandwidth}},
		{"nodelay=off", transports.Options{tcp.KeyNoDelay: "off"}, []bench.Pattern{bench.Latency, bench.Bandwidth, bench.MsgRate}},
		{"eager=1K,conns=3,bufs", transports.Options{tcp.KeyEager: "1K", tcp.KeyConns: "3", tcp.KeySndBuf: "256K", tcp.KeyRcvBuf: "256K"}, []bench.Pattern{bench.Bandwidth, bench.BiBandwidth}},
	} {
		for _, pat := range c.patterns {
			t.Run(c.name+"/"+string(pat), func(t *testing.T) {
				spec := bench.Spec{Transport: "tcp", Options: c.opts, Pattern: pat, Sizes: sizes, Reps: 2, Iters: 4, Warmup: 1, Window: 8, Validate: true}
				if pat == bench.AllocChurn {
					spec.Sizes = []int{8, 64 << 10, 1 << 20}
				}
				res, err := bench.Run(context.Background(), spec, 30*time.Second, launch.Hooks{})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Points) != len(spec.Sizes) {
					t.Fatalf("%d points for %d sizes", len(res.Points), len(spec.Sizes))
				}
				for _, p := range res.Points {
					if !p.Validated {
						t.Errorf("size %d: not validated", p.Size)
					}
				}
			})
		}
	}
}
