package bench

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/gotune/gotune/internal/cuda"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/hostmem"
)

// loop runs one pattern at one size between rank 0 (which times) and rank 1.
type loop struct {
	t             transports.Transport
	rank, peer    int
	lead          bool // starts each exchange with peer: sends first, times the pair (rank 0 of a pair)
	ranks         int  // of the job: 2 for a pair, Spec.Ranks for a multi-rank pattern
	multi         bool // a multi-rank pattern: every rank times, and passes line up at a barrier
	pattern       Pattern
	size          int
	iters, warmup int
	window        int
	peers         int      // alltoall above the scatter size: Spec.Peers
	places        int      // alltoall, pairwise: the places its steps take in turn (allToAllPlacesIn)
	sbuf, rbuf    [][]byte // one buffer each (as OSU), one per window slot when validating, or Spec.Buffers
	ack           []byte
	validate      bool
	reqs          []transports.Request
	iterNS        []int64 // per-iteration times of the distribution pass (rank 0)
	// blockNS holds alltoall's time per block of steps (exchangeAll) in
	// each iteration of the distribution pass: blockNS[b][iteration].
	blockNS [][]int64
	// longestWait is the longest rank 0 waited at one step of a loaded
	// pass so far: lining up before the timer starts, or one iteration of
	// any pass, warm-up included. steps says whether this rank times them
	// (rank 0 beside a load kernel; rank 1 never reports them).
	longestWait    time.Duration
	steps          bool
	timeIterations bool
	churn          *churn   // alloc pattern: per-message buffers (alloc.go)
	stage          *stager  // device buffers: validation goes through host scratch (gpu.go)
	want           []byte   // a validated collective's expected result (collective.go)
	load           *gpuLoad // the GPU load kernel, run during every timed pass (gpu.go)
}

// arena holds a rank's message buffers for a whole run, allocated once for
// the largest size, as OSU does: remapping per size would hand memory back
// to the kernel (and, in a VM with free-page reporting, to the host) and
// measure fresh page faults' after-effects instead of the transport.
//
// With a GPU (g not nil) the message buffers are of the rank's memory kind
// (gpu.go); the acknowledgement stays in host memory.
type arena struct {
	send, recv [][]byte // one buffer each (as OSU), or one per window slot when validating
	ack        []byte
	heap       *hostmem.Allocator // alloc pattern only
	mapped     [][]byte           // host memory from Alloc, to Free
	gpuBufs    []*cuda.Buffer     // message buffers of a GPU memory kind
	stage      *stager            // device buffers under --validate
	load       *gpuLoad           // the rank's GPU load kernel, if any (owned by its rankGPU)
}

func newArena(spec Spec, rank int, g *rankGPU) (*arena, error) {
	if spec.Pattern == AllocChurn {
		return newChurnArena(spec)
	}
	largest := max(slices.Max(spec.Sizes), spec.Settle)
	if spec.Pattern == AllToAll { // the settling pass takes whatever places fit
		largest = max(allToAllBytes(slices.Max(spec.Sizes), spec.RankCount(), spec.Peers), spec.Settle)
	}
	sendSlots, recvSlots := spec.bufferSlots(rank)
	a := &arena{}
	alloc := func(n int, c byte) ([]byte, error) {
		b, err := a.alloc(n)
		if err == nil {
			fillBytes(b, c)
		}
		return b, err
	}
	if g != nil {
		a.load = g.load
		if g.kind != cuda.MemHost {
			alloc = func(n int, c byte) ([]byte, error) {
				v, b, err := g.alloc(n)
				if err != nil {
					return nil, err
				}
				a.gpuBufs = append(a.gpuBufs, b)
				switch {
				case g.kind == cuda.MemPinned:
					fillBytes(v, c)
				case n > 0:
					// On the device (managed memory too, as OSU's cudaMemset).
					if err := cuda.Memset(b.Ptr(), c, n); err != nil {
						return nil, fmt.Errorf("fill %d-byte %s message buffer: %w", n, g.kind, err)
					}
				}
				return v, nil
			}
		}
	}
	for k := range max(sendSlots, recvSlots) {
		for _, buf := range []struct {
			list  *[][]byte
			fill  byte
			slots int
		}{{&a.send, SendFill, sendSlots}, {&a.recv, RecvFill, recvSlots}} {
			if k >= buf.slots {
				continue
			}
			b, err := alloc(largest, buf.fill)
			if err != nil {
				a.free()
				return nil, err
			}
			*buf.list = append(*buf.list, b)
		}
	}
	ack, err := a.alloc(4)
	if err != nil {
		a.free()
		return nil, err
	}
	a.ack = ack
	if g != nil && spec.Validate && !g.kind.HostVisible() {
		if a.stage, err = g.newStager(largest); err != nil {
			a.free()
			return nil, err
		}
	}
	return a, nil
}

// SendFill and RecvFill are what every send and receive buffer holds
// before the first message, as in OSU (set_buffer): real bytes, not the
// zeros of fresh pages, which flatter some paths (sm's streaming stores;
// docs/tuner.md, One point).
const (
	SendFill byte = 'a'
	RecvFill byte = 'b'
)

// fillBytes sets every byte of b to c.
func fillBytes(b []byte, c byte) {
	if len(b) == 0 {
		return
	}
	b[0] = c
	for n := 1; n < len(b); n *= 2 {
		copy(b[n:], b[:n])
	}
}

// alloc is Alloc, recorded for free.
func (a *arena) alloc(n int) ([]byte, error) {
	b, err := Alloc(n)
	if err == nil {
		a.mapped = append(a.mapped, b)
	}
	return b, err
}

func (a *arena) free() error {
	if a.heap != nil {
		a.heap.Close()
	}
	for _, b := range a.mapped {
		Free(b)
	}
	var err error
	for _, b := range a.gpuBufs {
		keepFirst(&err, b.Free())
	}
	keepFirst(&err, a.stage.close())
	return err
}

func newLoop(t transports.Transport, rank int, spec Spec, size int, a *arena) *loop {
	l := &loop{t: t, rank: rank, pattern: spec.Pattern, size: size, ranks: spec.RankCount(), multi: spec.Pattern.MultiRank(),
		iters: spec.Iters, warmup: spec.Warmup, window: spec.Window, peers: spec.Peers, validate: spec.Validate, ack: a.ack,
		stage: a.stage, load: a.load, steps: a.load != nil && rank == 0}
	l.peer, l.lead = spec.partner(rank)
	di, dw := DefaultIters(spec.Pattern, size)
	if l.iters <= 0 {
		l.iters = di
	}
	if l.warmup <= 0 {
		l.warmup = dw
	}
	if !l.pattern.windowed() || l.window < 1 {
		l.window = 1
	}
	if spec.RepBytes > 0 && spec.Iters <= 0 {
		l.iters, l.warmup = CapIterations(spec.RepBytes, size, l.window, l.iters, l.warmup)
	}
	for _, b := range a.send {
		l.sbuf = append(l.sbuf, b[:size])
	}
	for _, b := range a.recv {
		l.rbuf = append(l.rbuf, b[:size])
	}
	if a.heap != nil {
		l.churn = &churn{heap: a.heap}
	}
	l.reqs = make([]transports.Request, 0, 2*l.window*max(l.ranks-1, 1))
	l.iterNS = make([]int64, l.iters)
	if l.pattern == AllToAll && l.ranks > 1 {
		l.places = l.allToAllPlacesIn(cap(l.sbuf[0]))
		l.blockNS = make([][]int64, (l.ranks-1+l.stepPeers()-1)/l.stepPeers())
		for b := range l.blockNS {
			l.blockNS[b] = make([]int64, l.iters)
		}
	}
	return l
}

// CapIterations lowers iters so that iters windows of size-byte messages
// move about budget bytes, keeping at least 2 iterations and a warm-up of
// about a tenth.
func CapIterations(budget, size, window, iters, warmup int) (int, int) {
	per := max(size, 1) * max(window, 1)
	n := min(max(budget/per, 2), iters)
	return n, min(warmup, max(n/10, 1))
}

// Alloc returns n bytes of page-aligned, pre-faulted memory outside the Go heap.
func Alloc(n int) ([]byte, error) {
	b, err := sys.MapAnon(max(n, 1), true)
	if err != nil {
		return nil, fmt.Errorf("allocate %d-byte message buffer: %w", n, err)
	}
	return b[:n], nil
}

// Free releases a buffer from Alloc.
func Free(b []byte) {
	if b != nil {
		sys.Unmap(b)
	}
}

// slot is the buffer of message w of iteration i's window: the run's
// messages take the buffers in turn. One buffer (OSU's case) costs no
// division: a latency loop's slots are on the timed path.
func (l *loop) slot(bufs [][]byte, i, w int) []byte {
	if len(bufs) == 1 {
		return bufs[0]
	}
	return bufs[(i*l.window+w)%len(bufs)]
}

// run executes warm-up plus timed iterations and returns the rank's elapsed
// time of the timed part in nanoseconds.
//
// Beside a GPU load kernel every iteration, warm-up included, is a step
// whose length goes into longestWait: a path that waits for the kernel to
// end does so at its first message, which is a warm-up one, and the rest
// of the pass then runs beside no kernel at all.
func (l *loop) run() (int64, error) {
	var start, last, prev int64
	if l.steps {
		prev = nanotime()
	}
	for i := 0; i < l.warmup+l.iters; i++ {
		if i == l.warmup {
			start = nanotime()
			last = start
		}
		var err error
		switch l.pattern {
		case Latency, MultiLatency:
			err = l.pingPong(i)
		case Incast:
			err = l.incastWindow(i)
		case AllToAll:
			err = l.exchangeAll(i)
		case AllReduce, AllGather, ReduceScatter, Broadcast:
			err = l.collective(i)
		case BiBandwidth:
			err = l.exchangeWindows(i)
		case AllocChurn:
			err = l.churnWindow(i)
		default:
			err = l.streamWindow(i)
		}
		if err != nil {
			return 0, fmt.Errorf("%s size %d iteration %d: %w", l.pattern, l.size, i, err)
		}
		if l.steps {
			now := nanotime()
			l.longestWait = max(l.longestWait, time.Duration(now-prev))
			prev = now
		}
		if l.timeIterations && i >= l.warmup {
			now := nanotime()
			l.iterNS[i-l.warmup] = now - last
			last = now
		}
	}
	return nanotime() - start, nil
}

func (l *loop) pingPong(i int) error {
	s, r := l.slot(l.sbuf, i, 0), l.slot(l.rbuf, i, 0)
	if l.lead {
		if err := l.fill(s, i, l.rank, 0); err != nil {
			return err
		}
		if err := l.t.Send(l.peer, s); err != nil {
			return err
		}
		if _, err := l.t.Recv(l.peer, r); err != nil {
			return err
		}
		return l.check(r, i, l.peer, 0)
	}
	if _, err := l.t.Recv(l.peer, r); err != nil {
		return err
	}
	if err := l.check(r, i, l.peer, 0); err != nil {
		return err
	}
	if err := l.fill(s, i, l.rank, 0); err != nil {
		return err
	}
	return l.t.Send(l.peer, s)
}

// streamWindow: the lead (rank 0 of a pair) sends a window, its peer
// receives it and acknowledges.
func (l *loop) streamWindow(i int) error {
	l.reqs = l.reqs[:0]
	for w := range l.window {
		var q transports.Request
		var err error
		if l.lead {
			b := l.slot(l.sbuf, i, w)
			if err := l.fill(b, i, l.rank, w); err != nil {
				return err
			}
			q, err = l.t.Isend(l.peer, b)
		} else {
			q, err = l.t.Irecv(l.peer, l.slot(l.rbuf, i, w))
		}
		if err != nil {
			return err
		}
		l.reqs = append(l.reqs, q)
	}
	if err := l.t.Wait(l.reqs...); err != nil {
		return err
	}
	if l.lead {
		_, err := l.t.Recv(l.peer, l.ack)
		return err
	}
	for w := range l.window {
		if err := l.check(l.slot(l.rbuf, i, w), i, l.peer, w); err != nil {
			return err
		}
	}
	return l.t.Send(l.peer, l.ack)
}

// exchangeWindows: both ranks post a window of receives and of sends.
func (l *loop) exchangeWindows(i int) error {
	l.reqs = l.reqs[:0]
	for w := range l.window {
		q, err := l.t.Irecv(l.peer, l.slot(l.rbuf, i, w))
		if err != nil {
			return err
		}
		l.reqs = append(l.reqs, q)
	}
	for w := range l.window {
		b := l.slot(l.sbuf, i, w)
		if err := l.fill(b, i, l.rank, w); err != nil {
			return err
		}
		q, err := l.t.Isend(l.peer, b)
		if err != nil {
			return err
		}
		l.reqs = append(l.reqs, q)
	}
	if err := l.t.Wait(l.reqs...); err != nil {
		return err
	}
	for w := range l.window {
		if err := l.check(l.slot(l.rbuf, i, w), i, l.peer, w); err != nil {
			return err
		}
	}
	return nil
}

// sync lines the two ranks up with a zero-byte exchange (all the ranks of
// a multi-rank pattern: a barrier).
func (l *loop) sync() error {
	if l.multi {
		return l.barrier()
	}
	z := l.ack[:0]
	if l.lead {
		if err := l.t.Send(l.peer, z); err != nil {
			return err
		}
		_, err := l.t.Recv(l.peer, z)
		return err
	}
	if _, err := l.t.Recv(l.peer, z); err != nil {
		return err
	}
	return l.t.Send(l.peer, z)
}

// patternByte is byte k of the payload sent by rank `from` in iteration i,
// window slot w: it differs between iterations, slots, directions and
// neighbouring bytes, so stale, misplaced or shifted data is caught.
func patternByte(i, from, w, k int) byte {
	return patternAt(patternBase(i, from, w), k)
}

// patternAt is byte k of the pattern of base.
func patternAt(base, k int) byte { return byte(base + k*7 + k>>9) }

// patternBase is what i, from and w add to every byte of their pattern.
func patternBase(i, from, w int) int { return i*251 + from*97 + w*13 }

// patternWord is the 8 pattern bytes from k, a multiple of 8, as a
// little-endian word: byte j is base + 7(k+j) + k>>9 (k and k+7 share
// k>>9), added lane by lane without carries between lanes. Eight bytes a
// step: a byte loop validated at about 200 MB/s, slower than any
// transport (docs/performance.md, A full node).
func patternWord(base, k int) uint64 {
	const (
		ones  = 0x0101010101010101
		high  = 0x8080808080808080
		steps = 0x312a231c150e0700 // byte j: 7j
	)
	a := uint64(patternAt(base, k)) * ones
	return ((a &^ high) + (steps &^ high)) ^ ((a ^ steps) & high)
}

// putPattern writes the pattern of base into b.
func putPattern(b []byte, base int) {
	k := 0
	for ; k+8 <= len(b); k += 8 {
		binary.LittleEndian.PutUint64(b[k:], patternWord(base, k))
	}
	for ; k < len(b); k++ {
		b[k] = patternAt(base, k)
	}
}

// patternMismatch is the offset of the first byte of b that differs from
// the pattern of base, or -1.
func patternMismatch(b []byte, base int) int {
	k := 0
	for ; k+8 <= len(b); k += 8 {
		if binary.LittleEndian.Uint64(b[k:]) != patternWord(base, k) {
			break
		}
	}
	for ; k < len(b); k++ {
		if b[k] != patternAt(base, k) {
			return k
		}
	}
	return -1
}

// fill writes the pattern into b when the run validates. It inlines, so
// that a run that does not validate pays no call on a message's path,
// where calls showed in an 8-byte ping-pong (docs/performance.md, sm's
// small messages against the cache-line floor).
func (l *loop) fill(b []byte, i, from, w int) error {
	if !l.validate {
		return nil
	}
	return l.fillPattern(b, i, from, w)
}

// fillPattern writes the pattern into b, through host scratch when b is
// device memory.
func (l *loop) fillPattern(b []byte, i, from, w int) error {
	dst := b
	if l.stage != nil {
		dst = l.stage.host[:len(b)]
	}
	putPattern(dst, patternBase(i, from, w))
	if l.stage != nil {
		return l.stage.copy(b, dst)
	}
	return nil
}

// ValidationError reports a payload byte that differs from what was sent.
type ValidationError struct {
	Size, Iteration, Slot, Offset int
	Got, Want                     byte
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("payload validation failed: size %d iteration %d message %d byte %d: got %#02x, want %#02x",
		e.Size, e.Iteration, e.Slot, e.Offset, e.Got, e.Want)
}

// check compares b with the pattern when the run validates; it inlines,
// as fill does.
func (l *loop) check(b []byte, i, from, w int) error {
	if !l.validate {
		return nil
	}
	return l.checkPattern(b, i, from, w)
}

// checkPattern compares b with the pattern, through host scratch when b
// is device memory.
func (l *loop) checkPattern(b []byte, i, from, w int) error {
	if l.stage != nil {
		h := l.stage.host[:len(b)]
		if err := l.stage.copy(h, b); err != nil {
			return err
		}
		b = h
	}
	if k := patternMismatch(b, patternBase(i, from, w)); k >= 0 {
		return &ValidationError{Size: l.size, Iteration: i, Slot: w, Offset: k, Got: b[k], Want: patternByte(i, from, w, k)}
	}
	return nil
}

// value converts rank 0's elapsed nanoseconds over n iterations into the
// pattern's metric.
func (l *loop) value(elapsedNS int64, n int) float64 {
	ns := float64(elapsedNS)
	msgs := float64(l.window * n)
	switch l.pattern {
	case Latency:
		return ns / 1e3 / float64(2*n)
	case MsgRate:
		return msgs * 1e9 / ns
	case BiBandwidth:
		return 2 * float64(l.size) * msgs * 1e3 / ns
	default:
		return float64(l.size) * msgs * 1e3 / ns
	}
}

// Measure runs spec's pattern at every size over t; rank 0 returns the
// points, rank 1 nil. beat, if not nil, is called between repetitions
// (never inside a timed loop) to show the watchdog that the rank progresses. Each point is spec.Reps timed repetitions (OSU loops
// without per-iteration clock reads) plus one distribution pass whose
// per-iteration times, corrected for the cost of reading the clock, give the
// percentiles.
//
// When the spec gives the ranks GPUs (Spec.UsesGPU), Measure opens and binds
// the rank's device on the calling goroutine, locked to its thread for the
// call, and releases it before returning.
func Measure(t transports.Transport, rank int, spec Spec, beat func()) ([]Point, error) {
	g, err := openRankGPU(&spec, rank)
	if err != nil {
		return nil, err
	}
	defer g.close()
	if spec.Pattern.MultiRank() {
		return nil, fmt.Errorf("pattern %s: Measure runs a pair's patterns; the multi-rank ones need Run", spec.Pattern)
	}
	a, err := newArena(spec, rank, g)
	if err != nil {
		return nil, err
	}
	// The transport outlives the arena here: it hears of every buffer the
	// arena's free unmaps, and is unhooked after.
	defer a.hookInvalidation(t)()
	defer a.free()
	points, _, err := measureAll(t, rank, spec, a, beat, nil)
	return points, err
}

// measureAll measures every size in arena a, announcing the settling
// pass and each size on st (nil: silently). Rank 0 returns the points;
// rank 1 the warnings of its side, one list per size (nil when none).
func measureAll(t transports.Transport, rank int, spec Spec, a *arena, beat func(), st *stepper) ([]Point, [][]string, error) {
	if beat == nil {
		beat = func() {}
	}
	cost := clockCost()
	var points []Point
	warnings := make([][]string, 0, len(spec.Sizes))
	some := false
	err := eachSize(t, rank, spec, a, beat, st, func(l *loop) error {
		p, err := l.measure(spec.Reps, cost, beat)
		if err != nil {
			return err
		}
		if rank == 0 {
			points = append(points, p)
		}
		warnings = append(warnings, p.Warnings)
		some = some || len(p.Warnings) > 0
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if rank == 0 || !some {
		warnings = nil
	}
	return points, warnings, nil
}

// eachSize runs the settling pass, if the spec has one, then f with the
// loop of each size in turn, announcing each on st.
func eachSize(t transports.Transport, rank int, spec Spec, a *arena, beat func(), st *stepper, f func(*loop) error) error {
	if err := settlePass(t, rank, spec, a, beat, st); err != nil {
		return err
	}
	for i, size := range spec.Sizes {
		st.measure(spec, i)
		if err := f(newLoop(t, rank, spec, size, a)); err != nil {
			return err
		}
	}
	return nil
}

// settlePass runs spec's settling pass through t, if it has one.
func settlePass(t transports.Transport, rank int, spec Spec, a *arena, beat func(), st *stepper) error {
	if spec.Settle <= 0 {
		return nil
	}
	st.start("running the unreported settling pass of %s at %s", spec.Pattern, transports.FormatSize(spec.Settle))
	beat()
	// At most the settling size's built-in iterations: a count asked for
	// small sizes (--iters 200000) made a pass of hundreds of gigabytes at
	// 4 MiB, past the watchdog's deadline, where a warm-up was meant.
	s := spec
	if di, dw := DefaultIters(spec.Pattern, spec.Settle); s.Iters > di {
		s.Iters, s.Warmup = di, min(s.Warmup, dw)
	}
	if err := newLoop(t, rank, s, spec.Settle, a).settle(); err != nil {
		return fmt.Errorf("settling pass of %d bytes: %w", spec.Settle, err)
	}
	return nil
}

// timedPass is one timed pass (repetition or distribution pass) with the
// GPU load kernel, if any, running throughout: launched before the ranks
// line up, released and waited for after.
func (l *loop) timedPass() (int64, error) {
	var began time.Time
	if l.steps {
		began = time.Now()
	}
	if err := l.load.start(); err != nil {
		return 0, err
	}
	err := l.sync()
	if l.steps {
		l.longestWait = max(l.longestWait, time.Since(began))
	}
	var ns int64
	if err == nil {
		ns, err = l.run()
	}
	if serr := l.load.stop(); err == nil {
		err = serr
	}
	return ns, err
}

// settle runs one pass that nobody reports (Spec.Settle): lined up as a
// timed pass, without the GPU load kernel.
func (l *loop) settle() error {
	if err := l.sync(); err != nil {
		return err
	}
	_, err := l.run()
	return err
}

// passes runs reps timed repetitions and returns each one's elapsed
// nanoseconds, then the distribution pass, whose per-iteration times it
// leaves in l.iterNS.
func (l *loop) passes(reps int, beat func()) ([]int64, error) {
	elapsed := make([]int64, 0, reps)
	for range reps {
		beat()
		ns, err := l.timedPass()
		if err != nil {
			return nil, err
		}
		elapsed = append(elapsed, ns)
	}
	beat()
	l.timeIterations = true
	_, err := l.timedPass()
	return elapsed, err
}

// point summarizes the timed passes' elapsed nanoseconds (and the
// distribution pass's per-iteration values, if any) as the size's point.
func (l *loop) point(elapsed []int64, perIter []float64) Point {
	samples := make([]float64, len(elapsed))
	for i, ns := range elapsed {
		samples[i] = l.value(ns, l.iters)
	}
	p := Summarize(l.size, l.pattern.Unit(), samples, perIter)
	p.Iters, p.Warmup, p.Validated = l.iters, l.warmup, l.validate
	return p
}

func (l *loop) measure(reps int, clockNS int64, beat func()) (Point, error) {
	late := l.load.lateCount()
	elapsed, err := l.passes(reps, beat)
	if err != nil {
		return Point{}, err
	}
	var perIter []float64
	if l.rank == 0 {
		perIter = make([]float64, len(l.iterNS))
		for k, ns := range l.iterNS {
			perIter[k] = l.value(max(ns-clockNS, 1), 1)
		}
	}
	p := l.point(elapsed, perIter)
	if l.steps {
		// A step that waited half the kernel's life or more waited for the
		// kernel to end: the path stalls beside it. (A path that only slows
		// down moves in steps far shorter.)
		p.LoadWait = l.longestWait
		p.LoadStalled = l.longestWait >= l.load.spec.Duration/2
	}
	if n := l.load.lateCount() - late; n > 0 {
		p.LoadLate = n
		p.Warnings = append(p.Warnings, fmt.Sprintf("rank %d: the GPU load kernel on cuda%d reached its %v bound before %d of %d timed passes ended (load_stalled says whether a step waited for the kernel)",
			l.rank, l.load.ordinal, l.load.spec.Duration, n, reps+1))
	}
	return p, nil
}
