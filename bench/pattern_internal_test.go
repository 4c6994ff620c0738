package bench

import (
	"math/rand/v2"
	"testing"
)

// The word-at-a-time pattern is patternByte's, byte for byte, at every
// length and offset of a 512-byte block's edge, and a check finds the
// first byte that differs wherever it is.
func TestPatternWordsMatchPatternByte(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 8, 9, 63, 511, 512, 513, 1031, 4096, 70001} {
		for range 4 {
			i, from, w := rng.IntN(1000), rng.IntN(64), rng.IntN(64)
			b := make([]byte, n)
			putPattern(b, patternBase(i, from, w))
			for k := range b {
				if want := patternByte(i, from, w, k); b[k] != want {
					t.Fatalf("n %d (i %d from %d w %d): byte %d is %#x, want %#x", n, i, from, w, k, b[k], want)
				}
			}
			if k := patternMismatch(b, patternBase(i, from, w)); k != -1 {
				t.Fatalf("n %d: intact pattern reported at byte %d", n, k)
			}
			if n == 0 {
				continue
			}
			for _, at := range []int{0, n - 1, rng.IntN(n)} {
				b[at] ^= 1 << rng.IntN(8)
				if k := patternMismatch(b, patternBase(i, from, w)); k != at {
					t.Errorf("n %d: byte %d flipped, mismatch reported at %d", n, at, k)
				}
				b[at] = patternByte(i, from, w, at)
			}
			if k := patternMismatch(b, patternBase(i+1, from, w)); n > 0 && k != 0 {
				t.Errorf("n %d: the next iteration's pattern differs first at %d, want 0", n, k)
			}
		}
	}
}

func BenchmarkPatternCheck(b *testing.B) {
	buf := make([]byte, 1<<20)
	putPattern(buf, patternBase(3, 1, 2))
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if patternMismatch(buf, patternBase(3, 1, 2)) >= 0 {
			b.Fatal("mismatch")
		}
	}
}
