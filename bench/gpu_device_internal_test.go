package bench

import (
	"errors"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

// openTestGPU opens rank 0's GPU for spec on the test's goroutine (which
// openRankGPU locks to its thread); it skips without a driver.
func openTestGPU(t *testing.T, spec *Spec) *rankGPU {
	t.Helper()
	testutil.SkipUnless(t, "cuda", cuda.Load())
	if err := spec.Normalize(); err != nil {
		t.Fatal(err)
	}
	g, err := openRankGPU(spec, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.close(); err != nil {
			t.Error(err)
		}
	})
	return g
}

// Device buffers: the transport gets views of device addresses, and
// validation fills and checks them through host staging, catching a
// corrupted byte.
func TestDeviceBuffersValidateThroughStaging(t *testing.T) {
	spec := Spec{Transport: "cudaipc", Pattern: Bandwidth, Sizes: []int{0, 1, 4096, 1 << 20}, Window: 3, Validate: true,
		Mem: []cuda.MemKind{cuda.MemDevice}}
	g := openTestGPU(t, &spec)
	a, err := newArena(spec, 0, g)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := a.free(); err != nil {
			t.Error(err)
		}
	}()
	if len(a.send) != 3 || len(a.recv) != 3 || len(a.gpuBufs) != 6 || a.stage == nil || len(a.mapped) != 1 {
		t.Fatalf("arena: %d/%d buffers, %d GPU, stage %v, %d host", len(a.send), len(a.recv), len(a.gpuBufs), a.stage, len(a.mapped))
	}
	info, err := cuda.PointerAttributes(sys.AddressOf(a.send[0]))
	if err != nil || info.Type != cuda.MemoryDevice || info.Ordinal != g.dev.Ordinal {
		t.Fatalf("send buffer: %+v, %v; want device memory of cuda%d", info, err, g.dev.Ordinal)
	}
	if info, _ := cuda.PointerAttributes(sys.AddressOf(a.ack)); info.Type == cuda.MemoryDevice {
		t.Error("the acknowledgement is in device memory")
	}
	for _, size := range spec.Sizes {
		l := newLoop(nil, 0, spec, size, a)
		for w := range 3 {
			s, r := l.slot(l.sbuf, 0, w), l.slot(l.rbuf, 0, w)
			if err := l.fill(s, 7, 0, w); err != nil {
				t.Fatal(err)
			}
			if size > 0 {
				if err := cuda.CopyDtoD(sys.AddressOf(r), sys.AddressOf(s), size); err != nil {
					t.Fatal(err)
				}
			}
			if err := l.check(r, 7, 0, w); err != nil {
				t.Fatalf("size %d slot %d: %v", size, w, err)
			}
			if size == 0 {
				continue
			}
			off := size / 2
			if err := cuda.Memset(sys.AddressOf(r)+uintptr(off), ^patternByte(7, 0, w, off), 1); err != nil {
				t.Fatal(err)
			}
			var ve *ValidationError
			if err := l.check(r, 7, 0, w); !errors.As(err, &ve) || ve.Offset != off {
				t.Fatalf("size %d slot %d: corrupted byte %d: got %v", size, w, off, err)
			}
		}
	}
	ri := g.info(0)
	if ri.Mem != "device" || ri.GPU.Name == "" || ri.GPU.PCIBusID == "" {
		t.Errorf("info %+v", ri)
	}
}

// The load kernel runs until the host releases it, and a pass that
// outlasts its bound is counted.
func TestGPULoadStartsAndReleases(t *testing.T) {
	spec := Spec{Transport: "sm", Pattern: Latency, Sizes: []int{8}, GPUs: []int{0}, GPULoad: 1}
	saved := LoadBound
	t.Cleanup(func() { LoadBound = saved })
	LoadBound = 300 * time.Millisecond
	g := openTestGPU(t, &spec)
	l := g.load
	if l == nil {
		t.Fatal("no load kernel")
	}
	for range 3 {
		if err := l.start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if done, err := l.s.Query(); err != nil || done {
			t.Fatalf("kernel ended before its release: %v, %v", done, err)
		}
		t0 := time.Now()
		if err := l.stop(); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(t0); el > LoadBound/2 {
			t.Errorf("release took %v", el)
		}
	}
	if l.lateCount() != 0 {
		t.Errorf("%d late passes, want 0", l.lateCount())
	}
	if err := l.start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * LoadBound)
	if err := l.stop(); err != nil {
		t.Fatal(err)
	}
	if l.lateCount() != 1 {
		t.Errorf("%d late passes, want 1", l.lateCount())
	}
}
