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

// The relay: a block that stays on the rank's device while the host keeps
// it busy and copies small messages the host rings for (relay.ptx), so
// that a small device-to-device message pays neither a kernel launch nor
// a copy engine, the ~9 µs floor of a copy the host starts and notices
// (docs/performance.md, GPU). The host writes {dst, src, n}, each tagged
// with the message's number, to a bell in pinned host memory the device
// reads over the bus, and learns the copy is done when the number appears
// in a host word the block stores. The block takes the messages in turn;
// the host rings up to relayDepth ahead of it.
//
// The host rings only a block that has said it started and not that it
// ended: one launched behind a kernel that holds every SM waits for that
// kernel, and the copies meanwhile take the copy engines (the caller's
// stream path), which run beside any kernel. The block ends after
// relayIdlePolls empty polls (about 0.1 ms), since a block that stayed
// would hold every call that waits for the whole context (a module load,
// cuMemFree, cudaDeviceSynchronize) until the transport closed; a copy
// that finds it ended launches it again for the next ones. A message rung
// just as the block ended is copied by the relay's stream instead, and the
// host stores its number: only once the block has ended, and the next
// launch starts past it, so no copy is made twice.
//
// Why a block and not a stream's memory operations around a copy: those
// still queue the copy on a copy engine; the host-to-stream signal alone is
// 3.6 µs a round trip (BenchmarkGPUSignal in internal/cuda).

//go:embed relay.ptx
var relayPTX string

// relayEntry is the kernel's name in relay.ptx.
const relayEntry = "gotune_relay"

// relayBlock is the block's width: small messages need no more.
const relayBlock = 128

// relayIdlePolls is how many empty polls of the bell end the block: each
// is a read over the bus, about 1-2 µs on an H200 host.
const relayIdlePolls = 64

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

// relayPage is the layout of the relay's own host page: the bell, the
// block's start and exit words, and a done word used when the caller gives
// none, each word on a line of its own.
type relayPage struct {
	bell    [relayDepth]relaySlot
	_       [8]uint64
	started uint64 // the number of the last launch that started
	_       [7]uint64
	exited  uint64 // the number of the last launch that ended
	_       [7]uint64
	done    uint64
}

// relayStopWait bounds the waits for messages rung and for the block to
// end.
const relayStopWait = 10 * time.Second

// relay is a copy block on the bound device, launched when messages come.
type relay struct {
	mod      *cuda.Module
	fn       *cuda.Function
	s        *cuda.Stream
	page     []byte // registered host memory holding a relayPage
	bell     *[relayDepth]relaySlot
	started  *uint64
	exited   *uint64
	done     *uint64 // where the block stores each message's number
	at       [4]uintptr
	last     uint64 // the number of the last message rung
	launch   uint64 // the number of the last launch
	args     cuda.Args
	stopped  bool
	refused  error // the last launch's refusal, nil once one is made
	released bool  // the page and stream are freed
	// run launches the block from message first as launch number launch;
	// copy queues one copy on the relay's stream and settle waits for
	// them (launchBlock, copyOnStream, the stream's Synchronize; tests put
	// fakes here).
	run    func(first, launch uint64) error
	copy   func(dst, src, n uint64) error
	settle func() error
}

// startRelay loads the kernel and readies its bell and stream in the
// context bound to the calling thread; copies launch the block. The block
// stores each message's number into done, a word of host memory
// registered with the driver (peers may poll it in shared memory); nil: a
// word of the relay's own page.
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
	if r.fn, err = mod.Function(relayEntry); err != nil {
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
	r.bell, r.started, r.exited, r.done = &own.bell, &own.started, &own.exited, done
	if done == nil {
		r.done = &own.done
	}
	atomic.StoreUint64(r.done, 0)
	for i, w := range []unsafe.Pointer{unsafe.Pointer(r.bell), unsafe.Pointer(r.done), unsafe.Pointer(r.exited), unsafe.Pointer(r.started)} {
		if r.at[i], err = cuda.HostDevicePointer(uintptr(w)); err != nil {
			return fail(fmt.Errorf("cudaipc: relay words' device address: %w", err))
		}
	}
	if r.s, err = cuda.NewStream(cuda.StreamNonBlocking); err != nil {
		return fail(fmt.Errorf("cudaipc: relay stream: %w", err))
	}
	r.run, r.copy, r.settle = r.launchBlock, r.copyOnStream, r.s.Synchronize
	return r, nil
}

// launchBlock queues the block on the relay's stream.
func (r *relay) launchBlock(first, launch uint64) error {
	r.args.Reset()
	r.args.SetPtr(0, r.at[0]).SetPtr(1, r.at[1]).Set(2, relayDepth).Set(3, first).Set(4, relayIdlePolls).
		SetPtr(5, r.at[2]).Set(6, launch).SetPtr(7, r.at[3])
	return r.fn.Launch(cuda.Dim3{X: 1}, cuda.Dim3{X: relayBlock}, 0, r.s, &r.args)
}

// copyOnStream queues a copy the block did not take on the relay's stream.
func (r *relay) copyOnStream(dst, src, n uint64) error {
	return cuda.CopyAsync(uintptr(dst), uintptr(src), int(n), r.s)
}

// running reports whether the block has started and not ended: a message
// rung now is taken (or, if the block ends first, copied by revive).
func (r *relay) running() bool {
	return !r.stopped && r.launch > 0 && atomic.LoadUint64(r.started) == r.launch && atomic.LoadUint64(r.exited) != r.launch
}

// free reports whether a message may be rung: fewer than relayDepth are
// not yet done.
func (r *relay) free() bool { return r.last-atomic.LoadUint64(r.done) < relayDepth }

// ring asks the block to copy n bytes from src to dst (device addresses it
// can reach: its own memory or a peer's opened by IPC) and returns the
// message's number. Only while running and free.
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

// warm launches the block for the copies to come when none is running or
// waiting to start, after settling what an ended block left; only that
// can fail. A launch refused leaves the copies on the stream, which needs
// no block: it is kept in refused, and the next copy tries again.
func (r *relay) warm() error {
	if r.stopped || atomic.LoadUint64(r.exited) != r.launch {
		return nil // running, or launched and not yet started, or stopped
	}
	if err := r.revive(); err != nil {
		return err
	}
	r.launch++
	if err := r.run(r.last+1, r.launch); err != nil {
		r.launch-- // none runs
		r.refused = fmt.Errorf("cudaipc: launch the relay: %w", err)
		return nil
	}
	r.refused = nil
	return nil
}

// revive copies, on the relay's stream, the messages an ended block did
// not take, waits for them and stores the last one's number as the block
// would have. Only once the block has ended: no copy is made twice.
func (r *relay) revive() error {
	if r.released || atomic.LoadUint64(r.exited) != r.launch {
		return nil // its words are gone, or a block runs or waits to start
	}
	first := atomic.LoadUint64(r.done) + 1
	if first > r.last {
		return nil
	}
	for k := first; k <= r.last; k++ {
		slot := &r.bell[k%relayDepth]
		if n := slot.n & relayLow; n == relayStop {
			continue // stop's message: nothing to copy
		}
		if err := r.copy(slot.dst&relayLow, slot.src&relayLow, slot.n&relayLow); err != nil {
			return fmt.Errorf("cudaipc: copy relay message %d the block did not take: %w", k, err)
		}
	}
	if err := r.settle(); err != nil {
		return fmt.Errorf("cudaipc: relay messages %d-%d the block did not take: %w", first, r.last, err)
	}
	atomic.StoreUint64(r.done, r.last)
	return nil
}

// landed reports whether message number has landed, copying what an ended
// block left.
func (r *relay) landed(number uint64) (bool, error) {
	if relayReached(r.done, number) {
		return true, nil
	}
	if err := r.revive(); err != nil {
		return false, err
	}
	return relayReached(r.done, number), nil
}

// drain waits until every message rung is done, or fails at deadline.
func (r *relay) drain(deadline time.Time) error {
	for {
		ok, err := r.landed(r.last)
		if ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cudaipc: relay: %d messages still not done after %v", r.last-atomic.LoadUint64(r.done), relayStopWait)
		}
		runtime.Gosched()
	}
}

// relayReached reports whether a relay's done word, read from any
// process, shows message number landed.
func relayReached(done *uint64, number uint64) bool { return atomic.LoadUint64(done) >= number }

// stop waits for the messages rung, tells a block that runs or waits to
// start to end, waits for its stream (each wait at most relayStopWait),
// then frees what start took. A relay whose block may still run is not
// freed (freeing would wait for it): stop fails, and fails again if
// called again.
func (r *relay) stop() error {
	if r.stopped {
		return nil
	}
	deadline := time.Now().Add(relayStopWait)
	if err := r.drain(deadline); err != nil {
		return err
	}
	r.stopped = true
	if atomic.LoadUint64(r.exited) != r.launch {
		r.put(0, 0, relayStop) // if it ends meanwhile, nothing reads this
	}
	for deadline = time.Now().Add(relayStopWait); ; {
		ended, err := r.s.Query()
		if err != nil {
			r.stopped = false
			return fmt.Errorf("cudaipc: relay stream: %w", err)
		}
		if ended {
			return r.release()
		}
		if time.Now().After(deadline) {
			r.stopped = false
			return fmt.Errorf("cudaipc: relay kernel still running %v after it was told to stop", relayStopWait)
		}
		runtime.Gosched()
	}
}

// release frees the stream, page and module; the kernel must have ended.
func (r *relay) release() error {
	r.released = true
	var errs []error
	if r.s != nil {
		errs = append(errs, r.s.Destroy())
	}
	if r.page != nil {
		errs = append(errs, cuda.UnregisterHost(r.page))
		sys.Unmap(r.page)
		r.page = nil
	}
	errs = append(errs, r.mod.Unload())
	return errors.Join(errs...)
}
