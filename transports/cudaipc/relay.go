package cudaipc

import (
	_ "embed"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
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
// in a host word the block stores. The block takes the messages in turn;
// the host rings up to relayDepth ahead of it.
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
// device reading all three at once knows a word left from an earlier
// message by its tag. Device addresses and lengths fit in 48 bits.
const (
	relayTagShift = 48
	relayLow      = 1<<relayTagShift - 1
	relayStop     = relayLow // n that ends the kernel
)

// relayDepth is how many messages the host may ring ahead of the block.
const relayDepth = 16

// relaySlot is one message's slot in the bell.
type relaySlot struct{ dst, src, n, _ uint64 }

// relayPage is the layout of the relay's own host page: the bell, then a
// done word on a line of its own, used when the caller gives none.
type relayPage struct {
	bell [relayDepth]relaySlot
	_    [8]uint64
	done uint64
}

// relayStopWait bounds stop's wait for the block to end.
const relayStopWait = 10 * time.Second

// relay is a running resident copy kernel on the bound device.
type relay struct {
	mod    *cuda.Module
	s      *cuda.Stream
	page   []byte // registered host memory holding a relayPage
	bell   *[relayDepth]relaySlot
	done   *uint64 // where the block stores each message's number
	last   uint64  // the number of the last message rung
	closed bool
}

// startRelay loads the kernel and launches its block on a stream of its
// own, in the context bound to the calling thread. The block stores each
// message's number into done, a word of host memory registered with the
// driver (peers may poll it in shared memory); nil: a word of the relay's
// own page.
func startRelay(done *uint64) (*relay, error) {
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
	own := (*relayPage)(unsafe.Pointer(&r.page[0]))
	r.bell, r.done = &own.bell, done
	if done == nil {
		r.done = &own.done
	}
	atomic.StoreUint64(r.done, 0)
	bell, err := cuda.HostDevicePointer(uintptr(unsafe.Pointer(r.bell)))
	if err != nil {
		return fail(fmt.Errorf("cudaipc: relay bell's device address: %w", err))
	}
	doneAt, err := cuda.HostDevicePointer(uintptr(unsafe.Pointer(r.done)))
	if err != nil {
		return fail(fmt.Errorf("cudaipc: relay done word's device address: %w", err))
	}
	if r.s, err = cuda.NewStream(cuda.StreamNonBlocking); err != nil {
		return fail(fmt.Errorf("cudaipc: relay stream: %w", err))
	}
	var args cuda.Args
	args.SetPtr(0, bell).SetPtr(1, doneAt).Set(2, relayDepth)
	if err := fn.Launch(cuda.Dim3{X: 1}, cuda.Dim3{X: relayBlock}, 0, r.s, &args); err != nil {
		return fail(fmt.Errorf("cudaipc: launch the relay: %w", err))
	}
	return r, nil
}

// free reports whether a message may be rung: fewer than relayDepth are
// not yet done.
func (r *relay) free() bool { return r.last-atomic.LoadUint64(r.done) < relayDepth }

// ring asks the block to copy n bytes from src to dst (device addresses it
// can reach: its own memory or a peer's opened by IPC) and returns the
// message's number. Only when free.
func (r *relay) ring(dst, src uintptr, n int) (uint64, error) {
	if uint64(dst)|uint64(src) > relayLow || n < 0 || uint64(n) >= relayStop {
		return 0, fmt.Errorf("cudaipc: relay of %d bytes from %#x to %#x: beyond its 48-bit words", n, src, dst)
	}
	return r.put(uint64(dst), uint64(src), uint64(n)), nil
}

// put writes the next message's slot, the length last.
func (r *relay) put(dst, src, n uint64) uint64 {
	r.last++
	tag := r.last << relayTagShift
	slot := &r.bell[r.last%relayDepth]
	atomic.StoreUint64(&slot.dst, dst|tag)
	atomic.StoreUint64(&slot.src, src|tag)
	atomic.StoreUint64(&slot.n, n|tag)
	return r.last
}

// drain waits until every message rung is done, or fails at deadline.
func (r *relay) drain(deadline time.Time) error {
	for !relayReached(r.done, r.last) {
		if time.Now().After(deadline) {
			return fmt.Errorf("cudaipc: relay: %d messages still not done after %v", r.last-atomic.LoadUint64(r.done), relayStopWait)
		}
		runtime.Gosched()
	}
	return nil
}

// relayReached reports whether a relay's done word, read from any
// process, shows message number landed.
func relayReached(done *uint64, number uint64) bool { return atomic.LoadUint64(done) >= number }

// stop ends the kernel once the messages rung are done and waits for its
// stream (at most relayStopWait), then frees what start took. A stopped
// relay stays stopped.
func (r *relay) stop() error {
	if r.closed {
		return nil
	}
	r.closed = true
	deadline := time.Now().Add(relayStopWait)
	if err := r.drain(deadline); err != nil {
		return err
	}
	r.put(0, 0, relayStop)
	for {
		ended, err := r.s.Query()
		if err != nil {
			return errors.Join(fmt.Errorf("cudaipc: relay stream: %w", err), r.release())
		}
		if ended {
			return r.release()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cudaipc: relay kernel still running %v after it was told to stop", relayStopWait)
		}
		runtime.Gosched()
	}
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
