package cuda

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// StreamFlags are CUstream_flags.
type StreamFlags uint32

const (
	// StreamBlocking (CU_STREAM_DEFAULT) synchronizes with the legacy default
	// stream: work on it waits for, and holds up, legacy-stream work such as
	// the synchronous copies.
	StreamBlocking StreamFlags = 0x0
	// StreamNonBlocking (CU_STREAM_NON_BLOCKING) does not synchronize with
	// the legacy default stream.
	StreamNonBlocking StreamFlags = 0x1
)

// Stream is a CUstream. A nil *Stream is the default stream of the calling
// thread's context, which is the legacy stream.
type Stream struct {
	h uintptr
}

// The predefined stream handles (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD).
var (
	LegacyStream    = &Stream{h: 0x1}
	PerThreadStream = &Stream{h: 0x2}
)

func (s *Stream) handle() uintptr {
	if s == nil {
		return 0
	}
	return s.h
}

// Handle returns the CUstream (0 for nil: the default stream).
func (s *Stream) Handle() uintptr { return s.handle() }

// NewStream creates a stream in the bound context.
func NewStream(flags StreamFlags) (*Stream, error) {
	h, err := create(&table.cuStreamCreate, "cuStreamCreate", uint32(flags))
	if err != nil {
		return nil, err
	}
	return &Stream{h: h}, nil
}

// create makes a stream or an event with the entry point *fn, of
// cuStreamCreate's and cuEventCreate's shape (out handle, flags).
func create(fn *uintptr, op string, flags uint32) (uintptr, error) {
	if err := Load(); err != nil {
		return 0, err
	}
	var h uintptr
	if r, _, _ := purego.SyscallN(*fn, uintptr(unsafe.Pointer(&h)), uintptr(flags)); uint32(r) != 0 {
		return 0, newError(r, fmt.Sprintf("%s flags %#x", op, flags))
	}
	return h, nil
}

// Destroy destroys a stream made by NewStream; the predefined streams and a
// destroyed one are left alone.
func (s *Stream) Destroy() error {
	if s == nil || s.h <= 0x2 {
		return nil
	}
	return release(&s.h, &table.cuStreamDestroy, "cuStreamDestroy")
}

// Synchronize waits until all work queued on s has completed.
func (s *Stream) Synchronize() error {
	return invoke(&table.cuStreamSynchronize, "cuStreamSynchronize", s.handle())
}

// Query reports whether all work queued on s has completed, without
// waiting. It allocates nothing.
func (s *Stream) Query() (bool, error) {
	return ready(&table.cuStreamQuery, s.handle(), "cuStreamQuery")
}

// WaitEvent makes future work on s wait for e's last recorded work.
func (s *Stream) WaitEvent(e *Event) error {
	return invoke(&table.cuStreamWaitEvent, "cuStreamWaitEvent", s.handle(), e.h, 0)
}

// EventFlags are CUevent_flags.
type EventFlags uint32

const (
	EventDefault       EventFlags = 0x0
	EventBlockingSync  EventFlags = 0x1 // the host sleeps in Synchronize
	EventDisableTiming EventFlags = 0x2 // no timestamps: cheaper record and query
	EventInterprocess  EventFlags = 0x4 // IPC-shareable; needs EventDisableTiming
)

// Event is a CUevent.
type Event struct {
	h  uintptr
	ms float32 // cuEventElapsedTime's result lands here: no allocation
}

// Handle returns the CUevent.
func (e *Event) Handle() uintptr { return e.h }

// NewEvent creates an event in the bound context.
func NewEvent(flags EventFlags) (*Event, error) {
	h, err := create(&table.cuEventCreate, "cuEventCreate", uint32(flags))
	if err != nil {
		return nil, err
	}
	return &Event{h: h}, nil
}

// Destroy destroys the event; a second Destroy does nothing.
func (e *Event) Destroy() error {
	if e == nil || e.h == 0 {
		return nil
	}
	return release(&e.h, &table.cuEventDestroy, "cuEventDestroy")
}

// Record captures the work queued on s so far. It allocates nothing.
func (e *Event) Record(s *Stream) error {
	return invoke(&table.cuEventRecord, "cuEventRecord", e.h, s.handle())
}

// Query reports whether the recorded work has completed, without waiting.
// It allocates nothing.
func (e *Event) Query() (bool, error) {
	return ready(&table.cuEventQuery, e.h, "cuEventQuery")
}

// Synchronize waits for the recorded work.
func (e *Event) Synchronize() error {
	return invoke(&table.cuEventSynchronize, "cuEventSynchronize", e.h)
}

// Since returns the GPU time between start's and e's completion (both
// recorded and complete, neither with EventDisableTiming); resolution is
// about half a microsecond.
func (e *Event) Since(start *Event) (time.Duration, error) {
	d, err := lib()
	if err != nil {
		return 0, err
	}
	// e.ms is a field of a heap object kept alive below: no allocation.
	r := call(d.cuEventElapsedTime, uintptr(unsafe.Pointer(&e.ms)), start.h, e.h)
	ms := e.ms
	runtime.KeepAlive(e)
	if uint32(r) != 0 {
		return 0, newError(r, "cuEventElapsedTime")
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// WriteValue32 queues a store of v at addr on s, after the work queued
// before it and behind a memory barrier (cuStreamWriteValue32 with
// CU_STREAM_WRITE_VALUE_DEFAULT): whoever reads v at addr also sees what
// that work wrote. addr is device memory or the device pointer of
// registered host memory (HostDevicePointer), where a host thread can
// poll it. It allocates nothing; ErrNotSupported from a driver without
// stream memory operations.
func (s *Stream) WriteValue32(addr uintptr, v uint32) error {
	return s.memOp32(&table.cuStreamWriteValue32, "cuStreamWriteValue32", addr, v)
}

// WaitValue32 makes the work queued on s after it wait until the 32-bit
// word at addr has reached v, compared cyclically ((int32)(*addr-v) >= 0:
// cuStreamWaitValue32 with CU_STREAM_WAIT_VALUE_GEQ). addr is as for
// WriteValue32; a host thread may store the word. It allocates nothing;
// ErrNotSupported from a driver without stream memory operations.
func (s *Stream) WaitValue32(addr uintptr, v uint32) error {
	return s.memOp32(&table.cuStreamWaitValue32, "cuStreamWaitValue32", addr, v)
}

// memOp32 queues the stream memory operation fn (op names it) on the
// 32-bit word at addr with value v and default flags; ErrNotSupported
// when the driver does not export it.
func (s *Stream) memOp32(fn *uintptr, op string, addr uintptr, v uint32) error {
	if err := Load(); err != nil {
		return err
	}
	if err := needSymbol(*fn, op); err != nil {
		return err
	}
	return result(call(*fn, s.handle(), addr, uintptr(v), 0), op)
}

// HostDevicePointer is the device address of host memory at p, which
// RegisterHost (or cuMemHostAlloc) mapped for the device
// (cuMemHostGetDevicePointer).
func HostDevicePointer(p uintptr) (uintptr, error) {
	d, err := lib()
	if err != nil {
		return 0, err
	}
	if err := needSymbol(d.cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer"); err != nil {
		return 0, err
	}
	var dp uintptr
	if r, _, _ := purego.SyscallN(d.cuMemHostGetDevicePointer, uintptr(unsafe.Pointer(&dp)), p, 0); uint32(r) != 0 {
		return 0, newError(r, "cuMemHostGetDevicePointer")
	}
	return dp, nil
}

// CopyAsync queues a copy of n bytes from src to dst on s (cuMemcpyAsync:
// unified addressing infers the direction). Host memory must be pinned for
// the copy to be asynchronous; pageable host memory makes it synchronous.
// It allocates nothing.
func CopyAsync(dst, src uintptr, n int, s *Stream) error {
	return invokeSized(&table.cuMemcpyAsync, "cuMemcpyAsync", n, dst, src, uintptr(n), s.handle())
}

// CopyPeerAsync queues a copy of n bytes from src in srcDev's context to dst
// in dstDev's context on s (cuMemcpyPeerAsync).
func CopyPeerAsync(dst uintptr, dstDev *Device, src uintptr, srcDev *Device, n int, s *Stream) error {
	d, err := lib()
	if err != nil {
		return err
	}
	if r := call(d.cuMemcpyPeerAsync, dst, dstDev.ctx, src, srcDev.ctx, uintptr(n), s.handle()); uint32(r) != 0 {
		return newError(r, fmt.Sprintf("cuMemcpyPeerAsync %s cuda%d->cuda%d", Size(n), srcDev.Ordinal, dstDev.Ordinal))
	}
	return nil
}

// Copy copies n bytes from src to dst (cuMemcpy) on the legacy default
// stream, so it first waits for every blocking stream of the context: the
// coupling of hazard H4. It returns when the copy is done only towards host
// memory: from pageable host memory to the device it returns once src is
// staged (see CopyHtoD), and device to device before the copy completes
// (see CopyDtoD).
func Copy(dst, src uintptr, n int) error {
	return invokeSized(&table.cuMemcpy, "cuMemcpy", n, dst, src, uintptr(n))
}

// CopyHtoD copies src to device memory dst (cuMemcpyHtoD, on the legacy
// default stream: see Copy) and returns once the bytes are in device
// memory. src may be Go memory. From pageable memory CUDA returns once src
// is staged, before the DMA lands (the driver API's "API synchronization
// behavior"), and work on a non-blocking stream could read the old bytes:
// on an H200, 5 of 17 runs read a buffer's last 12345 bytes as zeros. So
// it also waits for the legacy stream.
func CopyHtoD(dst uintptr, src []byte) error {
	d, err := lib()
	if err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	if r, _, _ := purego.SyscallN(d.cuMemcpyHtoD, dst, uintptr(unsafe.Pointer(&src[0])), uintptr(len(src))); uint32(r) != 0 {
		return newError(r, "cuMemcpyHtoD "+Size(len(src)))
	}
	if err := LegacyStream.Synchronize(); err != nil {
		return fmt.Errorf("cuMemcpyHtoD %s: %w", Size(len(src)), err)
	}
	return nil
}

// CopyDtoH copies device memory src to dst (cuMemcpyDtoH, synchronous, on
// the legacy default stream: see Copy). dst may be Go memory.
func CopyDtoH(dst []byte, src uintptr) error {
	d, err := lib()
	if err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	if r, _, _ := purego.SyscallN(d.cuMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), src, uintptr(len(dst))); uint32(r) != 0 {
		return newError(r, "cuMemcpyDtoH "+Size(len(dst)))
	}
	return nil
}

// CopyDtoD copies n bytes between device memory (cuMemcpyDtoD, on the legacy
// default stream: see Copy) and returns when done. The driver returns from a
// device-to-device copy before it completes, and a non-blocking stream does
// not wait for it, so without the wait a copy on one (validation's staging)
// could read the bytes this copy has yet to write.
func CopyDtoD(dst, src uintptr, n int) error {
	if err := invokeSized(&table.cuMemcpyDtoD, "cuMemcpyDtoD", n, dst, src, uintptr(n)); err != nil {
		return err
	}
	return LegacyStream.Synchronize()
}

// Memset sets n bytes at device (or managed) memory dst to v (cuMemsetD8,
// on the legacy default stream) and returns when done: like CopyDtoD's, the
// driver's memset of device memory is asynchronous to the host.
func Memset(dst uintptr, v byte, n int) error {
	if err := invokeSized(&table.cuMemsetD8, "cuMemsetD8", n, dst, uintptr(v), uintptr(n)); err != nil {
		return err
	}
	return LegacyStream.Synchronize()
}

// MemsetAsync queues setting n bytes at dst to v on s. It allocates nothing.
func MemsetAsync(dst uintptr, v byte, n int, s *Stream) error {
	return invokeSized(&table.cuMemsetD8Async, "cuMemsetD8Async", n, dst, uintptr(v), uintptr(n), s.handle())
}
