package sm

// The fast box: two cache lines per pair of ranks that carry the small
// messages of a ping-pong both ways, so that each message moves its lines
// once where the two one-way rings move a ring's line per direction.

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gotune/gotune/internal/sys"
)

// A pair's box holds one message at a time, and the two ranks take turns
// to write it: the lower rank writes the odd-numbered messages, the higher
// the even ones, and a rank writes only once it has taken the peer's last
// message (the lower rank holds the first turn). A box message is thus a
// reply, and a rank knows from its own count alone whether the turn is
// its: nothing is loaded to decide. The box's first word is a header,
// stored last: the message's number (32 bits), its length (8 bits) and
// the writer's count of cells published on its ring to the peer (low 24
// bits): the box message goes after those cells and before the next one.
// BoxPayload bytes follow.
//
// Why: a ring per direction makes a ping-pong move two lines a way, 2.2–
// 2.6× one line's transfer on the hosts measured, while a line both sides
// write moves once (docs/performance.md, sm's small messages); a stream
// finds the turn the peer's after its first message and uses the ring,
// since streamed through a box each message would wait for the previous
// one to be taken (2.2× a ring's time a message there).
//
// The receiver takes the box message when its count of cells taken from
// the ring equals the position the header names. It checks the box after
// loading each cell's sequence word: the sender wrote the box before any
// cell that follows it, so a cell seen means the box before it is seen.

// BoxPayload is the largest message the fast box carries.
const BoxPayload = boxBytes - 8

const (
	boxBytes    = 2 * cacheLine // one adjacent-line prefetch pair: nothing else shares it
	boxAtBits   = 24
	boxAtMask   = 1<<boxAtBits - 1
	boxFirst    = cacheLine - 8 // payload bytes in the header's line
	boxInPairAt = ctlSize - boxBytes
)

// box is one rank's view of a pair's fast box.
type box struct {
	words *[boxBytes / 8]uint64
	mine  uint32 // 1: this rank writes the odd messages (the lower rank), 0: the even ones
	last  uint32 // the number of the last message this rank wrote or took
}

// openBox maps the box of ranks rank and peer: it lies in the control
// area of the channel from the lower rank to the higher.
func openBox(seg []byte, rank, peer, n int, p Params) box {
	lo, hi := min(rank, peer), max(rank, peer)
	off := n*p.RingBytes() + pairIndex(lo, hi, n)*p.PairBytes() + boxInPairAt
	b := box{words: (*[boxBytes / 8]uint64)(unsafe.Pointer(&seg[off]))}
	if rank == lo {
		b.mine = 1
	}
	return b
}

// turn reports whether this rank may write the box: the last message is
// the peer's (taken) or none.
func (b *box) turn() bool { return b.last&1 != b.mine }

// payload is the box's payload area.
func (b *box) payload() []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&b.words[1])), BoxPayload)
}

// put writes buf (at most BoxPayload bytes) as this rank's next message,
// after the cells it has published to the peer: the payload past the
// header's line first, then the rest of that line, the header last, a
// release store. Only on this rank's turn. A message that fills both
// lines asks for the header's line before writing the other, so that the
// two lines' ownership comes back at once, not one store after the other.
// The receiver does not load the second line in its polls, as it does a
// cell's (consumer.touch): that was slower on AMD and Intel cores alike
// (docs/performance.md, The fast box).
func (b *box) put(buf []byte, cells uint64) {
	pl, n := b.payload(), len(buf)
	if n > boxFirst {
		sys.PrefetchWrite(unsafe.Pointer(&b.words[0]))
		copySmall(pl[boxFirst:], buf[boxFirst:])
		buf = buf[:boxFirst]
	}
	b.last++
	h := uint64(b.last) | uint64(n)<<32 | (cells&boxAtMask)<<40
	copySmall(pl, buf)
	sys.StoreRelease64(&b.words[0], h)
}

// due returns the length of the peer's next box message when it is there
// and comes before the ring's cell number head (the next to be taken).
func (b *box) due(head uint64) (int, bool) {
	h := atomic.LoadUint64(&b.words[0])
	if uint32(h) != b.last+1 || h>>40 != head&boxAtMask { // b.last+1 is the peer's: it has the turn
		return 0, false
	}
	n := int(h >> 32 & 0xff)
	if n > BoxPayload {
		panic(boxOverrun(n))
	}
	return n, true
}

// boxOverrun is the panic of a box header naming more bytes than the box
// holds: a value, not a formatted string, so that due inlines into the
// polls.
type boxOverrun int

func (n boxOverrun) Error() string {
	return fmt.Sprintf("sm: corrupt fast box: a %d-byte message in a box of %d", int(n), BoxPayload)
}

// copySmall copies src into dst (at least as long) and returns len(src):
// 8 to 16 bytes as two words loaded and stored in line (the second
// overlapping the first below 16), other lengths by copy. Why: copy is a
// call to the runtime's memmove, which the smallest messages' path
// otherwise avoids; past 16 bytes memmove's vector moves pay for the call
// (docs/performance.md, Copies in and out of the box).
func copySmall(dst, src []byte) int {
	n := len(src)
	if n < 8 || n > 16 {
		return copy(dst, src)
	}
	a, b := binary.LittleEndian.Uint64(src), binary.LittleEndian.Uint64(src[n-8:])
	binary.LittleEndian.PutUint64(dst, a)
	binary.LittleEndian.PutUint64(dst[n-8:], b)
	return n
}

// taken marks the due message taken: the turn is this rank's.
func (b *box) taken() { b.last++ }
