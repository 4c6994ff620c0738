package sm

import (
	"fmt"
	"testing"
)

// The built-in choice: movsb from MoveStringMin both ways, and into the
// ring from MoveStringInFrom to MoveStringInMax; go and movsb fix it.
func TestCopierChoosesByDirectionAndSize(t *testing.T) {
	sizes := []int{1, 4096, MoveStringInFrom - 1, MoveStringInFrom, MoveStringInMax, MoveStringInMax + 1, 32 << 10, MoveStringMin - 1, MoveStringMin, 16 << 20}
	for _, tc := range []struct {
		mode string
		in   bool
		want string // per size: g (Go's copy) or m (movsb)
	}{
		{"auto", true, "gggmmgggmm"},
		{"auto", false, "ggggggggmm"},
		{"go", true, "gggggggggg"},
		{"movsb", false, "mmmmmmmmmm"},
	} {
		c := newCopier(tc.mode, tc.in)
		got := ""
		for _, n := range sizes {
			got += map[bool]string{false: "g", true: "m"}[c.movsb(n)]
		}
		if got != tc.want {
			t.Errorf("%s, in %v: %s over sizes %v, want %s", tc.mode, tc.in, got, sizes, tc.want)
		}
	}
}

// Both routines copy exactly min(len(dst), len(src)) bytes at any alignment.
func TestCopierCopiesExactly(t *testing.T) {
	for _, mode := range []string{"go", "movsb"} {
		for _, n := range []int{0, 1, 63, 4097, 9000} {
			for _, shift := range []int{0, 1, 7} {
				t.Run(fmt.Sprintf("%s/%d/%d", mode, n, shift), func(t *testing.T) {
					src, dst := make([]byte, n+8), make([]byte, n+16)
					for i := range src {
						src[i] = byte(i*7 + 1)
					}
					got := newCopier(mode, false).copy(dst[shift:shift+n], src[1:1+n+4])
					if got != n {
						t.Fatalf("copied %d, want %d", got, n)
					}
					for i := range dst {
						want := byte(0)
						if i >= shift && i < shift+n {
							want = src[1+i-shift]
						}
						if dst[i] != want {
							t.Fatalf("dst[%d] = %d, want %d", i, dst[i], want)
						}
					}
				})
			}
		}
	}
}
