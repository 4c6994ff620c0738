package cuda

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		want string
	}{
		{&Error{Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Msg: "out of memory", Op: "cuMemAlloc 1 GiB"},
			"cuMemAlloc 1 GiB: CUDA_ERROR_OUT_OF_MEMORY: out of memory"},
		{&Error{Code: 600, Name: "CUDA_ERROR_NOT_READY", Op: "cuEventQuery"},
			"cuEventQuery: CUDA_ERROR_NOT_READY"},
		{&Error{Code: 1, Name: "CUDA_ERROR_INVALID_VALUE", Msg: "invalid argument"},
			"CUDA_ERROR_INVALID_VALUE: invalid argument"},
		{&Error{Code: 4242, Op: "cuFoo"}, "cuFoo: CUresult 4242"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestNewErrorNamesTheCode(t *testing.T) {
	// The upper half of the result register is undefined: only EAX counts.
	err := newError(0xdeadbeef_00000002, "cuMemAlloc "+Size(1<<30))
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeOutOfMemory {
		t.Fatalf("got %#v, want code %d", err, CodeOutOfMemory)
	}
	// Without a driver the name comes from the package's table; with one,
	// the driver adds its description.
	if !strings.HasPrefix(err.Error(), "cuMemAlloc 1 GiB: CUDA_ERROR_OUT_OF_MEMORY") {
		t.Errorf("got %q", err)
	}
	if loaded() != nil && e.Msg == "" {
		t.Errorf("driver loaded but %q has no description", err)
	}
}

func TestErrorIs(t *testing.T) {
	wrap := func(code int, op string) error { return fmt.Errorf("probe: %w", newError(uintptr(code), op)) }
	for _, tc := range []struct {
		err    error
		target error
		want   bool
	}{
		{wrap(CodeNotReady, "cuEventQuery"), ErrNotReady, true},
		{wrap(CodeNotReady, "cuEventQuery"), ErrOutOfMemory, false},
		{wrap(CodeOutOfMemory, "cuMemAlloc 1 GiB"), ErrOutOfMemory, true},
		{wrap(CodePeerAccessAlreadyEnabled, "cuCtxEnablePeerAccess"), ErrPeerAccessAlreadyEnabled, true},
		{wrap(CodeNotSupported, "cuMemAllocAsync"), ErrNotSupported, true},
		{wrap(CodeNoDevice, "cuInit"), ErrNotSupported, true},
		{wrap(CodePeerAccessUnsupported, "cuCtxEnablePeerAccess"), ErrNotSupported, true},
		{wrap(CodeIllegalAddress, "cuStreamSynchronize"), ErrNotSupported, false},
		{wrap(CodeIllegalAddress, "cuStreamSynchronize"), ErrIllegalAddress, true},
		// A sentinel matches by code; an error with an operation is not a sentinel.
		{ErrNotReady, &Error{Code: CodeNotReady, Op: "cuEventQuery"}, false},
		{notSupported("CUDA driver", "libcuda.so.1 not found: x", nil), ErrNotSupported, true},
	} {
		if got := errors.Is(tc.err, tc.target); got != tc.want {
			t.Errorf("errors.Is(%v, %v) = %v, want %v", tc.err, tc.target, got, tc.want)
		}
	}
	if !IsCode(wrap(CodeLaunchFailed, "cuLaunchKernel"), CodeLaunchFailed) || IsCode(errors.New("x"), CodeLaunchFailed) || IsCode(nil, 0) {
		t.Error("IsCode")
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int]string{
		0: "0 B", 100: "100 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB",
		64 << 10: "64 KiB", 1 << 20: "1 MiB", 1 << 30: "1 GiB", 12345: "12.1 KiB",
		1 << 50: "1 PiB", -2048: "-2 KiB",
	} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
