package sm

import (
	"bytes"
	"testing"

	"github.com/gotune/gotune/internal/sys"
)

// TestSpellGuardObserve drives the guard's state machine with costs per KiB
// against a limit of 100: what it does with the next copies after each.
func TestSpellGuardObserve(t *testing.T) {
	const limit = 100
	tests := []struct {
		name        string
		costs       []uint64
		trial       bool // a stretch just ended before the costs
		stretch     int  // the stretch length before the costs (0: spellStretchMin)
		wantLeft    int
		wantStretch int
		wantSpells  int
	}{
		{name: "fast copies", costs: []uint64{20, 30, 100, 25}, wantStretch: spellStretchMin},
		{name: "one slow sample is not a spell", costs: []uint64{20, 500, 20, 500}, wantStretch: spellStretchMin},
		{name: "two slow samples start a stretch", costs: []uint64{20, 500, 101}, wantLeft: spellStretchMin, wantStretch: spellStretchMin, wantSpells: 1},
		{name: "a slow trial doubles the stretch", trial: true, costs: []uint64{500}, wantLeft: 2 * spellStretchMin, wantStretch: 2 * spellStretchMin, wantSpells: 1},
		{name: "the stretch stops doubling", trial: true, stretch: spellStretchMax, costs: []uint64{500}, wantLeft: spellStretchMax, wantStretch: spellStretchMax, wantSpells: 1},
		{name: "a fast trial ends the spell", trial: true, stretch: 8 * spellStretchMin, costs: []uint64{40}, wantStretch: spellStretchMin},
		{name: "after a fast trial one slow sample is not a spell", trial: true, stretch: 8 * spellStretchMin, costs: []uint64{40, 500}, wantStretch: spellStretchMin},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := spellGuard{limit: limit, stretch: spellStretchMin, trial: tt.trial}
			if tt.stretch != 0 {
				g.stretch = tt.stretch
			}
			for _, c := range tt.costs {
				g.observe(c)
			}
			if g.left != tt.wantLeft || g.stretch != tt.wantStretch || g.spells != tt.wantSpells {
				t.Errorf("left %d stretch %d spells %d, want %d %d %d", g.left, g.stretch, g.spells, tt.wantLeft, tt.wantStretch, tt.wantSpells)
			}
		})
	}
}

// TestSpellGuardCopy checks that every path through copy moves the bytes,
// that a stretch is spent one copy at a time and ends in a trial, and that
// a guard without a limit never times anything.
func TestSpellGuardCopy(t *testing.T) {
	src := bytes.Repeat([]byte("spell guard "), 4<<10)
	for _, n := range []int{100, spellGuardMin - 1, spellGuardMin, len(src)} {
		g := spellGuard{limit: 1, stretch: spellStretchMin, left: 2}
		for i := range 3 {
			dst := make([]byte, n)
			if got := g.copy(dst, src); got != n || !bytes.Equal(dst, src[:n]) {
				t.Fatalf("n=%d copy %d: moved %d bytes, equal %v", n, i, got, bytes.Equal(dst, src[:n]))
			}
			if i == 1 && (g.left != 0 || !g.trial) {
				t.Fatalf("n=%d: after the stretch left %d trial %v, want 0 true", n, g.left, g.trial)
			}
		}
		// A limit of one tick per KiB makes every timed copy slow: the
		// third copy was the trial if it was long enough to be timed.
		timed := n >= spellGuardMin
		if got := g.spells == 1; got != timed {
			t.Errorf("n=%d: spells %d after a trial, want a new stretch: %v", n, g.spells, timed)
		}
	}
	off := newSpellGuard(0)
	for range 4 * spellSampleEvery {
		off.copy(make([]byte, len(src)), src)
	}
	if off.spells != 0 || off.slow != 0 {
		t.Errorf("guard without a limit: spells %d slow %d, want none", off.spells, off.slow)
	}
}

// TestLocalCopyPerKiB checks that the clock advances over a 32 KiB copy:
// a zero calibration would turn the guard off.
func TestLocalCopyPerKiB(t *testing.T) {
	if got := localCopyPerKiB(); got == 0 {
		t.Errorf("local copy cost %d ticks per KiB, want > 0", got)
	}
}

// A job is crowded exactly when its ranks outnumber the cpuset's CPUs.
func TestCrowdedCountsTheCpuset(t *testing.T) {
	cpus, err := sys.CpusetCPUs("/")
	if err != nil {
		t.Skip(err)
	}
	for _, c := range []struct {
		ranks int
		want  bool
	}{{1, false}, {len(cpus), false}, {len(cpus) + 1, true}, {4 * len(cpus), true}} {
		if got := crowded(c.ranks); got != c.want {
			t.Errorf("%d ranks on %d CPUs: crowded %v, want %v", c.ranks, len(cpus), got, c.want)
		}
	}
}
