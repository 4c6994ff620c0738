package gpuload

import (
	"encoding/binary"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/cuda/cudatest"
)

// loadKernel binds device 0 on the test's locked thread and loads the
// kernel; it skips without a driver.
func loadKernel(t *testing.T) (*cuda.Device, *Kernel) {
	t.Helper()
	d := cudatest.Device(t, 0)
	k, err := Load(d)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	t.Logf("%v: %d blocks of %d threads per SM; full load %d blocks", d, k.BlocksPerSM(), BlockSize, k.Grid(Full))
	return d, k
}

func stream(t *testing.T, flags cuda.StreamFlags) *cuda.Stream {
	t.Helper()
	s, err := cuda.NewStream(flags)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Synchronize(); s.Destroy() })
	return s
}

func completed(t *testing.T, k *Kernel, want int) {
	t.Helper()
	n, err := k.Completed()
	if err != nil {
		t.Fatal(err)
	}
	if int(n) != want {
		t.Errorf("%d blocks completed, want %d", n, want)
	}
	if err := k.ResetCompleted(); err != nil {
		t.Fatal(err)
	}
}

// A timed launch returns at once and the kernel runs for its duration.
func TestLaunchIsBoundedAndAsynchronous(t *testing.T) {
	_, k := loadKernel(t)
	s := stream(t, cuda.StreamNonBlocking)
	start, _ := cuda.NewEvent(cuda.EventDefault)
	defer start.Destroy()
	end, _ := cuda.NewEvent(cuda.EventDefault)
	defer end.Destroy()
	for _, f := range []float64{Partial, Full} {
		const spin = 200 * time.Millisecond
		start.Record(s)
		t0 := time.Now()
		if err := k.Launch(s, Spec{Fraction: f, Duration: spin}); err != nil {
			t.Fatal(err)
		}
		launch := time.Since(t0)
		end.Record(s)
		if err := end.Synchronize(); err != nil {
			t.Fatal(err)
		}
		el, _ := end.Since(start)
		t.Logf("load %v: %d blocks, launch returned in %v, kernel ran %v", f, k.Grid(f), launch, el)
		if launch > spin/4 {
			t.Errorf("Launch blocked for %v", launch)
		}
		if el < spin*9/10 || el > spin*3 {
			t.Errorf("kernel ran %v, want about %v", el, spin)
		}
		completed(t, k, k.Grid(f))
	}
	if err := k.Launch(s, Spec{Fraction: None, Duration: time.Second}); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(5, func() { k.Launch(s, Spec{Fraction: Partial, Duration: time.Millisecond}) }); n != 0 {
		t.Errorf("Launch: %v allocations", n)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	completed(t, k, 6*k.Grid(Partial))
}

// A flag in pinned host memory, set by a plain host store, releases a full
// load long before its time bound.
func TestHostFlagReleasesKernel(t *testing.T) {
	d, k := loadKernel(t)
	s := stream(t, cuda.StreamNonBlocking)
	flag, err := d.Alloc(cuda.MemPinned, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer flag.Free()
	word := (*uint32)(unsafe.Pointer(unsafe.SliceData(flag.Bytes())))
	atomic.StoreUint32(word, 0)
	const bound = 5 * time.Second
	t0 := time.Now()
	if err := k.Launch(s, Spec{Fraction: Full, Duration: bound, Flag: flag.Ptr()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if done, _ := s.Query(); done {
		t.Fatal("kernel ended before its flag was set")
	}
	atomic.StoreUint32(word, 1)
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	el := time.Since(t0)
	t.Logf("released by the host flag after %v (bound %v)", el, bound)
	if el > bound/2 {
		t.Errorf("kernel ran %v: the flag did not release it", el)
	}
	completed(t, k, k.Grid(Full))
}

// Hazard H4 on real hardware: a kernel waits for a flag in device memory
// that a synchronous copy (legacy stream) sets. On a non-blocking stream the
// copy goes through and releases the kernel; on a blocking stream the copy
// waits for the kernel, which only ends at its time bound.
func TestH4SynchronousCopyCoupling(t *testing.T) {
	d, k := loadKernel(t)
	flag, err := d.Alloc(cuda.MemDevice, 8)
	if err != nil {
		t.Fatal(err)
	}
	defer flag.Free()
	one := binary.LittleEndian.AppendUint32(nil, 1)
	for _, tc := range []struct {
		name    string
		flags   cuda.StreamFlags
		bound   time.Duration
		coupled bool
	}{
		{"non-blocking", cuda.StreamNonBlocking, 3 * time.Second, false},
		{"blocking", cuda.StreamBlocking, 500 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A subtest runs on a goroutine (and thread) of its own.
			runtime.LockOSThread()
			t.Cleanup(runtime.UnlockOSThread) // after the stream's cleanup
			if err := d.Bind(); err != nil {
				t.Fatal(err)
			}
			s := stream(t, tc.flags)
			if err := cuda.Memset(flag.Ptr(), 0, 8); err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			if err := k.Launch(s, Spec{Fraction: Full, Duration: tc.bound, Flag: flag.Ptr()}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			t1 := time.Now()
			if err := cuda.CopyHtoD(flag.Ptr(), one); err != nil {
				t.Fatal(err)
			}
			copyLatency := time.Since(t1)
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			kernel := time.Since(t0)
			t.Logf("%s kernel stream: the synchronous copy took %v, the kernel ran %v (bound %v)", tc.name, copyLatency, kernel, tc.bound)
			if tc.coupled {
				if copyLatency < tc.bound/2 {
					t.Errorf("copy took %v: not held up by the kernel", copyLatency)
				}
			} else if kernel > tc.bound/2 || copyLatency > tc.bound/2 {
				t.Errorf("copy %v, kernel %v: the copy did not release the kernel", copyLatency, kernel)
			}
			completed(t, k, k.Grid(Full))
		})
	}
}

// The load kernel, loaded and launched through cuda's raw module API.
func TestModuleLaunch(t *testing.T) {
	d := cudatest.Device(t, 0)
	if _, err := cuda.LoadModule([]byte(".version 7.8\n.target sm_70\n.address_size 64\nthis is not PTX\n")); err == nil ||
		!strings.Contains(err.Error(), "cuModuleLoadDataEx") {
		t.Errorf("broken PTX: %v", err)
	} else {
		t.Logf("broken PTX: %v", err)
	}
	m, err := cuda.LoadModule([]byte(PTX))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unload()
	if m.Log != "" {
		t.Logf("JIT log: %s", m.Log)
	}
	f, err := m.Function(Entry)
	if err != nil {
		t.Fatal(err)
	}
	regs, _ := f.Attribute(cuda.FuncAttrNumRegs)
	perSM, err := f.MaxActiveBlocksPerSM(BlockSize, 0)
	if err != nil || perSM <= 0 {
		t.Fatalf("occupancy %d: %v", perSM, err)
	}
	t.Logf("%s: %d registers, %d blocks of %d threads per SM", f.Name, regs, perSM, BlockSize)
	counter, _ := d.Alloc(cuda.MemDevice, 8)
	defer counter.Free()
	if err := cuda.Memset(counter.Ptr(), 0, 8); err != nil {
		t.Fatal(err)
	}
	s, _ := cuda.NewStream(cuda.StreamNonBlocking)
	defer s.Destroy()
	var args cuda.Args
	args.SetPtr(0, 0).Set(1, uint64(time.Millisecond)).SetPtr(2, counter.Ptr())
	const blocks = 7
	if err := f.Launch(cuda.Dim3{X: blocks}, cuda.Dim3{X: BlockSize}, 0, s, &args); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(10, func() {
		f.Launch(cuda.Dim3{X: blocks}, cuda.Dim3{X: BlockSize}, 0, s, &args)
	}); n != 0 {
		t.Errorf("Launch: %v allocations", n)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	if err := cuda.CopyDtoH(got, counter.Ptr()); err != nil {
		t.Fatal(err)
	}
	// One launch plus the 11 of AllocsPerRun (it runs f once to warm up).
	if c := binary.LittleEndian.Uint32(got); c != 12*blocks {
		t.Errorf("done counter %d, want %d", c, 12*blocks)
	}
}
