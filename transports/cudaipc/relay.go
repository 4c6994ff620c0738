package cudaipc

import (
	_ "embed"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/sys"
)

// The relay: a block that stays resident on the rank's device and copies
// small messages the host rings for (relay.ptx), so that a small
// device-to-device message pays neither a kernel launch nor a copy engine,
// the ~9 µs floor of a copy the host starts and notices
// (docs/performance.md, GPU). The host writes {dst, src, n}, each tagged
// with the message's number, to a bell in pinned host memory the device
// reads over the bus, and learns the copy is done when the number appears
// in a host word the block stores. One message at a time: the host rings
// again only once the last is done.
//
// Why resident and not a stream's memory operations around a copy: those
// still queue the copy on a copy engine; the host-to-stream signal alone is
// 3.6 µs a round trip (BenchmarkGPUSignal in internal/cuda).

//go:embed relay.ptx
var relayPTX string

// relayEntry is the kernel's name in relay.ptx.
const relayEntry = "gotune_relay"

// relayBlock is the resident block's width: small messages need no more.
const relayBlock = 128

// A bell word holds an address or length in its low relayTagShift bits
// and the low bits of the message's number above them (relay.ptx): a
// device reading all three at once knows a word left from the message
// before by its tag. Device addresses and lengths fit in 48 bits.
const (
	relayTagShift = 48
	relayLow      = 1<<relayTagShift - 1
	relayStop     = relayLow // n that ends the kernel
)

// relayWords is the host page's layout: the bell, then the done word on a
// line of its own (the device writes it while the host polls it; the host
// writes the bell).
type relayWords struct {
	dst, src, n uint64
	_           [5]uint64
	done        uint64
}

// relay is a running resident copy kernel on the bound device.
type relay struct {
	mod    *cuda.Module
	s      *cuda.Stream
	page   []byte // registered host memory holding words
	words  *relayWords
	last   uint64 // the number of the last message rung
	closed bool
}

// startRelay loads the kernel and launches its block on a stream of its
// own, in the context bound to the calling thread.
func startRelay() (*relay, error) {
	mod, err := cuda.LoadModule([]byte(relayPTX))
	if err != nil {
		return nil, fmt.Errorf("cudaipc: load the relay kernel: %w", err)
	}
	r := &relay{mod: mod}
	fail := func(err error) (*relay, error) {
		r.release()
		return nil, err
	}
	fn, err := mod.Function(relayEntry)
	if err != nil {
		return fail(fmt.Errorf("cudaipc: %w", err))
	}
	if r.page, err = sys.MapAnon(sys.PageSize, true); err != nil {
		return fail(fmt.Errorf("cudaipc: relay page: %w", err))
	}
	if err := cuda.RegisterHost(r.page, 0); err != nil {
		sys.Unmap(r.page)
		r.page = nil
		return fail(fmt.Errorf("cudaipc: register the relay page: %w", err))
	}
	r.words = (*relayWords)(unsafe.Pointer(&r.page[0]))
	base, err := cuda.HostDevicePointer(sys.AddressOf(r.page))
	if err != nil {
		return fail(fmt.Errorf("cudaipc: relay page's device address: %w", err))
	}
	if r.s, err = cuda.NewStream(cuda.StreamNonBlocking); err != nil {
		return fail(fmt.Errorf("cudaipc: relay stream: %w", err))
	}
	var args cuda.Args
	args.SetPtr(0, base).SetPtr(1, base+unsafe.Offsetof(r.words.done))
	if err := fn.Launch(cuda.Dim3{X: 1}, cuda.Dim3{X: relayBlock}, 0, r.s, &args); err != nil {
		return fail(fmt.Errorf("cudaipc: launch the relay: %w", err))
	}
	return r, nil
}

// ring asks the block to copy n bytes from src to dst (device addresses it
// can reach: its own memory or a peer's opened by IPC) and returns the
// message's number. The previous message must be done.
func (r *relay) ring(dst, src uintptr, n int) (uint64, error) {
	if uint64(dst)|uint64(src) > relayLow || n < 0 || uint64(n) >= relayStop {
		return 0, fmt.Errorf("cudaipc: relay of %d bytes from %#x to %#x: beyond its 48-bit words", n, src, dst)
	}
	r.last++
	tag := r.last << relayTagShift
	atomic.StoreUint64(&r.words.dst, uint64(dst)|tag)
	atomic.StoreUint64(&r.words.src, uint64(src)|tag)
	atomic.StoreUint64(&r.words.n, uint64(n)|tag)
	return r.last, nil
}

// done reports whether message number has landed.
func (r *relay) done(number uint64) bool { return atomic.LoadUint64(&r.words.done) >= number }

// stop ends the kernel and waits for its stream, then frees what start
// took. A stopped relay stays stopped.
func (r *relay) stop() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.last++
	tag := r.last << relayTagShift
	atomic.StoreUint64(&r.words.dst, tag)
	atomic.StoreUint64(&r.words.src, tag)
	atomic.StoreUint64(&r.words.n, relayStop|tag)
	err := r.s.Synchronize()
	return errors.Join(err, r.release())
}

// release frees the stream, page and module; the kernel must have ended.
func (r *relay) release() error {
	var errs []error
	if r.s != nil {
		errs = append(errs, r.s.Destroy())
	}
	if r.page != nil {
		errs = append(errs, cuda.UnregisterHost(r.page))
		sys.Unmap(r.page)
	}
	errs = append(errs, r.mod.Unload())
	return errors.Join(errs...)
}
