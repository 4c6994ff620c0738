package sm

import (
	"fmt"
	"strings"
	"testing"
)

// A box header naming more bytes than the box holds is a corrupt segment,
// reported as one, not read past the box.
func TestCorruptBoxLengthIsReported(t *testing.T) {
	words := new([boxBytes / 8]uint64)
	b := box{words: words, mine: 0} // the higher rank: the lower's message 1 is due
	for _, tc := range []struct {
		n       int
		corrupt bool
	}{{0, false}, {BoxPayload, false}, {BoxPayload + 1, true}, {255, true}} {
		words[0] = 1 | uint64(tc.n)<<32
		func() {
			defer func() {
				r := recover()
				if got := r != nil && strings.Contains(fmt.Sprint(r), "corrupt fast box"); got != tc.corrupt {
					t.Errorf("length %d: recovered %v, want a corrupt-box panic: %v", tc.n, r, tc.corrupt)
				}
			}()
			if n, ok := b.due(0); !ok || n != tc.n {
				t.Errorf("length %d: due gave %d, %v", tc.n, n, ok)
			}
		}()
	}
}

// copySmall copies exactly len(src) bytes at every length the box carries,
// whichever way it takes, and writes nothing of dst past them.
func TestCopySmallCopiesExactly(t *testing.T) {
	for n := 0; n <= BoxPayload; n++ {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i + 1)
		}
		dst := make([]byte, n+8)
		for i := range dst {
			dst[i] = 0xee
		}
		if got := copySmall(dst, src); got != n {
			t.Errorf("length %d: copySmall returned %d", n, got)
		}
		for i, c := range dst {
			want := byte(0xee)
			if i < n {
				want = byte(i + 1)
			}
			if c != want {
				t.Errorf("length %d: dst[%d] = %#x, want %#x", n, i, c, want)
				break
			}
		}
	}
}
