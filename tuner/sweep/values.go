package sweep

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/transports"
)

// The plan's value types. Each decodes once from the text a plan file or
// meta.json holds, checked, and encodes back to the same text, so a run
// directory's meta.json reads the same before and after.

// Size is a byte count, written as transports.ParseSize reads it ("4K").
type Size int

// MarshalText writes the size with the largest exact K/M/G suffix.
func (s Size) MarshalText() ([]byte, error) { return []byte(transports.FormatSize(int(s))), nil }

// UnmarshalText reads a byte count such as 64, 4K or 16M.
func (s *Size) UnmarshalText(b []byte) error {
	n, err := transports.ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

func (s Size) String() string { return transports.FormatSize(int(s)) }

// SizeList is a list of message sizes, written as a bench ladder
// ("256:16K": powers of two) or a list ("8,256,4K"); "" is none.
type SizeList struct {
	text  string
	sizes []int
}

// ParseSizeList reads a ladder or list.
func ParseSizeList(s string) (SizeList, error) {
	if s == "" {
		return SizeList{}, nil
	}
	v, err := bench.ParseSizes(s)
	if err != nil {
		return SizeList{}, err
	}
	return SizeList{text: s, sizes: v}, nil
}

// mustSizes is ParseSizeList for the built-in plans' literals.
func mustSizes(s string) SizeList {
	l, err := ParseSizeList(s)
	if err != nil {
		panic(err)
	}
	return l
}

// Sizes returns the sizes, ascending as written (nil for none).
func (l SizeList) Sizes() []int { return l.sizes }

// Empty reports whether the list names no size.
func (l SizeList) Empty() bool { return len(l.sizes) == 0 }

// Every keeps every step-th size and the last: a coarse ladder.
func (l SizeList) Every(step int) []int {
	if step <= 1 || len(l.sizes) == 0 {
		return l.sizes
	}
	var out []int
	for i := 0; i < len(l.sizes); i += step {
		out = append(out, l.sizes[i])
	}
	if last := l.sizes[len(l.sizes)-1]; out[len(out)-1] != last {
		out = append(out, last)
	}
	return out
}

func (l SizeList) String() string { return l.text }

// MarshalText writes the list as it was read.
func (l SizeList) MarshalText() ([]byte, error) { return []byte(l.text), nil }

// UnmarshalText reads a ladder or list.
func (l *SizeList) UnmarshalText(b []byte) error {
	v, err := ParseSizeList(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}

// Fragment is a fragment-geometry candidate: fragment size and the ring's
// slots, written SIZExSLOTS ("64Kx16").
type Fragment struct{ Size, Slots int }

// MarshalText writes SIZExSLOTS.
func (f Fragment) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText reads SIZExSLOTS.
func (f *Fragment) UnmarshalText(b []byte) error {
	s := string(b)
	a, c, ok := strings.Cut(strings.ToLower(s), "x")
	if !ok {
		return fmt.Errorf("%q: want SIZExSLOTS, e.g. 64Kx16", s)
	}
	size, err := transports.ParseSize(strings.ToUpper(a))
	if err != nil {
		return fmt.Errorf("%q: %w", s, err)
	}
	slots, err := transports.ParseSize(c)
	if err != nil || slots < 1 {
		return fmt.Errorf("%q: bad slot count", s)
	}
	*f = Fragment{size, slots}
	return nil
}

func (f Fragment) String() string { return transports.FormatSize(f.Size) + "x" + strconv.Itoa(f.Slots) }

// Load is a level of the concurrent GPU kernel, by the name it was given
// ("none", "partial", "full" or a fraction): stages are named after it.
type Load struct {
	Name     string
	Fraction float64 // of the GPU's SMs the kernel holds; 0: none
}

// MarshalText writes the load's name.
func (l Load) MarshalText() ([]byte, error) { return []byte(l.Name), nil }

// UnmarshalText reads a load name or fraction as bench --kernel does.
func (l *Load) UnmarshalText(b []byte) error {
	f, err := bench.ParseKernel(string(b))
	if err != nil {
		return err
	}
	*l = Load{Name: string(b), Fraction: f}
	return nil
}

func (l Load) String() string { return l.Name }

// parseText decodes the built-in plans' literals of any of these types.
func parseText[T any, P interface {
	*T
	UnmarshalText([]byte) error
}](texts ...string) []T {
	out := make([]T, len(texts))
	for i, s := range texts {
		if err := P(&out[i]).UnmarshalText([]byte(s)); err != nil {
			panic(err)
		}
	}
	return out
}
