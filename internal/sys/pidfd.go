package sys

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// ProcessWatch tells whether a process has exited. It holds a pidfd, so a
// reused pid cannot be mistaken for the process watched, and an exited but
// not yet reaped process (a zombie) already counts as exited. On kernels
// without pidfd_open (before 5.3) it falls back to kill(pid, 0), which sees
// an exit only once the process is reaped.
type ProcessWatch struct {
	pid int
	fd  int            // -1: no pidfd; -2: closed, or gone at the start
	pfd [1]unix.PollFd // poll's argument, kept here: checking allocates nothing
}

// WatchProcess starts watching pid. A process that is already gone is
// reported as exited by the watch.
func WatchProcess(pid int) (*ProcessWatch, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == nil:
		unix.CloseOnExec(fd)
		w := &ProcessWatch{pid: pid, fd: fd}
		w.pfd[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		return w, nil
	case err == unix.ESRCH:
		return &ProcessWatch{pid: pid, fd: -2}, nil // gone already
	case err == unix.ENOSYS || err == unix.EPERM: // EPERM: seccomp filters answer so
		return &ProcessWatch{pid: pid, fd: -1}, nil
	default:
		return nil, fmt.Errorf("pidfd_open pid %d: %w", pid, err)
	}
}

// Exited reports whether the process has exited. It makes one system call
// that does not block.
func (w *ProcessWatch) Exited() bool {
	switch w.fd {
	case -2:
		return true
	case -1:
		return unix.Kill(w.pid, 0) == unix.ESRCH
	}
	for {
		w.pfd[0].Revents = 0
		n, err := unix.Poll(w.pfd[:], 0)
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// Close releases the pidfd.
func (w *ProcessWatch) Close() error {
	if w.fd < 0 {
		return nil
	}
	fd := w.fd
	w.fd = -2
	if err := unix.Close(fd); err != nil {
		return fmt.Errorf("close pidfd of pid %d: %w", w.pid, err)
	}
	return nil
}

// ErrStillRunning is returned by WaitProcessExit when the process outlives
// the timeout.
var ErrStillRunning = errors.New("process still running")

// WaitProcessExit blocks until process pid has exited (a zombie counts) or
// timeout passes. It needs pidfd_open (Linux 5.3); without it the error
// matches ErrNotSupported.
func WaitProcessExit(pid int, timeout time.Duration) error {
	fd, err := unix.PidfdOpen(pid, 0)
	switch {
	case err == unix.ESRCH:
		return nil
	case err == unix.ENOSYS:
		return NotSupported("pidfd_open", "kernel older than 5.3", err)
	case err != nil:
		return fmt.Errorf("pidfd_open pid %d: %w", pid, err)
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(timeout)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("wait for pid %d to exit: %w after %v", pid, ErrStillRunning, timeout)
		}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return fmt.Errorf("poll pidfd of pid %d: %w", pid, err)
		case n > 0:
			return nil
		}
	}
}

// Errno returns the system error number that err wraps, or 0: a number is
// what crosses a shared-memory channel to the peer process.
func Errno(err error) uint64 {
	var en unix.Errno
	if errors.As(err, &en) {
		return uint64(en)
	}
	return 0
}

// ErrnoError is the error for a system error number received from another
// process (nil for 0); errors.Is matches it against syscall's constants.
func ErrnoError(n uint64) error {
	if n == 0 {
		return nil
	}
	return unix.Errno(n)
}
