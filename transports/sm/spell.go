package sm

import "github.com/gotune/gotune/internal/sys"

// Slow spells and the sender's copy into the ring.
//
// On this VM there are spells in which taking ownership of ring lines that
// the other rank has read is dear: Go's vector copy into the ring slows
// several-fold while REP MOVSB, which does not take the lines one by one,
// holds; outside them movsb into the ring is the slower of the two from
// 20 KiB (copier.go), so no fixed choice suits both.
// Why spellGuard: a deep spell, unlike a middling slowdown, shows in the
// sender's own copy time (docs/transports.md, sm: copy routines).
//
// spellGuard covers the fragments that auto copies into the ring with Go's
// copy: it times one in spellSampleEvery of them (every one while a sample
// looks slow) and compares the cost per KiB with the same Go copy between
// two private buffers, timed when the endpoint is made (its "local" cost,
// which the placement does not change). Two samples in a row above
// spellLimit times local start a stretch of movsb copies; the first copy
// after the stretch is timed again (a trial), and a slow trial starts a
// stretch twice as long, up to spellStretchMax, so a long spell costs ever
// fewer slow copies. A fast trial ends the spell.
//
// The receiver's copy out of the ring is not guarded. Why: in the same
// spells it costs the same with either routine.

const (
	// spellGuardMin is the smallest fragment the guard times: below it the
	// timer's own cost (two RDTSC) would show.
	spellGuardMin = 16 << 10
	// spellSampleEvery is how often (a power of two) a fragment copy is
	// timed outside a spell.
	spellSampleEvery = 8
	// spellLimit is the cost per KiB, as a multiple of the local copy's,
	// above which a copy into the ring counts as slow. Why 8: it lies
	// between the ratios seen outside the spells and in them; a fresh pair's
	// first milliseconds land between too, where a stretch costs little.
	spellLimit = 8
	// spellStretchMin and spellStretchMax bound a stretch of movsb copies.
	spellStretchMin = 64
	spellStretchMax = 4096
	// spellCalibration is the fragment length the local copy is timed on.
	spellCalibration = 32 << 10
)

// spellGuard is one channel's (its sender's) view of the slow spells.
type spellGuard struct {
	limit   uint64 // ticks per KiB above which a copy is slow; 0: never
	count   uint32 // guarded copies made outside a stretch, for sampling
	slow    uint8  // consecutive slow samples
	trial   bool   // the next guarded copy is timed: a stretch just ended
	left    int    // movsb copies left in the current stretch
	stretch int    // the next stretch's length
	spells  int    // stretches started, for tests and diagnostics
}

func newSpellGuard(localPerKiB uint64) spellGuard {
	return spellGuard{limit: spellLimit * localPerKiB, stretch: spellStretchMin}
}

// copy copies min(len(dst), len(src)) bytes into the ring: with movsb
// during a spell, otherwise with Go's copy, timing it now and then.
func (g *spellGuard) copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if g.left > 0 {
		g.left--
		if g.left == 0 {
			g.trial = true
		}
		return sys.CopyMovsb(dst[:n], src[:n])
	}
	g.count++
	if g.limit == 0 || n < spellGuardMin || !g.trial && g.slow == 0 && g.count%spellSampleEvery != 0 {
		return copy(dst[:n], src[:n])
	}
	t0 := sys.Ticks()
	copy(dst[:n], src[:n])
	g.observe(ticksPerKiB(sys.Ticks()-t0, n))
	return n
}

// observe takes one timed copy's cost per KiB.
func (g *spellGuard) observe(perKiB uint64) {
	if perKiB <= g.limit {
		g.slow = 0
		if g.trial {
			g.trial = false
			g.stretch = spellStretchMin
		}
		return
	}
	g.slow++
	if g.trial || g.slow >= 2 {
		if g.trial {
			g.stretch = min(2*g.stretch, spellStretchMax)
		}
		g.trial, g.slow = false, 0
		g.left = g.stretch
		g.spells++
	}
}

func ticksPerKiB(ticks uint64, n int) uint64 { return ticks << 10 / uint64(n) }

// localCopyPerKiB times Go's copy between two private, cache-hot buffers
// of spellCalibration bytes and returns the fastest of a few, in ticks per
// KiB: what a copy costs when no other core holds the lines.
func localCopyPerKiB() uint64 {
	src := make([]byte, spellCalibration)
	dst := make([]byte, spellCalibration)
	copy(dst, src)
	best := ^uint64(0)
	for range 8 {
		t0 := sys.Ticks()
		copy(dst, src)
		best = min(best, sys.Ticks()-t0)
	}
	return ticksPerKiB(best, spellCalibration)
}
