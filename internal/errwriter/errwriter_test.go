package errwriter

import (
	"errors"
	"strings"
	"testing"
)

// failAfter accepts n writes, then fails every one.
type failAfter struct {
	n   int
	buf strings.Builder
}

var errFull = errors.New("full")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errFull
	}
	f.n--
	return f.buf.Write(p)
}

// Every write after the first failure is skipped, Do's included, and
// Err is that failure.
func TestWriter(t *testing.T) {
	cases := map[string]struct {
		accepted int    // writes the underlying writer takes
		want     string // what reaches it
		err      error
	}{
		"all succeed":  {9, "a1b2c", nil},
		"second fails": {1, "a1", errFull},
		"Do's fails":   {2, "a1b2", errFull},
	}
	for name, c := range cases {
		f := &failAfter{n: c.accepted}
		e := New(f)
		e.Printf("a%d", 1)
		e.Printf("b%d", 2)
		e.Do(func() error { _, err := f.Write([]byte("c")); return err })
		if f.buf.String() != c.want || !errors.Is(e.Err(), c.err) || (c.err == nil) != (e.Err() == nil) {
			t.Errorf("%s: wrote %q, err %v; want %q, %v", name, f.buf.String(), e.Err(), c.want, c.err)
		}
	}
}
