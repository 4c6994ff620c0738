package gpumem

import (
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/cuda/cudatest"
	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/transports"
)

func TestModeOption(t *testing.T) {
	for _, c := range []struct {
		opts transports.Options
		want Mode
		err  string
	}{
		{nil, Worker, ""},
		{transports.Options{OptionKey: "plain"}, Plain, ""},
		{transports.Options{OptionKey: "pool"}, Pool, ""},
		{transports.Options{OptionKey: "cudaFree"}, "", "gpu.alloc"},
	} {
		got, err := ModeOption(c.opts, Worker)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want one naming %q", c.opts, err, c.err)
			}
		case err != nil || got != c.want:
			t.Errorf("%v: %q, %v; want %q", c.opts, got, err, c.want)
		}
	}
	for _, m := range Modes {
		if got, err := ParseMode(string(m)); err != nil || got != m {
			t.Errorf("ParseMode(%q) = %q, %v", m, got, err)
		}
	}
	if _, err := ParseMode("async"); err == nil {
		t.Error("ParseMode accepted async")
	}
}

// Every mode on a real device: two goroutines allocate, fill and free
// concurrently; each buffer holds what was written to it, and Close
// reports no failed free.
func TestModesOnDevice(t *testing.T) {
	testutil.SkipUnless(t, "cuda", cuda.Load())
	for _, mode := range Modes {
		t.Run(string(mode), func(t *testing.T) {
			dev := cudatest.Device(t, 0)
			a, err := New(dev, mode)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			errs := make(chan error, 2)
			for g := range 2 {
				wg.Go(func() {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					if err := dev.Bind(); err != nil {
						errs <- err
						return
					}
					for i := range 50 {
						n := 4096 << (i % 8)
						b, err := a.Alloc(n)
						if err != nil {
							errs <- err
							return
						}
						v := byte(g*64 + i)
						if err := cuda.Memset(b.Ptr(), v, n); err != nil {
							errs <- err
							return
						}
						got := make([]byte, n)
						if err := cuda.CopyDtoH(got, b.Ptr()); err != nil {
							errs <- err
							return
						}
						if got[0] != v || got[n-1] != v {
							t.Errorf("goroutine %d buffer %d holds %d..%d, want %d", g, i, got[0], got[n-1], v)
						}
						if err := a.Free(b); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if err := a.Close(); err != nil {
				t.Error(err)
			}
		})
	}
}
