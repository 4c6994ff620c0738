package cuda_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/cuda/cudatest"
)

// The IPC test re-executes this binary as the importing process.
const (
	ipcChildEnv  = "GOTUNE_CUDA_IPC_CHILD" // the device ordinal to open on
	ipcMemEnv    = "GOTUNE_CUDA_IPC_MEM"
	ipcEventEnv  = "GOTUNE_CUDA_IPC_EVENT"
	ipcSizeEnv   = "GOTUNE_CUDA_IPC_SIZE"
	ipcBytesSeed = 0x5a
)

func TestMain(m *testing.M) {
	if ord := os.Getenv(ipcChildEnv); ord != "" {
		if err := ipcChild(ord); err != nil {
			fmt.Fprintln(os.Stderr, "IPC child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// bindHere binds d on the calling test's goroutine: t.Run starts each
// subtest on a goroutine of its own, which is on another OS thread, where no
// context is current.
func bindHere(t *testing.T, d *cuda.Device) {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	if err := d.Bind(); err != nil {
		t.Fatal(err)
	}
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) ^ seed ^ byte(i>>11)
	}
	return b
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func TestDevices(t *testing.T) {
	d := cudatest.Device(t, 0)
	v, _ := cuda.DriverVersion()
	path, _ := cuda.LibraryPath()
	n, _ := cuda.DeviceCount()
	t.Logf("driver %d.%d from %s, %d devices", v/1000, v%1000/10, path, n)
	for i := range n {
		x, err := cuda.Open(i)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: %+v", x, x.Info)
		if x.SMs <= 0 || x.TotalMem == 0 || x.PCIBusID == "" || x.Name == "" || x.Major < 3 {
			t.Errorf("implausible device info %+v", x.Info)
		}
		if !x.UnifiedAddressing {
			t.Errorf("%v: no unified addressing on a 64-bit host", x)
		}
		x.Close()
	}
	if ok, err := d.Bound(); !ok || err != nil {
		t.Errorf("Bound after Bind: %v, %v", ok, err)
	}
	free, total, err := cuda.MemInfo()
	if err != nil || free == 0 || total < free {
		t.Errorf("MemInfo: free %d total %d: %v", free, total, err)
	}
}

func TestErrorFromDriver(t *testing.T) {
	d := cudatest.Device(t, 0)
	_, err := d.Alloc(cuda.MemDevice, 1<<50)
	if !errors.Is(err, cuda.ErrOutOfMemory) || !cuda.IsCode(err, cuda.CodeOutOfMemory) {
		t.Fatalf("1 PiB: %v, want out of memory", err)
	}
	if want := "cuMemAlloc 1 PiB: CUDA_ERROR_OUT_OF_MEMORY: out of memory"; err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
}

// Every kind: fill it, copy it through device memory and back, compare.
func TestAllocEveryKind(t *testing.T) {
	d := cudatest.Device(t, 0)
	const n = 1<<20 + 12345
	s := cudatest.Stream(t)
	scratch := cudatest.Alloc(t, d, cuda.MemDevice, n)
	for _, kind := range []cuda.MemKind{cuda.MemHost, cuda.MemPinned, cuda.MemDevice, cuda.MemManaged,
		cuda.MemManagedDevice, cuda.MemManagedHost, cuda.MemPool} {
		t.Run(kind.String(), func(t *testing.T) {
			bindHere(t, d)
			b, err := d.Alloc(kind, n)
			if errors.Is(err, cuda.ErrNotSupported) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			// A failed check must not leave the buffer to the tests after it
			// (TestStreamOrderedPool counts the pool's bytes in use).
			t.Cleanup(func() {
				if err := b.Free(); err != nil {
					t.Logf("free %s buffer: %v", kind, err)
				}
				if err := cuda.LegacyStream.Synchronize(); err != nil {
					t.Logf("after freeing the %s buffer: %v", kind, err)
				}
			})
			want := pattern(n, byte(kind))
			if kind.HostVisible() {
				if copy(b.Bytes(), want) != n {
					t.Fatalf("Bytes() has %d bytes", len(b.Bytes()))
				}
			} else if b.Bytes() != nil {
				t.Fatal("device memory has host Bytes()")
			} else if err := cuda.CopyHtoD(b.Ptr(), want); err != nil {
				t.Fatal(err)
			}
			if err := cuda.CopyAsync(scratch.Ptr(), b.Ptr(), n, s); err != nil {
				t.Fatal(err)
			}
			if err := s.Synchronize(); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, n)
			if err := cuda.CopyDtoH(got, scratch.Ptr()); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Fatalf("byte %d: got %#x, want %#x", i, got[i], want[i])
			}
			info, err := cuda.PointerAttributes(b.Ptr())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: pointer %+v", kind, info)
			switch {
			case kind == cuda.MemDevice || kind == cuda.MemPool:
				if info.Type != cuda.MemoryDevice || info.Managed || info.Ordinal != d.Ordinal {
					t.Errorf("device memory reads as %+v", info)
				}
			case kind == cuda.MemPinned:
				if info.Type != cuda.MemoryHost || info.Managed {
					t.Errorf("pinned memory reads as %+v", info)
				}
			case kind.Managed():
				if !info.Managed {
					t.Errorf("managed memory reads as %+v", info)
				}
			}
			if err := b.Free(); err != nil {
				t.Fatal(err)
			}
			if err := b.Free(); err != nil {
				t.Fatalf("second Free: %v", err)
			}
		})
	}
	if err := cuda.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

func TestSynchronousCopies(t *testing.T) {
	d := cudatest.Device(t, 0)
	for _, n := range []int{1, 4096, 12345, 4 << 20} {
		a, err := d.Alloc(cuda.MemDevice, n)
		if err != nil {
			t.Fatal(err)
		}
		b, err := d.Alloc(cuda.MemDevice, n)
		if err != nil {
			t.Fatal(err)
		}
		want := pattern(n, 3)
		got := make([]byte, n)
		steps := []struct {
			name string
			f    func() error
		}{
			{"HtoD", func() error { return cuda.CopyHtoD(a.Ptr(), want) }},
			{"DtoD", func() error { return cuda.CopyDtoD(b.Ptr(), a.Ptr(), n) }},
			{"Memset", func() error { return cuda.Memset(a.Ptr(), 0, n) }},
			{"DtoH", func() error { return cuda.CopyDtoH(got, b.Ptr()) }},
		}
		for _, s := range steps {
			if err := s.f(); err != nil {
				t.Fatalf("%s %d bytes: %v", s.name, n, err)
			}
		}
		if i := firstDiff(got, want); i >= 0 {
			t.Fatalf("%d bytes: byte %d differs", n, i)
		}
		zero := make([]byte, n)
		if err := cuda.CopyDtoH(got, a.Ptr()); err != nil || !bytes.Equal(got, zero) {
			t.Fatalf("%d bytes: memset did not clear (%v)", n, err)
		}
		a.Free()
		b.Free()
	}
}

// CopyDtoD and Memset return when their bytes are in place: a copy on a
// non-blocking stream, which does not wait for the legacy stream, queued
// right after them reads what they wrote. (Before they waited, validation
// through staging read a device buffer's previous bytes on 2 x H100.)
func TestLegacyStreamOperationsCompleteBeforeTheyReturn(t *testing.T) {
	d := cudatest.Device(t, 0)
	const n = 256 << 20 // long enough that a copy racing them would see old bytes
	a := cudatest.Alloc(t, d, cuda.MemDevice, n)
	b := cudatest.Alloc(t, d, cuda.MemDevice, n)
	host := cudatest.Alloc(t, d, cuda.MemPinned, n)
	s := cudatest.Stream(t)
	readBack := func() []byte {
		t.Helper()
		if err := cuda.CopyAsync(host.Ptr(), b.Ptr(), n, s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		return host.Bytes()[:n]
	}
	for round := range 8 {
		old, fresh := byte(2*round+1), byte(2*round+2)
		for _, step := range []struct {
			name string
			f    func() error
		}{
			{"Memset", func() error { return cuda.Memset(b.Ptr(), old, n) }},
			{"Memset", func() error { return cuda.Memset(a.Ptr(), fresh, n) }},
			{"DtoD", func() error { return cuda.CopyDtoD(b.Ptr(), a.Ptr(), n) }},
		} {
			if err := step.f(); err != nil {
				t.Fatalf("round %d: %s: %v", round, step.name, err)
			}
		}
		got := readBack()
		if i := slices.IndexFunc(got, func(c byte) bool { return c != fresh }); i >= 0 {
			t.Fatalf("round %d: a non-blocking stream's copy right after CopyDtoD read byte %d before it was written (want %#x everywhere)", round, i, fresh)
		}
	}
}

func TestAsyncCopyAndEvents(t *testing.T) {
	d := cudatest.Device(t, 0)
	const n = 32 << 20
	src := cudatest.Alloc(t, d, cuda.MemPinned, n)
	dst := cudatest.Alloc(t, d, cuda.MemPinned, n)
	mid := cudatest.Alloc(t, d, cuda.MemDevice, n)
	copy(src.Bytes(), pattern(n, 9))

	up := cudatest.Stream(t)
	down := cudatest.Stream(t)
	start, _ := cuda.NewEvent(cuda.EventDefault)
	uploaded, _ := cuda.NewEvent(cuda.EventDefault)
	done, err := cuda.NewEvent(cuda.EventDisableTiming)
	if err != nil {
		t.Fatal(err)
	}
	defer start.Destroy()
	defer uploaded.Destroy()
	defer done.Destroy()

	for i, step := range []func() error{
		func() error { return start.Record(up) },
		func() error { return cuda.CopyAsync(mid.Ptr(), src.Ptr(), n, up) },
		func() error { return uploaded.Record(up) },
		// The download waits for the upload through the event, not the host.
		func() error { return down.WaitEvent(uploaded) },
		func() error { return cuda.CopyAsync(dst.Ptr(), mid.Ptr(), n, down) },
		func() error { return done.Record(down) },
	} {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	pollEvent(t, done, "copies")
	if ok, err := down.Query(); !ok || err != nil {
		t.Errorf("stream query after its last event completed: %v, %v", ok, err)
	}
	el, err := uploaded.Since(start)
	if err != nil || el <= 0 {
		t.Fatalf("elapsed %v: %v", el, err)
	}
	t.Logf("host->device %s pinned: %v (%.1f GB/s)", cuda.Size(n), el, float64(n)/el.Seconds()/1e9)
	if i := firstDiff(dst.Bytes(), src.Bytes()); i >= 0 {
		t.Fatalf("byte %d differs", i)
	}
	if _, err := done.Since(start); err == nil {
		t.Error("elapsed time of a timing-disabled event succeeded")
	}
}

// Copies, memsets, event record and query and stream query allocate nothing.
func TestHotPathsDoNotAllocate(t *testing.T) {
	d := cudatest.Device(t, 0)
	host := cudatest.Alloc(t, d, cuda.MemPinned, 4096)
	dev := cudatest.Alloc(t, d, cuda.MemDevice, 4096)
	s, _ := cuda.NewStream(cuda.StreamNonBlocking)
	defer s.Destroy()
	ev, _ := cuda.NewEvent(cuda.EventDisableTiming)
	defer ev.Destroy()
	for name, f := range map[string]func(){
		"CopyAsync":   func() { cuda.CopyAsync(dev.Ptr(), host.Ptr(), 4096, s) },
		"MemsetAsync": func() { cuda.MemsetAsync(dev.Ptr(), 1, 4096, s) },
		"Record":      func() { ev.Record(s) },
		"EventQuery":  func() { ev.Query() },
		"StreamQuery": func() { s.Query() },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations per call", name, n)
		}
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

func TestStreamOrderedPool(t *testing.T) {
	d := cudatest.Device(t, 0)
	if !d.MemoryPools {
		t.Skip("no memory pools")
	}
	if err := d.SetPoolReleaseThreshold(64 << 20); err != nil {
		t.Fatal(err)
	}
	s, _ := cuda.NewStream(cuda.StreamNonBlocking)
	defer s.Destroy()
	host, _ := d.Alloc(cuda.MemPinned, 1<<20)
	defer host.Free()
	for i := range 3 {
		b, err := d.AllocAsync(1<<20, s)
		if err != nil {
			t.Fatal(err)
		}
		if err := cuda.MemsetAsync(b.Ptr(), byte(0xa0+i), 1<<20, s); err != nil {
			t.Fatal(err)
		}
		if err := cuda.CopyAsync(host.Ptr(), b.Ptr(), 1<<20, s); err != nil {
			t.Fatal(err)
		}
		if err := b.FreeAsync(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(host.Bytes(), bytes.Repeat([]byte{byte(0xa0 + i)}, 1<<20)) {
			t.Fatalf("round %d: pool memory did not hold the memset", i)
		}
	}
	u, err := d.PoolUsage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pool after 3 rounds with a 64 MiB release threshold: %+v", u)
	if u.Used != 0 || u.Reserved < 1<<20 {
		t.Errorf("pool %+v: want nothing used and the freed MiB kept", u)
	}
	if err := d.TrimPool(0); err != nil {
		t.Fatal(err)
	}
	if err := d.SetPoolReleaseThreshold(0); err != nil {
		t.Fatal(err)
	}
}

func TestRegisterHost(t *testing.T) {
	d := cudatest.Device(t, 0)
	h, err := cuda.AllocHost(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Free()
	// Unregistered pageable memory: reported, not asserted (HMM systems vary).
	before, err := cuda.PointerAttributes(h.Ptr())
	if err != nil {
		t.Logf("pageable memory before registration: %v", err)
	}
	if err := cuda.RegisterHost(h.Bytes(), 0); err != nil {
		t.Fatal(err)
	}
	after, err := cuda.PointerAttributes(h.Ptr())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pageable host memory: %+v before registration, %+v after", before, after)
	if after.Type != cuda.MemoryHost {
		t.Errorf("registered memory reads as %+v", after)
	}
	if err := cuda.RegisterHost(h.Bytes(), 0); !errors.Is(err, cuda.ErrHostMemoryRegistered) {
		t.Errorf("registering twice: %v", err)
	}
	dev, _ := d.Alloc(cuda.MemDevice, 1<<20)
	defer dev.Free()
	copy(h.Bytes(), pattern(1<<20, 1))
	s, _ := cuda.NewStream(cuda.StreamNonBlocking)
	defer s.Destroy()
	if err := cuda.CopyAsync(dev.Ptr(), h.Ptr(), 1<<20, s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := cuda.UnregisterHost(h.Bytes()); err != nil {
		t.Fatal(err)
	}
}

func TestPeerAccess(t *testing.T) {
	d0 := cudatest.Device(t, 0)
	n, _ := cuda.DeviceCount()
	if n < 2 {
		t.Skip("needs two devices")
	}
	d1, err := cuda.Open(1)
	if err != nil {
		t.Fatal(err)
	}
	defer d1.Close()
	ok, err := d0.CanAccessPeer(d1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v can access %v: %v", d0, d1, ok)
	if !ok {
		t.Skip("no peer access")
	}
	for range 2 { // the second time it is already enabled: not an error
		if err := d0.EnablePeerAccess(d1); err != nil {
			t.Fatal(err)
		}
	}
	const size = 8 << 20
	a, _ := d0.Alloc(cuda.MemDevice, size)
	defer a.Free()
	if err := cuda.CopyHtoD(a.Ptr(), pattern(size, 4)); err != nil {
		t.Fatal(err)
	}
	if err := d1.Bind(); err != nil {
		t.Fatal(err)
	}
	b, err := d1.Alloc(cuda.MemDevice, size)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { d1.Bind(); b.Free(); d0.Bind() }()
	if err := d0.Bind(); err != nil {
		t.Fatal(err)
	}
	s, _ := cuda.NewStream(cuda.StreamNonBlocking)
	defer s.Destroy()
	start, _ := cuda.NewEvent(cuda.EventDefault)
	defer start.Destroy()
	end, _ := cuda.NewEvent(cuda.EventDefault)
	defer end.Destroy()
	start.Record(s)
	if err := cuda.CopyPeerAsync(b.Ptr(), d1, a.Ptr(), d0, size, s); err != nil {
		t.Fatal(err)
	}
	end.Record(s)
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	el, _ := end.Since(start)
	t.Logf("peer copy %s cuda0->cuda1: %v (%.1f GB/s)", cuda.Size(size), el, float64(size)/el.Seconds()/1e9)
	got := make([]byte, size)
	if err := cuda.CopyDtoH(got, b.Ptr()); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, pattern(size, 4)); i >= 0 {
		t.Fatalf("byte %d differs", i)
	}
	if err := d0.DisablePeerAccess(d1); err != nil {
		t.Fatal(err)
	}
}

// IPC: this process exports device memory and an event, a child process (this
// binary again) opens them on the same device or a peer, checks the bytes and
// writes its own, which this process then reads.
func TestIPC(t *testing.T) {
	d := cudatest.Device(t, 0)
	n, _ := cuda.DeviceCount()
	for _, peer := range []int{0, 1} {
		t.Run(fmt.Sprintf("cuda0-to-cuda%d", peer), func(t *testing.T) {
			bindHere(t, d)
			if peer >= n {
				t.Skipf("needs %d devices", peer+1)
			}
			const size = 4<<20 + 100
			b := cudatest.Alloc(t, d, cuda.MemDevice, size)
			if err := cuda.CopyHtoD(b.Ptr(), pattern(size, ipcBytesSeed)); err != nil {
				t.Fatal(err)
			}
			h, err := b.IPCHandle()
			if err != nil {
				t.Fatal(err)
			}
			ev, err := cuda.NewEvent(cuda.EventInterprocess | cuda.EventDisableTiming)
			if err != nil {
				t.Fatal(err)
			}
			defer ev.Destroy()
			if err := ev.Record(nil); err != nil {
				t.Fatal(err)
			}
			eh, err := ev.IPCHandle()
			if err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(),
				ipcChildEnv+"="+strconv.Itoa(peer),
				ipcMemEnv+"="+h.String(),
				ipcEventEnv+"="+eh.String(),
				ipcSizeEnv+"="+strconv.Itoa(size))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			t.Logf("child: %s", strings.TrimSpace(string(out)))
			got := make([]byte, size)
			if err := cuda.CopyDtoH(got, b.Ptr()); err != nil {
				t.Fatal(err)
			}
			if i := firstDiff(got, pattern(size, ^byte(ipcBytesSeed))); i >= 0 {
				t.Fatalf("byte %d: the child's write did not arrive", i)
			}
		})
	}
}

func ipcChild(ordinal string) error {
	ord, err := strconv.Atoi(ordinal)
	if err != nil {
		return err
	}
	size, err := strconv.Atoi(os.Getenv(ipcSizeEnv))
	if err != nil {
		return err
	}
	mh, err := cuda.ParseIPCMemHandle(os.Getenv(ipcMemEnv))
	if err != nil {
		return err
	}
	eh, err := cuda.ParseIPCEventHandle(os.Getenv(ipcEventEnv))
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	d, err := cuda.Open(ord)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Bind(); err != nil {
		return err
	}
	// The event was made on cuda0: open it in this device's context, and if
	// the driver refuses a foreign device's event there, in cuda0's.
	ev, err := cuda.OpenIPCEvent(eh)
	if err != nil && ord != 0 {
		fmt.Printf("event of cuda0 not opened on cuda%d (%v); opening it on cuda0\n", ord, err)
		d0, err0 := cuda.Open(0)
		if err0 != nil {
			return err0
		}
		defer d0.Close()
		if err := d0.Bind(); err != nil {
			return err
		}
		ev, err = cuda.OpenIPCEvent(eh)
		if err == nil {
			err = ev.Synchronize()
			ev.Destroy()
		}
		if err != nil {
			return err
		}
		if err := d.Bind(); err != nil {
			return err
		}
	} else if err != nil {
		return err
	} else {
		fmt.Printf("event of cuda0 opened on cuda%d\n", ord)
		defer ev.Destroy()
		if err := ev.Synchronize(); err != nil {
			return err
		}
	}
	b, err := d.OpenIPC(mh, size)
	if err != nil {
		return err
	}
	got := make([]byte, size)
	if err := cuda.CopyDtoH(got, b.Ptr()); err != nil {
		return err
	}
	if i := firstDiff(got, pattern(size, ipcBytesSeed)); i >= 0 {
		return fmt.Errorf("on cuda%d: byte %d of the exported memory differs", ord, i)
	}
	if err := cuda.CopyHtoD(b.Ptr(), pattern(size, ^byte(ipcBytesSeed))); err != nil {
		return err
	}
	if err := cuda.Synchronize(); err != nil {
		return err
	}
	return b.Free()
}

// Work queued on a capturing stream runs only when its graph is launched,
// and every launch runs all of it again.
func TestCapturedGraphReplays(t *testing.T) {
	d := cudatest.Device(t, 0)
	s, err := cuda.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	const n = 1 << 16
	dev, err := d.Alloc(cuda.MemDevice, n)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Free()
	host := make([]byte, n)
	if err := cuda.Memset(dev.Ptr(), 0, n); err != nil {
		t.Fatal(err)
	}
	if err := s.BeginCapture(cuda.CaptureRelaxed); err != nil {
		t.Fatal(err)
	}
	if err := cuda.MemsetAsync(dev.Ptr(), 0x5a, n, s); err != nil {
		t.Fatal(err)
	}
	g, err := s.EndCapture()
	if err != nil {
		t.Fatal(err)
	}
	defer g.Destroy()
	if err := cuda.CopyDtoH(host, dev.Ptr()); err != nil || host[0] != 0 {
		t.Fatalf("before any launch: byte 0 is %#x (%v), want the capture not run", host[0], err)
	}
	exec, err := g.Instantiate()
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Destroy()
	for round := range 3 {
		if err := cuda.Memset(dev.Ptr(), 0, n); err != nil {
			t.Fatal(err)
		}
		if err := exec.Launch(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			t.Fatal(err)
		}
		if err := cuda.CopyDtoH(host, dev.Ptr()); err != nil {
			t.Fatal(err)
		}
		if host[0] != 0x5a || host[n-1] != 0x5a {
			t.Fatalf("launch %d: bytes %#x..%#x, want 0x5a", round, host[0], host[n-1])
		}
	}
}

// BenchmarkPinnedUpload queues 1 MiB copies from pinned host memory to
// device memory back to back on one stream, synchronizing every 64 (a bw
// window), with nothing, an event, an interprocess event or a flag write
// (Stream.WriteValue32) after each copy or after every 8th: what cudaipc's
// per-message completion costs the copy engine beside torch's
// back-to-back copies (docs/performance.md, GPU).
func BenchmarkPinnedUpload(b *testing.B) {
	const n, window = 1 << 20, 64
	for _, kind := range []cuda.MemKind{cuda.MemDevice, cuda.MemPool} {
		for _, mark := range []struct {
			name  string
			flags cuda.EventFlags // an event's; 0 with flag: a stream write
			flag  bool
			every int // copies per mark
		}{
			{"none", 0, false, 0},
			{"event", cuda.EventDisableTiming, false, 1},
			{"ipc-event", cuda.EventInterprocess | cuda.EventDisableTiming, false, 1},
			{"ipc-event/8", cuda.EventInterprocess | cuda.EventDisableTiming, false, 8},
			{"flag", 0, true, 1},
			{"flag/8", 0, true, 8},
		} {
			b.Run(fmt.Sprintf("dst=%s/record=%s", kind, mark.name), func(b *testing.B) {
				d := cudatest.Device(b, 0)
				src := cudatest.Alloc(b, d, cuda.MemPinned, n)
				dst := cudatest.Alloc(b, d, kind, n)
				s := cudatest.Stream(b)
				record := func(uint32) error { return nil }
				switch {
				case mark.flag:
					_, at := flagPage(b, d)
					record = func(v uint32) error { return s.WriteValue32(at(0), v) }
				case mark.every > 0:
					ev, err := cuda.NewEvent(mark.flags)
					if err != nil {
						b.Fatal(err)
					}
					defer ev.Destroy()
					record = func(uint32) error { return ev.Record(s) }
				}
				b.SetBytes(n)
				b.ResetTimer()
				for i := range b.N {
					if err := cuda.CopyAsync(dst.Ptr(), src.Ptr(), n, s); err != nil {
						b.Fatal(err)
					}
					if mark.every > 0 && i%mark.every == mark.every-1 {
						if err := record(uint32(i)); err != nil {
							b.Fatal(err)
						}
					}
					if i%window == window-1 || i == b.N-1 {
						if err := s.Synchronize(); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// A value a stream writes into registered host memory after a copy is
// seen by a polling host thread only once the copy's bytes are there,
// with no stream synchronization: the completion flag of cudaipc's
// completion=flag.
func TestWriteValueFollowsTheCopy(t *testing.T) {
	d := cudatest.Device(t, 0)
	const n = 1 << 20
	src := cudatest.Alloc(t, d, cuda.MemDevice, n)
	dst := cudatest.Alloc(t, d, cuda.MemPinned, n)
	flags, at := flagPage(t, d)
	flag, flagAt := &flags[0], at(0)
	s := cudatest.Stream(t)
	for i := uint32(1); i <= 100; i++ {
		v := byte(i*37 + 1)
		if err := cuda.MemsetAsync(src.Ptr(), v, n, s); err != nil {
			t.Fatal(err)
		}
		if err := cuda.CopyAsync(dst.Ptr(), src.Ptr(), n, s); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteValue32(flagAt, i); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for atomic.LoadUint32(flag) != i {
			if time.Now().After(deadline) {
				t.Fatalf("write %d: the flag reads %d after 10 s", i, atomic.LoadUint32(flag))
			}
			runtime.Gosched()
		}
		for k, b := range dst.Bytes() {
			if b != v {
				t.Fatalf("write %d seen, but byte %d of the copy is %#x, want %#x", i, k, b, v)
			}
		}
	}
}

// flagPage is a page of host memory registered with the driver, as 32-bit
// words, and the device address of word i.
func flagPage(t testing.TB, d *cuda.Device) (*[1024]uint32, func(i int) uintptr) {
	t.Helper()
	page := cudatest.Alloc(t, d, cuda.MemHost, 4096)
	if err := cuda.RegisterHost(page.Bytes(), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cuda.UnregisterHost(page.Bytes()) })
	base, err := cuda.HostDevicePointer(page.Ptr())
	if err != nil {
		t.Fatal(err)
	}
	return (*[1024]uint32)(unsafe.Pointer(&page.Bytes()[0])), func(i int) uintptr { return base + uintptr(4*i) }
}

// spinUntil polls word until it reads v, failing after 10 s.
func spinUntil(t testing.TB, word *uint32, v uint32, what string) {
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; atomic.LoadUint32(word) != v; i++ {
		if i%1024 == 0 && time.Now().After(deadline) {
			t.Fatalf("%s: the word reads %d after 10 s, want %d", what, atomic.LoadUint32(word), v)
		}
	}
}

// pollEvent polls ev with cuEventQuery until its work is done, failing
// after 10 s.
func pollEvent(t testing.TB, ev *cuda.Event, what string) {
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		done, err := ev.Query()
		if err != nil {
			t.Fatal(err)
		}
		if done {
			return
		}
		if i%1024 == 0 && time.Now().After(deadline) {
			t.Fatalf("%s: not done after 10 s", what)
		}
	}
}

// Work queued after a wait on a host word runs only once the host has
// stored the value: the stream's half of host-to-GPU signalling.
func TestWaitValueHoldsTheStream(t *testing.T) {
	d := cudatest.Device(t, 0)
	flags, at := flagPage(t, d)
	s := cudatest.Stream(t)
	for i := uint32(1); i <= 100; i++ {
		if err := s.WaitValue32(at(0), i); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteValue32(at(16), i); err != nil {
			t.Fatal(err)
		}
		if v := atomic.LoadUint32(&flags[16]); v != i-1 {
			t.Fatalf("round %d: the stream wrote %d before the host released it", i, v)
		}
		atomic.StoreUint32(&flags[0], i)
		spinUntil(t, &flags[16], i, fmt.Sprintf("round %d", i))
	}
}

// BenchmarkGPUSignal is the floor of signalling a GPU stream from the host
// and back, with no kernel and no copy: per op the host stores a number
// that a queued wait holds for and spins until the stream's write after it
// comes back (round trip, over PCIe both ways). The waits and writes are
// queued 64 at a time ahead of the host's stores.
func BenchmarkGPUSignal(b *testing.B) {
	d := cudatest.Device(b, 0)
	flags, at := flagPage(b, d)
	s := cudatest.Stream(b)
	const batch = 64
	for i := 0; i < b.N; {
		b.StopTimer()
		n := min(batch, b.N-i)
		for k := range n {
			v := uint32(i + k + 1)
			if err := s.WaitValue32(at(0), v); err != nil {
				b.Fatal(err)
			}
			if err := s.WriteValue32(at(16), v); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for k := range n {
			v := uint32(i + k + 1)
			atomic.StoreUint32(&flags[0], v)
			spinUntil(b, &flags[16], v, "signal")
		}
		i += n
	}
}

// BenchmarkSmallCopyDone is what one small device-to-device copy costs
// from the call that queues it to the host knowing it is done, noticed
// through a flag the stream writes after it (completion=flag) or an event
// polled with cuEventQuery (completion=event): the floor of any small GPU
// message that a host starts.
func BenchmarkSmallCopyDone(b *testing.B) {
	for _, size := range []int{8, 1024} {
		for _, how := range []string{"flag", "event", "ipc-event"} {
			b.Run(fmt.Sprintf("size=%d/notice=%s", size, how), func(b *testing.B) {
				d := cudatest.Device(b, 0)
				src := cudatest.Alloc(b, d, cuda.MemDevice, size)
				dst := cudatest.Alloc(b, d, cuda.MemDevice, size)
				flags, at := flagPage(b, d)
				s := cudatest.Stream(b)
				flagsOf := map[string]cuda.EventFlags{"event": cuda.EventDisableTiming, "ipc-event": cuda.EventInterprocess | cuda.EventDisableTiming}
				var ev *cuda.Event
				if f, ok := flagsOf[how]; ok {
					var err error
					if ev, err = cuda.NewEvent(f); err != nil {
						b.Fatal(err)
					}
					defer ev.Destroy()
				}
				b.ResetTimer()
				for i := range b.N {
					if err := cuda.CopyAsync(dst.Ptr(), src.Ptr(), size, s); err != nil {
						b.Fatal(err)
					}
					if ev == nil {
						if err := s.WriteValue32(at(0), uint32(i+1)); err != nil {
							b.Fatal(err)
						}
						spinUntil(b, &flags[0], uint32(i+1), "copy")
						continue
					}
					if err := ev.Record(s); err != nil {
						b.Fatal(err)
					}
					pollEvent(b, ev, "copy")
				}
			})
		}
	}
}
