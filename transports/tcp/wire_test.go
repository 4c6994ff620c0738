package tcp

import (
	"encoding/binary"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/transports/msgengine"
)

// wireRank is rank 0 of a two-rank job with its one connection to rank 1
// set up as setup leaves it (a loopback socket stands for the wire), a
// receive posted of each kind and a rendezvous send waiting for its
// clear-to-send: the state a frame from rank 1 meets.
func wireRank(t testing.TB) (*Transport, *conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	far, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	near, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	tr := &Transport{rank: 0, size: 2, params: Params{Eager: 4 << 10, Conns: 1, NoDelay: true}, peers: make([]*peer, 2)}
	tr.Init("tcp", 0, 2, tr.params.Eager, msgengine.Hooks[*request, *arrival]{
		Start: tr.start, Match: tr.match, Progress: tr.progress})
	if err := tr.addConn(1, far.LocalAddr().String(), 0, near.(*net.TCPConn)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	t.Cleanup(func() { far.Close() }) // first: Close waits for the far end's
	for _, n := range []int{100, 256 << 10} {
		if _, err := tr.Irecv(1, make([]byte, n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tr.Isend(1, make([]byte, 100<<10)); err != nil {
		t.Fatal(err)
	}
	return tr, tr.peers[1].conns[0]
}

// feed hands data to c as if the socket had delivered it, frame after
// frame, and returns the first error; then it posts two more receives,
// which meet what arrived unexpected.
func feed(tr *Transport, c *conn, data []byte) error {
	c.stage = append(c.stage[:0], data...)
	c.r, c.w = 0, len(data)
	var err error
	for c.r < c.w && err == nil {
		err = c.consume()
	}
	if err == errPartial {
		err = nil
	}
	for _, n := range []int{10, 8 << 10} {
		if _, rerr := tr.Irecv(1, make([]byte, n)); rerr != nil && err == nil {
			err = rerr
		}
	}
	return err
}

// header is one frame header as the wire carries it.
func header(kind byte, seq uint32, n, off uint64) []byte {
	h := make([]byte, hdrLen)
	h[0] = kind
	binary.LittleEndian.PutUint32(h[4:], seq)
	binary.LittleEndian.PutUint64(h[8:], n)
	binary.LittleEndian.PutUint64(h[16:], off)
	return h
}

// A peer that lies about lengths or offsets, or sends frames nobody
// expects, fails its pair with an error naming the frame; it never makes
// the rank write outside a buffer or panic.
func TestHostileFrames(t *testing.T) {
	const huge = 1 << 63 // read as a negative int
	for _, tc := range []struct {
		name  string
		wire  []byte
		error string // "" for a frame that is legal
	}{
		{"an eager message", append(header(kEager, 0, 5, 0), "hello"...), ""},
		{"eager of negative length", header(kEager, 0, huge, 0), "length"},
		{"eager over the limit into a posted receive", header(kEager, 0, 5<<10, 0), "over tcp.eager"},
		{"eager over the limit, unexpected", slices.Concat(append(header(kEager, 0, 100, 0), make([]byte, 100)...), append(header(kEager, 1, 200, 0), make([]byte, 200)...), header(kEager, 2, 5<<10, 0)), "over tcp.eager"},
		{"request to send of negative length", header(kRTS, 1, huge, 0), "length"},
		{"clear to send for more than the message", header(kCTS, 0, 200<<10, 0), "clear-to-send"},
		{"clear to send of negative length", header(kCTS, 0, huge, 0), "length"},
		{"clear to send for a send not waiting", header(kCTS, 7, 10, 0), "not waiting"},
		{"data at a negative offset", header(kData, 1, 10, huge), "offset"},
		{"data nobody asked for", header(kData, 9, 10, 0), "not expected"},
		{"a rendezvous message", slices.Concat(append(header(kEager, 0, 5, 0), "hello"...), header(kRTS, 1, 100, 0), header(kData, 1, 100, 0), make([]byte, 100)), ""},
		{"data whose offset and length overflow", slices.Concat(append(header(kEager, 0, 5, 0), "hello"...), header(kRTS, 1, 100, 0), header(kData, 1, 10, 1<<63-1)), "not expected"},
		{"an unknown kind", header(9, 0, 0, 0), "unknown kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, c := wireRank(t)
			err := feed(tr, c, tc.wire)
			switch {
			case tc.error == "" && err != nil:
				t.Fatalf("a legal frame failed: %v", err)
			case tc.error != "" && (err == nil || !strings.Contains(err.Error(), tc.error)):
				t.Fatalf("err = %v, want one that says %q", err, tc.error)
			case tc.error != "" && !strings.Contains(err.Error(), "rank 0 connection 0 with rank 1"):
				t.Errorf("the error does not name the connection: %v", err)
			}
		})
	}
}

// Whatever a peer sends after the handshake, the rank either takes it as
// frames or fails the pair with an error: it never panics or writes
// outside a buffer (the race detector and bounds checks watch).
func FuzzFrames(f *testing.F) {
	for _, seed := range [][]byte{
		append(header(kEager, 0, 5, 0), "hello"...),
		header(kRTS, 1, 300<<10, 0),
		slices.Concat(header(kRTS, 1, 300<<10, 0), header(kData, 1, 10, 0), make([]byte, 10)),
		header(kCTS, 0, 100<<10, 0),
		header(kData, 1, 1<<63, 1<<63),
		header(kEager, 0, 1<<40, 0),
		header(kEager, 0, 0, 0)[:10],
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, c := wireRank(t)
		if err := feed(tr, c, data); err != nil && !strings.Contains(err.Error(), "tcp: rank 0") {
			t.Fatalf("an error without the rank and connection: %v", err)
		}
	})
}

// Whatever a connecting process says first, the handshake reader returns
// a hello or an error, and never reads a token longer than maxToken.
func FuzzHello(f *testing.F) {
	f.Add(hello{rank: 1, idx: 0, conns: 1, size: 2, token: "job-token"}.marshal())
	f.Add(append(magic[:], make([]byte, 20)...))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() {
			b.Write(data)
			b.Close()
		}()
		h, err := readHello(a)
		if err == nil && len(h.token) > maxToken {
			t.Fatalf("accepted a token of %d bytes", len(h.token))
		}
	})
}
