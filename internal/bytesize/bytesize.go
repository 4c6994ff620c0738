// Package bytesize reads and writes byte counts as gotune's options, plans
// and profiles write them: 64, 4K, 16M, 1G (powers of 1024). It sits below
// everything so that the profile, the transports and the tuner agree.
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Parse parses a byte count such as 64, 4K, 16M or 1G (powers of 1024).
func Parse(s string) (int, error) {
	mult := 1
	switch {
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "k"):
		mult = 1 << 10
	case strings.HasSuffix(s, "M"), strings.HasSuffix(s, "m"):
		mult = 1 << 20
	case strings.HasSuffix(s, "G"), strings.HasSuffix(s, "g"):
		mult = 1 << 30
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a byte count: %q", s)
	}
	if n > math.MaxInt/mult {
		return 0, fmt.Errorf("byte count too large: %q", s)
	}
	return n * mult, nil
}

// Format writes a byte count the way Parse reads it: with the
// largest K/M/G suffix that divides it exactly (65536 → "64K").
func Format(n int) string {
	for _, u := range []struct {
		shift  uint
		suffix string
	}{{30, "G"}, {20, "M"}, {10, "K"}} {
		if unit := 1 << u.shift; n >= unit && n%unit == 0 {
			return strconv.Itoa(n>>u.shift) + u.suffix
		}
	}
	return strconv.Itoa(n)
}

// Human writes a byte count for people: a binary unit and three digits
// ("512 B", "1.5 MiB", "3 GiB").
func Human(n int64) string {
	v, unit := float64(n), "B"
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		if v < 1024 {
			break
		}
		v, unit = v/1024, u
	}
	if unit == "B" {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.3g %s", v, unit)
}
