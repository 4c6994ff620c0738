package sys

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Socket descriptors a transport drives itself, outside Go's netpoller.
//
// A descriptor that net.Conn owns stays registered with the runtime's
// epoll instance (edge-triggered, in and out): every segment that arrives
// and every ACK that frees send space wakes a runtime thread, which finds
// no goroutine waiting and sleeps again. A transport that polls its sockets
// itself detaches them: DupFD, then close the net.Conn (which removes the
// registration; the duplicate keeps the connection open).

// DupFD duplicates fd (close-on-exec); the duplicate shares the socket and
// its flags (non-blocking), but not the original's epoll registration once
// the original is closed.
func DupFD(fd uintptr) (uintptr, error) {
	n, err := unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("dup socket: %w", err)
	}
	return uintptr(n), nil
}

// CloseFD closes a descriptor DupFD made.
func CloseFD(fd uintptr) error { return unix.Close(int(fd)) }

// ShutdownWrite sends the end of stream (shutdown SHUT_WR).
func ShutdownWrite(fd uintptr) error { return unix.Shutdown(int(fd), unix.SHUT_WR) }

// Receiver reads into up to two buffers with one recvmsg without
// allocating: the rest of a payload straight into its destination, and
// what follows it into a staging area. One per socket; not for concurrent
// use.
type Receiver struct {
	fd  uintptr
	iov [2]unix.Iovec
	msg unix.Msghdr
}

// fillIov points msg at a then b through iov, skipping an empty one; it
// returns how many entries it filled (0: nothing to move, msg untouched).
func fillIov(iov *[2]unix.Iovec, msg *unix.Msghdr, a, b []byte) int {
	n := 0
	for _, buf := range [2][]byte{a, b} {
		if len(buf) > 0 {
			iov[n].Base = &buf[0]
			iov[n].SetLen(len(buf))
			n++
		}
	}
	if n > 0 {
		msg.Iov = &iov[0]
		msg.SetIovlen(n)
	}
	return n
}

// NewReceiver returns a Receiver for the socket fd.
func NewReceiver(fd uintptr) *Receiver { return &Receiver{fd: fd} }

// Recv reads what is there into a, then b, without blocking (MSG_DONTWAIT):
// ErrWouldBlock when nothing is, (0, nil) at end of stream. The call does
// not enter the runtime's syscall state (a non-blocking read returns at
// once), so the scheduler never hands this thread's P to another thread
// around it.
func (r *Receiver) Recv(a, b []byte) (int, error) {
	if fillIov(&r.iov, &r.msg, a, b) == 0 {
		return 0, nil
	}
	for {
		k, _, e := unix.RawSyscall(unix.SYS_RECVMSG, r.fd, uintptr(unsafe.Pointer(&r.msg)), unix.MSG_DONTWAIT)
		switch {
		case e == 0:
			r.iov = [2]unix.Iovec{}
			return int(k), nil
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN:
			r.iov = [2]unix.Iovec{}
			return 0, ErrWouldBlock
		}
		r.iov = [2]unix.Iovec{}
		return 0, fmt.Errorf("recvmsg: %w", e)
	}
}

// PollNow reports the ready events of fds without waiting (poll with a
// zero timeout, outside the runtime's syscall state): a cheap check that
// does not take the sockets' locks, unlike a read that finds nothing.
func PollNow(fds []PollFD) (int, error) {
	if len(fds) == 0 {
		return 0, nil
	}
	for {
		n, _, e := unix.RawSyscall(unix.SYS_POLL, uintptr(unsafe.Pointer(&fds[0])), uintptr(len(fds)), 0)
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, fmt.Errorf("poll: %w", e)
	}
}
