package errwriter

import (
	"fmt"
	"io"
)

// Writer writes to an io.Writer and keeps the first error: once a write
// has failed, later writes do nothing.
type Writer struct {
	w   io.Writer
	err error
}

// New returns a Writer to w.
func New(w io.Writer) *Writer { return &Writer{w: w} }

// Printf formats to the writer unless a write has failed.
func (e *Writer) Printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

// Do runs f, a write of its own (a table), unless a write has failed, and
// keeps its error.
func (e *Writer) Do(f func() error) {
	if e.err == nil {
		e.err = f()
	}
}

// Err is the first write error, nil when every write succeeded.
func (e *Writer) Err() error { return e.err }
