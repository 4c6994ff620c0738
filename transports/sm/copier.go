package sm

import (
	"math"

	"github.com/gotune/gotune/internal/sys"
)

// Fragment copies (sm.copy). A pipelined message is copied twice: into the
// fragment ring by the sender, out of it by the receiver, each time by Go's
// copy (a vector loop) or REP MOVSB. Eager messages (cells) always use Go's
// copy. Why: movsb's start-up cost shows in small-message latency
// (docs/transports.md, sm: copy routines).

// MoveStringMin is where auto copies with REP MOVSB in both directions.
// Why: from 64 KiB movsb leads Go's copy, below it trails.
const MoveStringMin = 64 << 10

// MoveStringInFrom and MoveStringInMax bound the fragments that auto also
// copies into the ring with REP MOVSB; the receiver copies them out with
// Go's copy. Between MoveStringInMax and MoveStringMin both directions use
// Go's copy, except that the sender turns to movsb while its own copies
// show a slow spell (spell.go).
//
// Why: in this VM's slow spells Go's copy into the ring slows far more
// than movsb, and movsb costs nothing in the fast phase only into the ring
// at 8-16 KiB.
const (
	MoveStringInFrom = 8 << 10
	MoveStringInMax  = 16 << 10
)

// copier is one direction's choice of routine, fixed when the endpoint is
// made so that a fragment's copy tests two bounds and no option: REP MOVSB
// for n >= from and for lo <= n <= hi, Go's copy otherwise. guard says
// that Go's copies go through the channel's spellGuard (spell.go).
type copier struct {
	from, lo, hi int
	guard        bool
}

func knownCopyMode(s string) bool { return s == "auto" || s == "go" || s == "movsb" }

// newCopier is mode's (Params.Copy) choice on the way into the ring (in)
// or out of it.
func newCopier(mode string, in bool) copier {
	switch {
	case mode == "movsb":
		return copier{from: 0}
	case mode == "go":
		return copier{from: math.MaxInt, lo: 1} // lo > hi: no band
	case in:
		return copier{from: MoveStringMin, lo: MoveStringInFrom, hi: MoveStringInMax, guard: true}
	}
	return copier{from: MoveStringMin, lo: 1}
}

// copy copies min(len(dst), len(src)) bytes and returns that count.
func (c copier) copy(dst, src []byte) int {
	if c.movsb(min(len(dst), len(src))) {
		return sys.CopyMovsb(dst, src)
	}
	return copy(dst, src)
}

// movsb says whether an n-byte copy uses REP MOVSB.
func (c copier) movsb(n int) bool { return n >= c.from || n >= c.lo && n <= c.hi }
