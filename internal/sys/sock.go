package sys

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Socket helpers for transports/tcp. The descriptors come from net.Conn
// (syscall.RawConn.Control); Go has already made them non-blocking.

// ErrWouldBlock is returned by SendBuffers and Recv when the socket has no
// room or no data now (EAGAIN).
var ErrWouldBlock = errors.New("operation would block")

// SetSockInt sets an integer socket option (setsockopt), naming it in the
// error.
func SetSockInt(fd uintptr, level, opt int, v int, name string) error {
	if err := unix.SetsockoptInt(int(fd), level, opt, v); err != nil {
		return fmt.Errorf("setsockopt %s=%d: %w", name, v, err)
	}
	return nil
}

// SetSendBuffer and SetRecvBuffer set SO_SNDBUF and SO_RCVBUF (the kernel
// doubles the value and caps it at net.core.wmem_max/rmem_max).
func SetSendBuffer(fd uintptr, n int) error {
	return SetSockInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, n, "SO_SNDBUF")
}
func SetRecvBuffer(fd uintptr, n int) error {
	return SetSockInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, n, "SO_RCVBUF")
}

// SendBufferSize and RecvBufferSize read back what the kernel granted.
func SendBufferSize(fd uintptr) (int, error) {
	return unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
}
func RecvBufferSize(fd uintptr) (int, error) {
	return unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
}

// SetNoDelay sets TCP_NODELAY (on: no Nagle coalescing).
func SetNoDelay(fd uintptr, on bool) error {
	v := 0
	if on {
		v = 1
	}
	return SetSockInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, v, "TCP_NODELAY")
}

// SetBusyPoll sets SO_BUSY_POLL (microseconds the kernel busy-polls the
// device queue in a blocking receive or poll). A kernel or privilege that
// refuses it gives an ErrNotSupported error.
func SetBusyPoll(fd uintptr, usec int) error {
	err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BUSY_POLL, usec)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOPROTOOPT), errors.Is(err, unix.EINVAL):
		return NotSupported("SO_BUSY_POLL", "the kernel lacks CONFIG_NET_RX_BUSY_POLL", err)
	case errors.Is(err, unix.EPERM):
		return NotSupported("SO_BUSY_POLL", "raising it above net.core.busy_read needs CAP_NET_ADMIN", err)
	}
	return fmt.Errorf("setsockopt SO_BUSY_POLL=%d: %w", usec, err)
}

// EnableZeroCopy sets SO_ZEROCOPY, which MSG_ZEROCOPY sends need (Linux
// 4.14+, TCP). A refusal is an ErrNotSupported error.
func EnableZeroCopy(fd uintptr) error {
	err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ZEROCOPY, 1)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ENOPROTOOPT), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
		return NotSupported("SO_ZEROCOPY", "the kernel or socket type refuses MSG_ZEROCOPY", err)
	case errors.Is(err, unix.EPERM):
		return NotSupported("SO_ZEROCOPY", "not permitted", err)
	}
	return fmt.Errorf("setsockopt SO_ZEROCOPY: %w", err)
}

// Recv reads what is there into buf without blocking: ErrWouldBlock when
// nothing is, (0, nil) at end of stream.
func Recv(fd uintptr, buf []byte) (int, error) {
	for {
		n, err := unix.Read(int(fd), buf)
		switch {
		case err == nil:
			return n, nil
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return 0, ErrWouldBlock
		}
		return 0, err
	}
}

// Completions reads one notification from the socket's error queue
// without allocating: MSG_ZEROCOPY sends number lo through hi (counted from
// 0 per socket) are done with their pages; copied says the kernel copied
// them after all (as it does over loopback). ok is false when the queue is
// empty.
func (s *Sender) Completions() (lo, hi uint32, copied, ok bool, err error) {
	for {
		s.emsg = unix.Msghdr{Control: &s.oob[0]}
		s.emsg.SetControllen(len(s.oob))
		_, _, e := unix.Syscall(unix.SYS_RECVMSG, s.fd, uintptr(unsafe.Pointer(&s.emsg)), unix.MSG_ERRQUEUE|unix.MSG_DONTWAIT)
		switch {
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN:
			return 0, 0, false, false, nil
		case e != 0:
			return 0, 0, false, false, fmt.Errorf("recvmsg MSG_ERRQUEUE: %w", e)
		}
		b := s.oob[:s.emsg.Controllen]
		for len(b) >= unix.SizeofCmsghdr {
			h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
			if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(b) {
				break
			}
			data := b[unix.CmsgLen(0):h.Len]
			if ((h.Level == unix.SOL_IP && h.Type == unix.IP_RECVERR) || (h.Level == unix.SOL_IPV6 && h.Type == unix.IPV6_RECVERR)) && len(data) >= 16 {
				// struct sock_extended_err: errno u32, origin u8, type u8, code u8, pad u8, info u32, data u32
				origin, code := data[4], data[6]
				if origin == unix.SO_EE_ORIGIN_ZEROCOPY {
					return binary.NativeEndian.Uint32(data[8:]), binary.NativeEndian.Uint32(data[12:]),
						code&unix.SO_EE_CODE_ZEROCOPY_COPIED != 0, true, nil
				}
			}
			b = b[min(cmsgSpace(int(h.Len)), len(b)):]
		}
		// Not a zerocopy notification (an ICMP error, say): look at the next.
	}
}

func cmsgSpace(n int) int { return (n + unix.SizeofPtr - 1) &^ (unix.SizeofPtr - 1) }

// PollFD is one descriptor for Poll.
type PollFD = unix.PollFd

// Poll events.
const (
	PollIn  = unix.POLLIN
	PollOut = unix.POLLOUT
	PollErr = unix.POLLERR
	PollHup = unix.POLLHUP
)

// Poll waits up to timeoutMs (-1: forever) for an event on fds.
func Poll(fds []PollFD, timeoutMs int) (int, error) {
	for {
		n, err := unix.Poll(fds, timeoutMs)
		if err == unix.EINTR {
			continue
		}
		return n, err
	}
}

// Sender writes up to two buffers with one sendmsg without allocating: it
// keeps its own message header and I/O vectors. One per socket; not for
// concurrent use.
type Sender struct {
	fd   uintptr
	iov  [2]unix.Iovec
	msg  unix.Msghdr
	emsg unix.Msghdr // error queue
	oob  [128]byte
}

// NewSender returns a Sender for the socket fd.
func NewSender(fd uintptr) *Sender { return &Sender{fd: fd} }

// Send writes a then b (either may be empty) with MSG_DONTWAIT and
// MSG_NOSIGNAL, and MSG_ZEROCOPY when zerocopy is set (the pages stay the
// kernel's until a completion for this call arrives: Sender.Completions).
// It returns the bytes accepted; ErrWouldBlock when none could be.
func (s *Sender) Send(a, b []byte, zerocopy bool) (int, error) {
	if fillIov(&s.iov, &s.msg, a, b) == 0 {
		return 0, nil
	}
	flags := unix.MSG_DONTWAIT | unix.MSG_NOSIGNAL
	if zerocopy {
		flags |= unix.MSG_ZEROCOPY
	}
	for {
		// RawSyscall: a non-blocking send returns at once, so it need not
		// enter the runtime's syscall state, where the scheduler may hand
		// this thread's P to another thread around it (see Receiver.Recv).
		r, _, e := unix.RawSyscall(unix.SYS_SENDMSG, s.fd, uintptr(unsafe.Pointer(&s.msg)), uintptr(flags))
		switch {
		case e == 0:
			s.iov = [2]unix.Iovec{} // drop the references to the buffers
			return int(r), nil
		case e == unix.EINTR:
			continue
		case e == unix.EAGAIN, e == unix.ENOBUFS && zerocopy:
			// ENOBUFS: over the optmem limit for pinned pages; completions free it.
			s.iov = [2]unix.Iovec{}
			return 0, ErrWouldBlock
		}
		s.iov = [2]unix.Iovec{}
		return 0, fmt.Errorf("sendmsg: %w", e)
	}
}
