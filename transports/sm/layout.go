package sm

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gotune/gotune/internal/bytesize"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/queue"
	"github.com/gotune/gotune/internal/sys"
)

const (
	cacheLine  = 64
	headerSize = 16  // cellHeader
	ctlSize    = 256 // consumer line and the adjacent line, against prefetch sharing; then, in a lower rank's channel to a higher, the pair's fast box (box.go: two lines)
)

// Params shape the channels. All sizes are bytes.
type Params struct {
	Depth      int // cells per channel (with AutoDepth, up to 9 ranks)
	CellSize   int // bytes per cell, header included; a multiple of 64
	EagerLimit int // largest message sent inline; at most CellSize-16
	FragSize   int // largest fragment in bytes; a multiple of 64
	FragSlots  int // fragment ring size in largest fragments: the ring holds FragSlots*FragSize bytes
	// Copy selects the routine that copies fragments into the ring and out
	// of it: "go" (Go's vector loop), "movsb" (REP MOVSB), or "auto" (by
	// size and direction, see copier.go).
	Copy string
	// StreamMin is the message size from which the receiver copies the
	// fragments of a message arriving alone (not taking turns with others,
	// see Streams) to the receive buffer with streaming (non-temporal)
	// stores, so that a destination larger than the cache does not evict
	// the source and the fragment ring; 0 never streams.
	StreamMin int
	// Wrap is how much of the fragment ring large fragments (those of at
	// least FragSize or WrapFrom bytes, whichever is less) cycle through:
	// the first Wrap bytes. Shorter fragments use the whole ring. 0 (or at
	// least the ring's size) is the whole ring. See DefaultWrap.
	Wrap int
	// Streams is how many pipelined sends to one peer advance together,
	// one fragment each in turn, oldest first (1: one message at a time).
	// See DefaultStreams.
	Streams int
	// Park is how long a message that no posted receive awaits may wait
	// in its ring while nothing else moves before progress parks it in
	// the unexpected queue (0: at the first pass that moves nothing).
	// See DefaultPark.
	Park time.Duration
	// NoDrainOnSend makes a send blocked on a full ring stop draining the
	// incoming channels: the deadlock of hazard H5, kept so that the probe
	// can prove its detector works. Never set it for real traffic.
	NoDrainOnSend bool
	// Progress is "poll" (channels advance only inside engine calls; "" is
	// the same) or "thread": a progress goroutine on its own OS thread also
	// advances them while the application is away from the engine.
	Progress string
	// Budget is the most shared memory a job's channels may take
	// (SegmentBytes); 0 is DefaultBudget.
	Budget int
	// LeakPersistent makes freeing a persistent send forget to return its
	// credit: hazard H3's leak (nccl#1251's shape), kept so that the probe
	// can prove its detector works. Never set it for real traffic.
	LeakPersistent bool
	// AutoDepth makes Depth follow the job's rank count (DepthFor): the
	// built-in, where neither sm.depth nor a profile sets it.
	AutoDepth bool
	// DepthRanks is the ranks per node a fixed Depth and the fragment
	// ring were decided for (a profile's; 0: none): a job of fewer ranks
	// takes DepthFor of its count where that is deeper, and the built-in
	// ring's bytes where they are more, since the built-in spends that
	// memory on such a job anyway and a shallower FIFO throttles a pair's
	// window. Why the ring: a 2 MiB ring chosen for 16 ranks moved 8 KiB
	// messages between 2 ranks 10% slower than the built-in 4 MiB, settled
	// over 15 rounds on the development VM (docs/performance.md).
	DepthRanks int
}

// DepthFor is the built-in FIFO depth for a job of n ranks: 64 cells,
// halved while a rank's incoming cells, (n-1) x depth, exceed 512 by more
// than 1/16, down to 16 (64 up to 9 ranks, 32 up to 18, 16 above). Why:
// at 32 ranks 64-cell FIFOs were 287 MiB of the job's 415
// (docs/performance.md, Shared memory at N ranks), and a pair of a full
// node seldom has more than a few messages in flight.
func DepthFor(n int) int {
	const full, floor, perRank = 64, 16, 512
	d := full
	for d > floor && d*(n-1) > perRank+perRank/16 {
		d /= 2
	}
	return d
}

// ForRanks is p as a job of n ranks uses it: with AutoDepth, Depth is
// DepthFor(n); below DepthRanks ranks, at least DepthFor(n), and a
// fragment ring of at least the built-in's bytes.
func (p Params) ForRanks(n int) Params {
	switch {
	case p.AutoDepth:
		p.Depth = DepthFor(n)
	case n < p.DepthRanks:
		p.Depth = max(p.Depth, DepthFor(n))
		if p.FragSize > 0 {
			p.FragSlots = max(p.FragSlots, defaultRingBytes/p.FragSize)
		}
	}
	return p
}

// defaultRingBytes is the built-in fragment ring's size.
const defaultRingBytes = DefaultFragSlots * defaultFragSize

const defaultFragSize = 64 << 10

// DefaultStreamMin is the built-in sm.stream: messages of 16 MiB and more
// that arrive alone are copied out with streaming stores (see copyOut).
// Why: streaming stores run at what memory takes from one core, faster
// than ordinary stores for a 16 MiB message, while an 8 MiB message's
// source and destination still fit the caches.
const DefaultStreamMin = 16 << 20

// DefaultFragSlots makes the built-in fragment ring 4 MiB (64 fragments of
// 64 KiB): room for a whole 64-message window of 32 KiB (OSU's bw window)
// and for a 64 KiB one to stream without the sender waiting on every
// fragment. Why: smaller rings lose at 32 KiB in the fast phase
// (docs/transports.md, sm: fragments). Each rank has one ring for all its
// peers, so n ranks map n x 4 MiB of rings.
const DefaultFragSlots = 64

// DefaultWrap is the built-in sm.wrap: large messages cycle through the
// first 1 MiB of the ring, which stays in the caches, while windows of
// small messages still get all of it. Why: small messages want the whole
// 4 MiB ring and large ones a cached 1 MiB (docs/transports.md, sm: fragments).
const DefaultWrap = 1 << 20

// DefaultStreams is the built-in sm.streams: up to 64 pipelined sends
// (OSU's window) advance together, one fragment each in turn, as Open
// MPI's ob1 advances the sends it has pending. A window of large messages
// from one buffer into one buffer then copies the same fragment's worth of
// source and destination 64 times in a row, from the caches, where one
// message at a time sweeps both buffers once per message and, at 16 MiB,
// misses the caches.
const DefaultStreams = 64

// DefaultPark is the built-in sm.park. Why wait at all: in a pairwise
// all-to-all a rank is often idle for a moment while messages of later
// steps sit in its rings; parking them at once copies each twice, while
// the step that posts their receive comes within microseconds
// (docs/performance.md, Parking delay). A peer blocked on a full ring
// waits at most this long for room (hazard H5).
const DefaultPark = 50 * time.Microsecond

// WrapFrom is the fragment length from which fragments cycle through
// sm.wrap even when the fragment size is larger. Why: with 128 KiB
// fragments a 64 KiB message is one short fragment, and windows of them
// walking the whole ring lose against the built-in geometry, a loss a
// tuner's fragment stage can miss between the sizes it measures.
const WrapFrom = 64 << 10

// CellSlack is the unused room the built-in cell size leaves after the
// largest eager message: CellFor(eager) = header + eager, rounded up to a
// cache line, plus CellSlack; it costs Depth x CellSlack bytes per channel.
// Why: a message that fills its cell to the last line is slower, because
// the receiver's sequential reads run the prefetchers into the next cell,
// which the sender is about to write (docs/transports.md, sm: channels).
const CellSlack = 8 * cacheLine

// CellFor is the built-in cell size for an eager limit.
func CellFor(eager int) int { return sys.RoundUp(headerSize+eager, cacheLine) + CellSlack }

// DefaultParams are the built-in channel parameters.
func DefaultParams() Params {
	return Params{Depth: DepthFor(2), AutoDepth: true, CellSize: CellFor(4096), EagerLimit: 4096, FragSize: defaultFragSize, FragSlots: DefaultFragSlots,
		Copy: "auto", StreamMin: DefaultStreamMin, Wrap: DefaultWrap, Streams: DefaultStreams, Park: DefaultPark, Progress: "poll"}
}

// wrapBytes is the part of the ring full-size fragments use.
func (p Params) wrapBytes() int {
	ring := p.FragSlots * p.FragSize
	if p.Wrap <= 0 || p.Wrap >= ring {
		return ring
	}
	return p.Wrap
}

// The job's segment holds one fragment ring per rank, its outgoing
// fragments to every peer, then one cell FIFO per ordered pair of ranks
// with its control words. Why: a ring per ordered pair made the segment
// n(n-1) rings (17 GiB for 64 ranks with the built-ins); per rank, the
// bulk grows with n and only the small FIFOs with n².

// RingBytes is the shared memory of one rank's fragment ring.
func (p Params) RingBytes() int { return sys.RoundUp(p.FragSlots*p.FragSize, sys.PageSize) }

// PairBytes is the shared memory of one ordered pair's cell FIFO.
func (p Params) PairBytes() int { return sys.RoundUp(ctlSize+p.Depth*p.CellSize, sys.PageSize) }

// SegmentBytes is the shared memory n ranks need: a fragment ring per rank
// and a cell FIFO per ordered pair.
func (p Params) SegmentBytes(n int) int {
	q := p.ForRanks(n)
	return n*q.RingBytes() + n*(n-1)*q.PairBytes()
}

// ringOf is rank's fragment ring in seg.
func (p Params) ringOf(seg []byte, rank int) []byte {
	off := rank * p.RingBytes()
	return seg[off : off+p.FragSlots*p.FragSize]
}

// JobBytes is the shared segment n ranks need on this node, or an error
// when that is over the budget (CheckBudget with this node's memory): what
// every driver built on the engine declares as its segment.
func (p Params) JobBytes(n int) (int, error) {
	if err := p.CheckBudget(n, hostinfo.MemBytes()); err != nil {
		return 0, err
	}
	return p.SegmentBytes(n), nil
}

// DefaultBudgetShare is the built-in sm.budget as a share of the node's
// memory: 1/32. Why: the built-in channels of one rank per core then fit
// nodes of 48 cores on 24 GiB and of 128 cores on 512 GiB, and a job asks
// for more only by saying so.
const DefaultBudgetShare = 32

// DefaultBudget is the built-in sm.budget on a node of mem bytes (0:
// unknown, no ceiling).
func DefaultBudget(mem int64) int64 {
	if mem <= 0 {
		return 0
	}
	return mem / DefaultBudgetShare
}

// CheckBudget fails when n ranks need more shared memory than p's budget
// allows on a node of mem bytes, naming what it takes and what to change.
func (p Params) CheckBudget(n int, mem int64) error {
	budget := int64(p.Budget)
	if budget == 0 {
		budget = DefaultBudget(mem)
	}
	need := int64(p.SegmentBytes(n))
	if budget == 0 || need <= budget {
		return nil
	}
	p = p.ForRanks(n)
	return fmt.Errorf("sm: %d ranks need %s of shared memory (%s per ordered pair: sm.depth=%d x sm.cell=%d; %s per rank: sm.frag=%d x sm.frags=%d), over sm.budget=%s: lower those, or raise sm.budget",
		n, bytesize.Human(need), bytesize.Human(int64(p.PairBytes())), p.Depth, p.CellSize, bytesize.Human(int64(p.RingBytes())), p.FragSize, p.FragSlots, bytesize.Human(budget))
}

func pairIndex(src, dst, n int) int {
	if dst > src {
		dst--
	}
	return src*(n-1) + dst
}

// channel is one directed cell FIFO as mapped in this process, with the
// fragment ring of its sending rank.
type channel struct {
	tail     *uint64 // cells consumed (written by the consumer)
	fragTail *uint64 // fragments consumed (written by the consumer)
	awaited  *uint64 // receives the consumer has posted for this channel's messages, ever (written by the consumer)
	cells    []byte
	frags    []byte // the sender's fragment ring
	depth    uint64
	cellSize uint64
	fragSize uint64
	wrap     uint64 // where large fragments wrap: Params.Wrap, at most the ring
	wrapFrom uint64 // the length from which a fragment is large: min(FragSize, WrapFrom)
}

func openChannel(seg []byte, src, dst, n int, p Params) (*channel, error) {
	if need := p.SegmentBytes(n); len(seg) < need {
		return nil, fmt.Errorf("channel %d->%d: segment of %d bytes too small (need %d)", src, dst, len(seg), need)
	}
	b := seg[n*p.RingBytes()+pairIndex(src, dst, n)*p.PairBytes():]
	return &channel{
		tail:     (*uint64)(unsafe.Pointer(&b[0])),
		fragTail: (*uint64)(unsafe.Pointer(&b[8])),
		awaited:  (*uint64)(unsafe.Pointer(&b[16])),
		cells:    b[ctlSize : ctlSize+p.Depth*p.CellSize],
		frags:    p.ringOf(seg, src),
		depth:    uint64(p.Depth),
		cellSize: uint64(p.CellSize),
		fragSize: uint64(p.FragSize),
		wrap:     uint64(p.wrapBytes()),
		wrapFrom: uint64(min(p.FragSize, WrapFrom)),
	}, nil
}

// cellHeader opens every cell. seq is message number+1, stored last with
// release semantics; a consumer owns the cell once it loads the expected seq.
type cellHeader struct {
	seq    uint64
	length uint32
	kind   uint8
	_      [3]byte
}

// Cells are addressed by byte offset, advanced and wrapped as the ring turns:
// no division on the polling path.

func (c *channel) header(off uint64) *cellHeader {
	return (*cellHeader)(unsafe.Pointer(&c.cells[off]))
}

func (c *channel) payload(off uint64) []byte {
	return c.cells[off+headerSize : off+c.cellSize]
}

// A rank's fragment ring is a ring of bytes shared by its channels to every
// peer. A fragment of n bytes takes n rounded up to a cache line,
// contiguously: one that would cross the end of the ring starts at offset 0
// instead, and the bytes it skipped count as used until the fragments
// before them are released. Small fragments pack densely (a 256 KiB ring
// holds 32 fragments of 8 KiB). The descriptor cell carries the fragment's
// offset; each consumer counts the fragments it has released, and the
// sender frees ring space in the order it placed fragments (fragRing).

// fragPos is a position in a fragment ring: bytes passed (padding
// included) and the offset they lead to.
type fragPos struct {
	n   uint64
	off uint64
}

// place returns the offset of an n-byte fragment that goes from pos, and
// the position after it (the bytes skipped to the ring's start included).
//
// A large fragment (c.wrapFrom bytes or more: full-size, or a whole
// message of WrapFrom bytes or more) that would cross c.wrap starts at
// offset 0 too, the rest of the ring counting as skipped: a large message
// then streams through the first c.wrap bytes, which stay cached, instead
// of the whole ring, which the receiver would find evicted. Shorter
// fragments, of the small messages that fill a window, use the whole ring.
func (c *channel) place(pos fragPos, n int) (off uint64, next fragPos) {
	size := uint64(len(c.frags))
	take := uint64(sys.RoundUp(n, cacheLine))
	limit := size
	if uint64(n) >= c.wrapFrom {
		limit = c.wrap
	}
	off = pos.off
	if off+take > limit {
		pos.n += size - off
		off = 0
	}
	next = fragPos{n: pos.n + take, off: off + take}
	if next.off == size {
		next.off = 0
	}
	return off, next
}

// ring is a position in a ring of fixed-size entries: a sequence count and
// the byte offset of the entry it designates.
type ring struct {
	n   uint64 // entries passed
	off uint64 // byte offset of entry n
}

func (r *ring) advance(entry, size uint64) {
	r.n++
	r.off += entry
	if r.off == size {
		r.off = 0
	}
}

// fragRing is the sending rank's private view of its fragment ring,
// shared by its producers.
type fragRing struct {
	head fragPos
	// faulted is how many bytes from the ring's start are faulted in
	// (a page multiple): the ring is committed as fragments reach it.
	faulted uint64
	// tail is the ring position up to which every fragment placed has
	// been released by its consumer.
	tail uint64
	// placed are the fragments not yet known released, oldest first.
	placed queue.FIFO[placedFrag]
}

// placedFrag is a fragment in a consumer's hands: it is free once the
// consumer's count of released fragments reaches count, and the ring is
// then free up to end.
type placedFrag struct {
	released *uint64
	count    uint64
	end      uint64
}

// reclaim moves tail past the fragments their consumers have released.
func (r *fragRing) reclaim() {
	for r.placed.Len() > 0 {
		f := r.placed.Front()
		if atomic.LoadUint64(f.released) < f.count {
			return
		}
		r.tail = f.end
		r.placed.Pop()
	}
}

// ringFaultStep is the least the ring is faulted in by at a time: a
// fault per page inside a measured copy would cost more than the copy.
const ringFaultStep = 1 << 20

// faultTo faults the ring frags in up to end (and at least one step
// beyond what is faulted, up to its size). Why not all of it when the
// rank attaches: a rank that sends nothing above the eager limit, or
// only large fragments, which cycle through the first sm.wrap bytes,
// then never commits the rest; at 32 ranks that was 128 MiB of rings
// (docs/performance.md, Shared memory at N ranks).
func (r *fragRing) faultTo(frags []byte, end uint64) error {
	if end <= r.faulted {
		return nil
	}
	to := min(uint64(len(frags)), max(uint64(sys.RoundUp(int(end), sys.PageSize)), r.faulted+ringFaultStep))
	if err := sys.Populate(frags[r.faulted:to]); err != nil {
		return fmt.Errorf("fault in fragment ring: %w", err)
	}
	r.faulted = to
	return nil
}

// fits reports whether the ring can hold everything up to next, given what
// the consumers have released as far as the sender knows. An empty ring
// takes any placement: the bytes skipped then were never written.
func (r *fragRing) fits(next fragPos, size uint64) bool {
	return r.placed.Len() == 0 || next.n-r.tail <= size
}

// producer is the sending side's private view of a channel.
type producer struct {
	*channel
	ring     *fragRing
	head     ring
	tailSeen uint64
	sent     uint64  // fragments published on this channel
	pendOff  uint64  // where the fragment nextFrag handed out lies, for publishFrag
	pendNext fragPos // the ring position after it
}

func (p *producer) cellFree() bool {
	if p.head.n-p.tailSeen < p.depth {
		return true
	}
	p.tailSeen = atomic.LoadUint64(p.tail)
	return p.head.n-p.tailSeen < p.depth
}

// cell is the payload area of the cell being filled.
func (p *producer) cell() []byte { return p.payload(p.head.off) }

// nextFrag returns the ring space for the next fragment of a message with
// rest bytes still to send (at most FragSize of them), or nil when the ring
// has no room for it yet. publishFrag hands it over.
func (p *producer) nextFrag(rest int) []byte {
	n := min(rest, int(p.fragSize))
	off, next := p.place(p.ring.head, n)
	if size := uint64(len(p.frags)); !p.ring.fits(next, size) {
		p.ring.reclaim()
		if !p.ring.fits(next, size) {
			return nil
		}
	}
	p.pendOff, p.pendNext = off, next
	return p.frags[off : off+uint64(n)]
}

// putEager copies an eager payload into the current cell, the part past
// the cell's first cache line first: the header and the payload's first
// bytes, written last, then reach the consumer's polled line in one
// ownership transfer. Why: copying front to back wrote the first line,
// then the next, then the first again for the header, and the polling
// consumer took the first line back in between, a transfer more.
func (p *producer) putEager(buf []byte) {
	c := p.cell()
	if len(buf) > lineRoom {
		copy(c[lineRoom:], buf[lineRoom:])
		buf = buf[:lineRoom]
	}
	copy(c, buf)
}

// lineRoom is how many payload bytes share a cell's first cache line with
// its header.
const lineRoom = cacheLine - headerSize

// publish completes the current cell: fields first, then the sequence
// number, a release store (no fence: nothing the producer does next
// needs to wait for the consumer to see it).
func (p *producer) publish(kind uint8, length int) {
	h := p.header(p.head.off)
	h.length = uint32(length)
	h.kind = kind
	sys.StoreRelease64(&h.seq, p.head.n+1)
	p.head.advance(p.cellSize, uint64(len(p.cells)))
}

// openPacked publishes the current cell as a packed cell holding length
// bytes of records, and keeps it current: growPacked publishes more
// records in it, closePacked the last and moves on (pack.go).
func (p *producer) openPacked(length int) {
	h := p.header(p.head.off)
	h.length = uint32(length)
	h.kind = kindPacked
	sys.StoreRelease64(&h.seq, p.head.n+1)
}

func (p *producer) growPacked(length int) {
	sys.StoreRelease32(&p.header(p.head.off).length, uint32(length))
}

func (p *producer) closePacked(length int) {
	sys.StoreRelease32(&p.header(p.head.off).length, uint32(length)|packClosed)
	p.head.advance(p.cellSize, uint64(len(p.cells)))
}

// publishFrag hands the fragment nextFrag returned over with its
// descriptor cell, whose words are the message size and the message's
// number on the channel (kindFrag), or the receive request it is for
// (kindFragTo, w1 unused), then the fragment's offset in the ring. length
// is the fragment's length.
func (p *producer) publishFrag(kind uint8, length int, w0, w1 uint64) {
	body := p.cell()
	binary.LittleEndian.PutUint64(body, w0)
	binary.LittleEndian.PutUint64(body[8:], w1)
	binary.LittleEndian.PutUint64(body[fragOffWord:], p.pendOff)
	p.sent++
	p.ring.placed.Push(placedFrag{released: p.fragTail, count: p.sent, end: p.pendNext.n})
	p.ring.head = p.pendNext
	p.publish(kind, length)
}

// fragOffWord is where a descriptor cell's body holds its fragment's
// offset in the sender's ring.
const fragOffWord = 16

// consumer is the receiving side's private view of a channel.
type consumer struct {
	*channel
	head  ring
	taken uint64 // fragments released
	// packOff is where the next record of the current cell lies, when
	// that is a packed cell partly taken (pack.go).
	packOff int
}

// releasePacked releases the current cell, a packed one of n bytes of
// records published so far, if it is closed and every record is taken,
// and reports whether it did.
func (c *consumer) releasePacked(n int, closed bool) bool {
	if !closed || c.packOff < n {
		return false
	}
	c.packOff = 0
	c.release()
	return true
}

// peek returns the next published cell, or nil.
func (c *consumer) peek() *cellHeader {
	h := c.header(c.head.off)
	if atomic.LoadUint64(&h.seq) != c.head.n+1 {
		return nil
	}
	return h
}

// touch loads the first word of the current cell's lines 1 to lines (its
// first line is peek's), so that they travel with the polled one. Why: the
// producer writes a cell's further lines before the first (putEager), and
// a consumer that reads them only after the first one arrived pays one
// transfer per line, one after another; loaded in the same poll, their
// misses overlap. Only a hint: the message is read after peek.
func (c *consumer) touch(lines int) {
	for i := 1; i <= lines; i++ {
		atomic.LoadUint64((*uint64)(unsafe.Pointer(&c.cells[c.head.off+uint64(i*cacheLine)])))
	}
}

// touchLines is how many lines past its first a receive of n bytes has
// its polls touch: all those an eager message of n bytes fills, when
// they are at most maxTouch; none for a larger buffer, whose message
// the producer is still writing while the polls would take its lines
// back, line by line (1 KiB took 1.7x as long touching its first four).
func touchLines(n, cellSize int) int {
	if k := (min(n, cellSize-headerSize) + headerSize - 1) / cacheLine; k <= maxTouch {
		return k
	}
	return 0
}

// maxTouch bounds touchLines.
const maxTouch = 2

// body is the payload area of the current cell.
func (c *consumer) body() []byte { return c.payload(c.head.off) }

// curFrag is the fragment the current descriptor cell hands over, n bytes
// long (the length in the cell).
func (c *consumer) curFrag(n int) []byte {
	off := binary.LittleEndian.Uint64(c.body()[fragOffWord:])
	if off > uint64(len(c.frags)) || uint64(n) > uint64(len(c.frags))-off {
		panic(fmt.Sprintf("sm: corrupt descriptor cell: %d-byte fragment at offset %d of a %d-byte ring", n, off, len(c.frags)))
	}
	return c.frags[off : off+uint64(n)]
}

// release hands the current cell back to the producer.
func (c *consumer) release() {
	c.head.advance(c.cellSize, uint64(len(c.cells)))
	sys.StoreRelease64(c.tail, c.head.n)
}

// releaseFrag hands the fragment curFrag returned back to its sender.
func (c *consumer) releaseFrag() {
	c.taken++
	sys.StoreRelease64(c.fragTail, c.taken)
}
