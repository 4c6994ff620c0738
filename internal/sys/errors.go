package sys

import (
	"errors"
	"fmt"
)

// ErrNotSupported is matched (errors.Is) by every error that means "this
// machine, kernel or privilege level cannot do it", as opposed to a failure.
var ErrNotSupported = errors.New("not supported")

// NotSupportedError says what is unavailable and why.
type NotSupportedError struct {
	What   string // the capability, e.g. "process_vm_readv"
	Reason string // a human explanation, e.g. "ptrace restrictions"
	Err    error  // the underlying error, if any
}

func (e *NotSupportedError) Error() string {
	s := e.What + ": not supported"
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Err != nil {
		s += fmt.Sprintf(" (%v)", e.Err)
	}
	return s
}

// Is makes errors.Is(err, ErrNotSupported) true.
func (e *NotSupportedError) Is(target error) bool { return target == ErrNotSupported }

// Unwrap returns the underlying system error.
func (e *NotSupportedError) Unwrap() error { return e.Err }

// NotSupported builds a NotSupportedError.
func NotSupported(what, reason string, err error) error {
	return &NotSupportedError{What: what, Reason: reason, Err: err}
}
