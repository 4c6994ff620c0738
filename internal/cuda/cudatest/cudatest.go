// Package cudatest holds what tests on a real CUDA device share: opening
// a device bound on the test's own thread, and skipping where there is none.
package cudatest

import (
	"runtime"
	"testing"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/testutil"
)

// Device opens ordinal, locks the test's goroutine to its thread and binds
// the device there, undoing all three when the test ends. It skips the test
// without a driver (failing instead when GOTUNE_REQUIRE names cuda) or when
// the machine has fewer devices than ordinal+1. Subtests run on goroutines
// of their own: each calls Device for itself.
func Device(t testing.TB, ordinal int) *cuda.Device {
	t.Helper()
	testutil.SkipUnless(t, "cuda", cuda.Load())
	n, err := cuda.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	if ordinal >= n {
		t.Skipf("needs %d CUDA devices, have %d", ordinal+1, n)
	}
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	d, err := cuda.Open(ordinal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if err := d.Bind(); err != nil {
		t.Fatal(err)
	}
	return d
}

// Alloc allocates n bytes of kind on d, freed when the test ends.
func Alloc(t testing.TB, d *cuda.Device, kind cuda.MemKind, n int) *cuda.Buffer {
	t.Helper()
	b, err := d.Alloc(kind, n)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Release(t, b.Free)
	return b
}

// Stream creates a non-blocking stream in the bound context, destroyed
// when the test ends.
func Stream(t testing.TB) *cuda.Stream {
	t.Helper()
	s, err := cuda.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Release(t, s.Destroy)
	return s
}
