package cuda

import (
	"errors"
	"strings"
	"testing"
)

// Without libcuda.so.1 (this machine, CI), every entry point says so.
func TestEntryPointsWithoutDriver(t *testing.T) {
	if Load() == nil {
		t.Skip("a CUDA driver is present: the absent-driver path is tested by TestLoadErrors")
	}
	err := Load()
	if !errors.Is(err, ErrNotSupported) {
		t.Fatalf("Load: %v does not match ErrNotSupported", err)
	}
	if !strings.Contains(err.Error(), "libcuda.so.1 not found: ") {
		t.Errorf("Load: %q does not say libcuda.so.1 was not found", err)
	}
	var stream *Stream
	ev := &Event{}
	calls := map[string]func() error{
		"DriverVersion": func() error { _, err := DriverVersion(); return err },
		"DeviceCount":   func() error { _, err := DeviceCount(); return err },
		"Open":          func() error { _, err := Open(0); return err },
		"NewStream":     func() error { _, err := NewStream(StreamNonBlocking); return err },
		"NewEvent":      func() error { _, err := NewEvent(EventDefault); return err },
		"Record":        func() error { return ev.Record(stream) },
		"Query":         func() error { _, err := ev.Query(); return err },
		"CopyAsync":     func() error { return CopyAsync(1, 2, 3, stream) },
		"Copy":          func() error { return Copy(1, 2, 3) },
		"CopyHtoD":      func() error { return CopyHtoD(1, []byte{1}) },
		"MemsetAsync":   func() error { return MemsetAsync(1, 0, 1, stream) },
		"Synchronize":   Synchronize,
		"LoadModule":    func() error { _, err := LoadModule([]byte("x")); return err },
		"OpenIPCEvent":  func() error { _, err := OpenIPCEvent(IPCEventHandle{}); return err },
		"MemAdvise":     func() error { return MemAdvise(1, 1, AdviseSetReadMostly, Location{}) },
		"Pointer":       func() error { _, err := PointerAttributes(1); return err },
		"RegisterHost":  func() error { return RegisterHost([]byte{1}, 0) },
		"BeginCapture":  func() error { return (&Stream{h: 3}).BeginCapture(CaptureRelaxed) },
		"Instantiate":   func() error { _, err := (&Graph{h: 1}).Instantiate(); return err },
	}
	for name, f := range calls {
		if err := f(); !errors.Is(err, ErrNotSupported) {
			t.Errorf("%s: %v, want ErrNotSupported", name, err)
		}
	}
}

// load itself, pointed at libraries that are not a usable driver.
func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		lib, want string
	}{
		{"/nonexistent/libcuda.so.1", "/nonexistent/libcuda.so.1 not found: "},
		{"libc.so.6", "libc.so.6 lacks cuInit (driver too old)"},
	} {
		t.Setenv(LibraryEnv, tc.lib)
		d, err := load()
		if d != nil || !errors.Is(err, ErrNotSupported) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, %v; want ErrNotSupported saying %q", tc.lib, d, err, tc.want)
		}
	}
}
