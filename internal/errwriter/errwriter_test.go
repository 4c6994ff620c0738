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

func TestWriter(t *testing.T) {
	for _, c := range []struct {
		name    string
		writes  int
		want    string
		wantErr error
		wantDo  int
	}{
		{"all succeed", 9, "a1b2", nil, 1},
		{"second fails", 1, "a1", errFull, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &failAfter{n: c.writes}
			e := New(f)
			e.Printf("a%d", 1)
			e.Printf("b%d", 2)
			ran := 0
			e.Do(func() error { ran++; return nil })
			if f.buf.String() != c.want || !errors.Is(e.Err(), c.wantErr) || ran != c.wantDo {
				t.Errorf("wrote %q, err %v, Do ran %d times; want %q, %v, %d", f.buf.String(), e.Err(), ran, c.want, c.wantErr, c.wantDo)
			}
		})
	}
}
