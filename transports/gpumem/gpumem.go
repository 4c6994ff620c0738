package gpumem

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/transports"
)

// Mode is an allocation strategy.
type Mode string

const (
	Plain  Mode = "plain"
	Worker Mode = "worker"
	Pool   Mode = "pool"
)

// Modes lists every mode, the unsafe-by-design one first.
var Modes = []Mode{Plain, Worker, Pool}

// OptionKey selects the mode.
const OptionKey = "gpu.alloc"

// Options documents the options this package reads; the built-in mode is
// the transport's.
var Options = &transports.OptionSet{Name: "gpu", Options: []transports.Option{
	{Key: OptionKey, Type: "plain|worker|pool", Help: "GPU message-buffer allocator: plain (cuMemAlloc/cuMemFree: a free may wait for running kernels, hazard H2), worker (frees on a worker thread) or pool (stream-ordered pool); built-in: the transport's (cudaipc: pool)"},
}}

// ParseMode reads a mode name.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("GPU allocator mode %q: want plain, worker or pool", s)
}

// ModeOption reads gpu.alloc from o (def when unset).
func ModeOption(o transports.Options, def Mode) (Mode, error) {
	s, ok := o[OptionKey]
	if !ok {
		return def, nil
	}
	m, err := ParseMode(s)
	if err != nil {
		return "", fmt.Errorf("option %s: %w", OptionKey, err)
	}
	return m, nil
}

// Allocator hands out device buffers of one device in one mode. Alloc and
// Free may be called from any goroutine locked to a thread with the
// device's context bound; the allocator itself is safe for concurrent use.
type Allocator struct {
	mode   Mode
	dev    *cuda.Device
	stream *cuda.Stream // pool: the stream allocations and frees are ordered on

	frees   chan *cuda.Buffer // worker
	done    chan struct{}
	errOnce sync.Once
	err     error // the worker's first failed free
}

// New returns an allocator for dev in mode. The caller's thread must have
// dev's context bound (for the pool's stream).
func New(dev *cuda.Device, mode Mode) (*Allocator, error) {
	a := &Allocator{mode: mode, dev: dev}
	switch mode {
	case Plain:
	case Pool:
		if !dev.MemoryPools {
			return nil, fmt.Errorf("gpu allocator pool on %s: %w", dev, cuda.ErrNotSupported)
		}
		s, err := cuda.NewStream(cuda.StreamNonBlocking)
		if err != nil {
			return nil, fmt.Errorf("gpu allocator pool on %s: %w", dev, err)
		}
		a.stream = s
	case Worker:
		a.frees, a.done = make(chan *cuda.Buffer, 1024), make(chan struct{})
		ready := make(chan error)
		go a.work(ready)
		if err := <-ready; err != nil {
			return nil, fmt.Errorf("gpu allocator worker on %s: %w", dev, err)
		}
	default:
		_, err := ParseMode(string(mode))
		return nil, err
	}
	return a, nil
}

// Mode returns the allocator's mode.
func (a *Allocator) Mode() Mode { return a.mode }

// work frees buffers handed over until the channel closes, on a thread of
// its own with the device's context bound.
func (a *Allocator) work(ready chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(a.done)
	if err := a.dev.Bind(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for b := range a.frees {
		if err := b.Free(); err != nil {
			a.errOnce.Do(func() { a.err = fmt.Errorf("gpu allocator worker: %w", err) })
		}
	}
}

// Alloc returns n bytes of device memory, usable from any stream.
func (a *Allocator) Alloc(n int) (*cuda.Buffer, error) {
	if a.mode != Pool {
		return a.dev.Alloc(cuda.MemDevice, n)
	}
	b, err := a.dev.AllocAsync(n, a.stream)
	if err != nil {
		return nil, err
	}
	// Ordered on the pool's stream: wait for it, so that work on any
	// other stream may use the memory.
	if err := a.stream.Synchronize(); err != nil {
		return nil, errors.Join(err, b.Free())
	}
	return b, nil
}

// Free returns b: at once (plain), through the worker, or in stream order
// on the pool's stream. Work on other streams that uses b must be complete.
func (a *Allocator) Free(b *cuda.Buffer) error {
	switch a.mode {
	case Worker:
		a.frees <- b
		return nil
	case Pool:
		return b.FreeAsync(a.stream)
	}
	return b.Free()
}

// Close waits for the worker's frees or the pool's stream and reports the
// first failed free.
func (a *Allocator) Close() error {
	switch a.mode {
	case Worker:
		close(a.frees)
		<-a.done
		return a.err
	case Pool:
		return errors.Join(a.stream.Synchronize(), a.stream.Destroy())
	}
	return nil
}
