package sys

import (
	"bytes"
	"net"
	"testing"
)

// tcpPair connects two loopback sockets and returns the writer and the
// receiving side's descriptor, detached (DupFD, then the net.Conn closed).
func tcpPair(t *testing.T) (net.Conn, uintptr) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	w, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	r, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := r.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	rc.Control(func(orig uintptr) { fd, err = DupFD(orig) })
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the duplicate keeps the connection
	t.Cleanup(func() { CloseFD(fd) })
	return w, fd
}

// Receiver.Recv fills the first buffer, then the second; says would-block
// on an empty socket and 0 at end of stream; PollNow sees data without
// reading it.
func TestReceiverAndPollNow(t *testing.T) {
	w, fd := tcpPair(t)
	rcv := NewReceiver(fd)
	a, b := make([]byte, 3), make([]byte, 16)
	if _, err := rcv.Recv(a, b); err != ErrWouldBlock {
		t.Fatalf("empty socket: %v, want ErrWouldBlock", err)
	}
	fds := []PollFD{{Fd: int32(fd), Events: PollIn}}
	if n, err := PollNow(fds); n != 0 || err != nil {
		t.Fatalf("PollNow on an empty socket: %d, %v", n, err)
	}
	if _, err := w.Write([]byte("headpayload")); err != nil {
		t.Fatal(err)
	}
	// Wait for it without reading: a blocking poll, then PollNow.
	if _, err := Poll(fds, 5000); err != nil {
		t.Fatal(err)
	}
	fds[0].Revents = 0
	if n, err := PollNow(fds); n != 1 || err != nil || fds[0].Revents&PollIn == 0 {
		t.Fatalf("PollNow with data: %d, %v, revents %#x", n, err, fds[0].Revents)
	}
	n, err := rcv.Recv(a, b)
	if err != nil || n != 11 || string(a) != "hea" || !bytes.Equal(b[:8], []byte("dpayload")) {
		t.Fatalf("Recv: %d, %v: %q %q", n, err, a, b[:8])
	}
	w.Close()
	if _, err := Poll(fds, 5000); err != nil {
		t.Fatal(err)
	}
	if n, err := rcv.Recv(a, nil); n != 0 || err != nil {
		t.Fatalf("end of stream: %d, %v", n, err)
	}
}

// ShutdownWrite ends the stream the peer reads.
func TestShutdownWrite(t *testing.T) {
	w, fd := tcpPair(t)
	if err := ShutdownWrite(fd); err != nil {
		t.Fatal(err)
	}
	if n, err := w.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Fatalf("peer read %d, %v: want end of stream", n, err)
	}
}
