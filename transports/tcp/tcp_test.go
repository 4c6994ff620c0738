package tcp

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

func TestMain(m *testing.M) {
	launch.Register("tcp-intruder", intruderRank)
	launch.Register("tcp-wrong-token", wrongTokenRank)
	launch.Register("tcp-peer-gone", peerGoneRank)
	launch.Register("tcp-exchange", exchangeRank)
	launch.Register("tcp-allocs", allocsRank)
	launch.Register("tcp-alltoall", alltoallRank)
	launch.Register("tcp-addrs", addrsRank)
	launch.Register("tcp-netpoll", netpollRank)
	launch.Register("tcp-exchange-zc-refused", func(r *launch.Rank) (any, error) {
		enableZeroCopy = func(uintptr) error {
			return sys.NotSupported("SO_ZEROCOPY", "refused by the test", nil)
		}
		return exchangeRank(r)
	})
	launch.MaybeRunRank()
	os.Exit(m.Run())
}

type scenario struct {
	Options  transports.Options `json:"options,omitempty"`
	Survivor string             `json:"survivor,omitempty"` // peer gone: "sender" or "receiver"
	// Addrs stand in for the ranks' bootstrap addresses (transports.Env.Addr),
	// by rank, as a launcher starting ranks on several hosts gives them.
	Addrs []string `json:"addrs,omitempty"`
}

// small socket buffers: an 8 MiB payload cannot sit in the kernel whole.
var small = transports.Options{"tcp.sndbuf": "64K", "tcp.rcvbuf": "64K"}

func run(t *testing.T, kind string, s scenario, stderr io.Writer) (launch.Result, error) {
	t.Helper()
	params, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return launch.Run(context.Background(), launch.Job{Kind: kind, Size: 2, Params: params, Stall: 30 * time.Second}, launch.Hooks{Stderr: stderr})
}

func open(r *launch.Rank) (*Transport, scenario, error) {
	var s scenario
	if err := r.Params(&s); err != nil {
		return nil, s, err
	}
	env := rankEnv(r, s)
	t, err := New(env)
	if err != nil {
		return nil, s, err
	}
	return t.(*Transport), s, Check(t, env)
}

// rankEnv is the transport environment of a test rank.
func rankEnv(r *launch.Rank, s scenario) transports.Env {
	env := transports.Env{Rank: r.ID, Size: r.Size, PIDs: r.PIDs, Options: s.Options, Token: r.Token,
		AllGather: r.AllGather, Hosts: r.Hosts, Addr: r.Addr}
	if r.ID < len(s.Addrs) {
		env.Addr = s.Addrs[r.ID]
	}
	return env
}

func pattern(b []byte, seed int) {
	for i := range b {
		b[i] = byte(seed*31 + i*7 + i>>9)
	}
}

// exchangeRank: both ranks post a burst of every size both ways before
// waiting (unexpected eager messages, unexpected requests to send, and
// truncation), then check every byte. It returns what ZeroCopy says.
func exchangeRank(r *launch.Rank) (any, error) {
	t, _, err := open(r)
	if err != nil {
		return nil, err
	}
	sizes := []int{0, 1, 100, 64 << 10, 64<<10 + 1, 300000, 2 << 20}
	peer := 1 - r.ID
	total := 0
	for _, n := range sizes {
		total += n
	}
	sbuf, err := sys.MapAnon(total, true)
	if err != nil {
		return nil, err
	}
	rbuf, err := sys.MapAnon(total, true)
	if err != nil {
		return nil, err
	}
	var reqs []transports.Request
	off := 0
	for i, n := range sizes {
		pattern(sbuf[off:off+n], i+10*r.ID)
		q, err := t.Isend(peer, sbuf[off:off+n])
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, q)
		off += n
	}
	if err := r.Barrier(); err != nil { // the peer's messages arrive before their receives
		return nil, err
	}
	time.Sleep(50 * time.Millisecond)
	off = 0
	var recvs []*request
	for _, n := range sizes {
		q, err := t.Irecv(peer, rbuf[off:off+n])
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, q)
		recvs = append(recvs, q.(*request))
		off += n
	}
	if err := t.Wait(reqs[:len(sizes)]...); err != nil {
		return nil, err
	}
	for _, q := range recvs {
		if err := t.Wait(q); err != nil {
			return nil, err
		}
	}
	off = 0
	want := make([]byte, 2<<20)
	for i, n := range sizes {
		pattern(want[:n], i+10*peer)
		if !bytes.Equal(rbuf[off:off+n], want[:n]) {
			return nil, fmt.Errorf("message %d (%d bytes) from rank %d differs", i, n, peer)
		}
		off += n
	}
	// Truncation: a 100-byte eager message and a 1 MiB one into 10 bytes.
	for _, n := range []int{100, 1 << 20} {
		var err error
		if r.ID == 0 {
			err = t.Send(peer, sbuf[:n])
		} else {
			_, err = t.Recv(peer, rbuf[:10])
			if !errors.Is(err, transports.ErrTruncated) {
				return nil, fmt.Errorf("%d bytes into 10: %v, want truncated", n, err)
			}
			err = nil
		}
		if err != nil {
			return nil, err
		}
	}
	// Still in step after truncation (Isend: with tcp.eager=0 two blocking
	// sends would wait for each other's receive).
	q, err := t.Isend(peer, sbuf[:4])
	if err != nil {
		return nil, err
	}
	if _, err := t.Recv(peer, rbuf[:4]); err != nil {
		return nil, err
	}
	if err := t.Wait(q); err != nil {
		return nil, err
	}
	on, why := t.ZeroCopy()
	return fmt.Sprintf("zerocopy %v %s", on, why), t.Close()
}

func TestUnexpectedAndTruncated(t *testing.T) {
	for _, opts := range []transports.Options{nil, {"tcp.conns": "4"}, {"tcp.zerocopy": "64K", "tcp.conns": "2"}, {"tcp.eager": "0"},
		{"tcp.busypoll": "50", "tcp.nodelay": "off"}, {"tcp.addr": "0.0.0.0:0"}, {"tcp.addr": "[::1]:0"}} {
		t.Run(fmt.Sprint(opts), func(t *testing.T) {
			res, err := run(t, "tcp-exchange", scenario{Options: opts}, nil)
			if errors.Is(err, transports.ErrNotSupported) && opts["tcp.busypoll"] != "" {
				t.Skipf("the kernel refuses SO_BUSY_POLL: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s", res[0])
		})
	}
}

// MSG_ZEROCOPY: on where the kernel offers it, otherwise the transport
// says why once and sends by copy. The refusal is also forced, so the
// fallback is exercised on a kernel that has MSG_ZEROCOPY.
func TestZeroCopyOrFallback(t *testing.T) {
	for _, kind := range []string{"tcp-exchange", "tcp-exchange-zc-refused"} {
		t.Run(kind, func(t *testing.T) {
			var stderr syncBuffer
			res, err := run(t, kind, scenario{Options: transports.Options{"tcp.zerocopy": "64K", "tcp.conns": "2"}}, &stderr)
			if err != nil {
				t.Fatal(err, stderr.String())
			}
			var got string
			json.Unmarshal(res[0], &got)
			notes := strings.Count(stderr.String(), "sending by copy")
			switch {
			case strings.HasPrefix(got, "zerocopy true") && kind == "tcp-exchange" && notes == 0:
				t.Logf("MSG_ZEROCOPY in use (%s)", got)
			case strings.HasPrefix(got, "zerocopy false") && notes == 2: // once a rank
				t.Logf("fallback: %s; %s", got, strings.TrimSpace(stderr.String()))
			default:
				t.Errorf("ZeroCopy says %q; stderr %q", got, stderr.String())
			}
		})
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// intruderRank: once the ranks are connected, rank 1 connects to rank 0's
// listener with a wrong token; rank 0 must refuse and log it.
func intruderRank(r *launch.Rank) (any, error) {
	t, _, err := open(r)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	local := ""
	if r.ID == 1 {
		c, err := net.Dial("tcp", t.addrs[0])
		if err != nil {
			return nil, err
		}
		local = c.LocalAddr().String()
		c.Write(hello{rank: 0, idx: 0, conns: 1, size: 2, token: strings.Repeat("0", len(r.Token))}.marshal())
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(make([]byte, 1))
		c.Close()
		if n != 0 || err == nil {
			return nil, fmt.Errorf("intruder got %d bytes, %v: want the connection closed", n, err)
		}
	}
	if err := r.Barrier(); err != nil {
		return nil, err
	}
	// Still working after the intrusion.
	buf, err := sys.MapAnon(8, true)
	if err != nil {
		return nil, err
	}
	if r.ID == 0 {
		err = t.Send(1, buf)
	} else {
		_, err = t.Recv(0, buf)
	}
	return local, err
}

func TestWrongTokenRefusedAndLogged(t *testing.T) {
	var stderr syncBuffer
	res, err := run(t, "tcp-intruder", scenario{}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	var intruder string
	json.Unmarshal(res[1], &intruder)
	log := stderr.String()
	if !strings.Contains(log, "wrong job token") || !strings.Contains(log, "from "+intruder) || !strings.Contains(log, "rank 0") {
		t.Errorf("rank 0's log does not name the refusal and the peer %s: %q", intruder, log)
	}
	t.Log(strings.TrimSpace(log))
}

// wrongTokenRank: rank 1 was started with another token; setup must fail
// on both sides, not connect.
func wrongTokenRank(r *launch.Rank) (any, error) {
	SetupTimeout = 2 * time.Second
	env := rankEnv(r, scenario{})
	if r.ID == 1 {
		env.Token = "not-" + r.Token
	}
	t, err := New(env)
	if err == nil {
		t.Close()
		return nil, errors.New("connected with a wrong token")
	}
	return err.Error(), nil
}

func TestWrongTokenFailsSetup(t *testing.T) {
	var stderr syncBuffer
	res, err := run(t, "tcp-wrong-token", scenario{}, &stderr)
	if err != nil {
		t.Fatal(err, stderr.String())
	}
	var e0, e1 string
	json.Unmarshal(res[0], &e0)
	json.Unmarshal(res[1], &e1)
	if !strings.Contains(e0, "wrong job token?") || !strings.Contains(e0, "rank 1") {
		t.Errorf("rank 0: %q", e0)
	}
	if !strings.Contains(e1, "connections of ranks [0]") {
		t.Errorf("rank 1: %q", e1)
	}
	if !strings.Contains(stderr.String(), "wrong job token") {
		t.Errorf("rank 1 logged no refusal: %q", stderr.String())
	}
}

// peerGoneRank: rank 1 exits in the middle of a rendezvous with rank 0.
//
// Rank 1 moves a bounded part of the payload by hand on the raw socket and
// leaves: driving its transport instead (progress until some payload has
// moved) is no bound at all, since one progress call reads or writes for as
// long as the other side keeps the socket busy, and under CPU load it moved
// all 8 MiB now and then (the sender then rightly completed).
func peerGoneRank(r *launch.Rank) (any, error) {
	t, s, err := open(r)
	if err != nil {
		return nil, err
	}
	const part = 4 << 10 // payload bytes rank 1 moves before it leaves
	buf, err := sys.MapAnon(8<<20, true)
	if err != nil {
		return nil, err
	}
	c := t.peers[1-r.ID].conns[0]
	// The premise: what the two sockets can hold is far below the payload,
	// so the survivor cannot finish before it sees the peer gone.
	snd, err := sys.SendBufferSize(c.fd)
	if err != nil {
		return nil, err
	}
	rcv, err := sys.RecvBufferSize(c.fd)
	if err != nil {
		return nil, err
	}
	if part+snd+rcv > len(buf)/4 {
		return nil, fmt.Errorf("socket buffers of %d and %d bytes: an %d-byte payload could sit in the kernel whole", snd, rcv, len(buf))
	}
	if r.ID == 1 {
		var sq transports.Request
		if s.Survivor == "receiver" {
			if sq, err = t.Isend(0, buf); err != nil { // request to send
				return nil, err
			}
		}
		if err := r.Barrier(); err != nil {
			return nil, err
		}
		switch s.Survivor {
		case "receiver":
			// Take the clear-to-send, write the data frame's header
			// and the first part of its payload, leave.
			var cts [hdrLen]byte
			if err := rawRead(c, cts[:]); err != nil {
				return nil, err
			}
			seq := sq.(*request).Seq
			if cts[0] != kCTS || binary.LittleEndian.Uint32(cts[4:]) != seq {
				return nil, fmt.Errorf("want the clear-to-send of message %d, got frame %x", seq, cts)
			}
			f := t.newFrame(kData, seq, len(buf), 0, nil, nil)
			if err := rawWrite(c, append(f.hdr[:], buf[:part]...)); err != nil {
				return nil, err
			}
		case "sender":
			// Take the request to send (nothing else can come before
			// the clear-to-send), answer it, read the first part of the
			// payload, leave with the rest unread.
			for t.peers[0].Unexpected.Len() == 0 {
				if !t.progress() {
					t.block(100)
				}
			}
			if _, err := t.Irecv(0, buf); err != nil { // writes the clear-to-send, reads nothing
				return nil, err
			}
			if err := rawRead(c, buf[:part]); err != nil {
				return nil, err
			}
		}
		return "left", nil // exit without Close
	}
	var q transports.Request
	if s.Survivor == "sender" {
		if q, err = t.Isend(1, buf); err != nil {
			return nil, err
		}
	}
	if err := r.Barrier(); err != nil {
		return nil, err
	}
	if s.Survivor == "receiver" {
		if q, err = t.Irecv(1, buf); err != nil {
			return nil, err
		}
	}
	err = t.Wait(q)
	if err == nil {
		return nil, errors.New("survivor saw no error")
	}
	return err.Error(), nil
}

// rawRead fills b from c's socket, waiting in poll(2) when it is empty.
func rawRead(c *conn, b []byte) error {
	for n := 0; n < len(b); {
		k, err := sys.Recv(c.fd, b[n:])
		switch {
		case err == sys.ErrWouldBlock:
			sys.Poll([]sys.PollFD{{Fd: int32(c.fd), Events: sys.PollIn}}, 1000)
		case err != nil:
			return err
		case k == 0:
			return io.ErrUnexpectedEOF
		}
		n += k
	}
	return nil
}

// rawWrite writes b to c's socket, waiting in poll(2) when it is full.
func rawWrite(c *conn, b []byte) error {
	for n := 0; n < len(b); {
		k, err := c.snd.Send(b[n:], nil, false)
		switch {
		case err == sys.ErrWouldBlock:
			sys.Poll([]sys.PollFD{{Fd: int32(c.fd), Events: sys.PollOut}}, 1000)
		case err != nil:
			return err
		}
		n += k
	}
	return nil
}

func TestPeerGoneMidRendezvous(t *testing.T) {
	for _, who := range []string{"sender", "receiver"} {
		t.Run(who, func(t *testing.T) {
			done := make(chan struct{})
			var res launch.Result
			var err error
			go func() {
				defer close(done)
				res, err = run(t, "tcp-peer-gone", scenario{Survivor: who, Options: small}, nil)
			}()
			select {
			case <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("hang")
			}
			if err != nil {
				t.Fatal(err)
			}
			var msg string
			json.Unmarshal(res[0], &msg)
			op := map[string]string{"sender": "rendezvous send", "receiver": "rendezvous receive"}[who]
			if !strings.Contains(msg, op) || !strings.Contains(msg, "rank 1") || !strings.Contains(msg, "127.0.0.1:") ||
				!strings.Contains(msg, "has it exited?") {
				t.Errorf("survivor's error %q does not say %q, rank 1 and its address, and that the peer is gone", msg, op)
			}
			t.Log(msg)
		})
	}
}

// allocsRank: ping-pong at eager and rendezvous sizes, then the same again
// counting the heap allocations per message.
func allocsRank(r *launch.Rank) (any, error) {
	t, _, err := open(r)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	buf, err := sys.MapAnon(1<<20, true)
	if err != nil {
		return nil, err
	}
	peer := 1 - r.ID
	pingpong := func(n, iters int) error {
		for range iters {
			if r.ID == 0 {
				if err := t.Send(peer, buf[:n]); err != nil {
					return err
				}
				if _, err := t.Recv(peer, buf[:n]); err != nil {
					return err
				}
			} else {
				if _, err := t.Recv(peer, buf[:n]); err != nil {
					return err
				}
				if err := t.Send(peer, buf[:n]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	out := map[string]float64{}
	for _, n := range []int{8, 1 << 20} {
		if err := pingpong(n, 20); err != nil {
			return nil, err
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		const iters = 200
		if err := pingpong(n, iters); err != nil {
			return nil, err
		}
		runtime.ReadMemStats(&after)
		out[fmt.Sprint(n)] = float64(after.Mallocs-before.Mallocs) / (2 * iters)
	}
	return out, nil
}

// The steady state allocates nothing per message (requests, frames and
// arrivals are recycled; sendmsg goes through a reused header).
func TestNoAllocationPerMessage(t *testing.T) {
	for _, opts := range []transports.Options{nil, {"tcp.conns": "4", "tcp.zerocopy": "64K"}} {
		res, err := run(t, "tcp-allocs", scenario{Options: opts}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for rank, raw := range res {
			var per map[string]float64
			if err := json.Unmarshal(raw, &per); err != nil {
				t.Fatal(err)
			}
			for n, a := range per {
				if a > 0.05 {
					t.Errorf("%v rank %d: %.2f allocations per %s-byte message", opts, rank, a, n)
				}
			}
			t.Logf("%v rank %d: allocations per message %v", opts, rank, per)
		}
	}
}

// alltoallRank: every rank sends an eager and a rendezvous message to
// every other and checks what it receives.
func alltoallRank(r *launch.Rank) (any, error) {
	t, _, err := open(r)
	if err != nil {
		return nil, err
	}
	sizes := []int{100, 200000}
	sbuf, err := sys.MapAnon(r.Size*len(sizes)*200000, true)
	if err != nil {
		return nil, err
	}
	rbuf, err := sys.MapAnon(r.Size*len(sizes)*200000, true)
	if err != nil {
		return nil, err
	}
	var reqs []transports.Request
	slot := func(b []byte, peer, i int) []byte {
		off := (peer*len(sizes) + i) * 200000
		return b[off : off+sizes[i]]
	}
	for peer := range r.Size {
		if peer == r.ID {
			continue
		}
		for i := range sizes {
			pattern(slot(sbuf, peer, i), r.ID*100+peer*10+i)
			sq, err := t.Isend(peer, slot(sbuf, peer, i))
			if err != nil {
				return nil, err
			}
			rq, err := t.Irecv(peer, slot(rbuf, peer, i))
			if err != nil {
				return nil, err
			}
			reqs = append(reqs, sq, rq)
		}
	}
	if err := t.Wait(reqs...); err != nil {
		return nil, err
	}
	want := make([]byte, 200000)
	for peer := range r.Size {
		if peer == r.ID {
			continue
		}
		for i, n := range sizes {
			pattern(want[:n], peer*100+r.ID*10+i)
			if !bytes.Equal(slot(rbuf, peer, i), want[:n]) {
				return nil, fmt.Errorf("message %d from rank %d differs", i, peer)
			}
		}
	}
	return len(reqs), t.Close()
}

func TestFourRanksAllToAll(t *testing.T) {
	params, _ := json.Marshal(scenario{Options: transports.Options{"tcp.conns": "2"}})
	res, err := launch.Run(context.Background(), launch.Job{Kind: "tcp-alltoall", Size: 4, Params: params, Stall: 30 * time.Second}, launch.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	for r, raw := range res {
		if string(raw) != "12" {
			t.Errorf("rank %d: %s", r, raw)
		}
	}
}

// addrsRank: start the transport (its check is a ring exchange over the
// connections) and say where this rank listens and what every rank
// published; or, when it fails to start, why.
func addrsRank(r *launch.Rank) (any, error) {
	t, _, err := open(r)
	if err != nil {
		return addrsResult{Err: err.Error()}, nil
	}
	defer t.Close()
	return addrsResult{Listen: t.Addr(), Addrs: t.addrs}, nil
}

type addrsResult struct {
	Listen string   `json:"listen,omitempty"`
	Addrs  []string `json:"addrs,omitempty"`
	Err    string   `json:"err,omitempty"`
}

// Ranks listen on their bootstrap address (port 0) unless tcp.addr says
// otherwise, and reach each other at what they published through the
// job's allgather. 127.0.0.2 and .3 stand for two hosts' addresses: the
// kernel serves all of 127/8 on loopback, so each is a real, distinct
// listening address here. A rank whose bootstrap address is not on its
// host (192.0.2.1, TEST-NET-1) cannot listen, and its peer fails at once
// with that rank's reason instead of waiting for its connection.
func TestAddresses(t *testing.T) {
	two := []string{"127.0.0.2", "127.0.0.3"}
	cases := []struct {
		name   string
		s      scenario
		listen []string // each rank's listening host (*: a wildcard; Go listens on [::] for 0.0.0.0)
		dial   []string // each rank's published host
		err    []string // each rank's error, in part ("": none)
	}{
		{"one host", scenario{}, []string{"127.0.0.1", "127.0.0.1"}, []string{"127.0.0.1", "127.0.0.1"}, nil},
		{"bootstrap addresses", scenario{Addrs: two}, two, two, nil},
		{"tcp.addr overrides", scenario{Addrs: two, Options: transports.Options{"tcp.addr": "127.0.0.4:0"}}, []string{"127.0.0.4", "127.0.0.4"}, []string{"127.0.0.4", "127.0.0.4"}, nil},
		{"wildcard publishes bootstrap", scenario{Addrs: two, Options: transports.Options{"tcp.addr": "0.0.0.0:0"}}, []string{"*", "*"}, two, nil},
		{"IPv6 bootstrap", scenario{Addrs: []string{"::1", "::1"}}, []string{"::1", "::1"}, []string{"::1", "::1"}, nil},
		{"bootstrap address not here", scenario{Addrs: []string{"127.0.0.2", "192.0.2.1"}}, nil, nil,
			[]string{"tcp: rank 1 has no address: tcp: rank 1 listen on 192.0.2.1:0", "tcp: rank 1 listen on 192.0.2.1:0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := run(t, "tcp-addrs", c.s, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got [2]addrsResult
			for r := range got {
				if err := json.Unmarshal(res[r], &got[r]); err != nil {
					t.Fatal(err)
				}
			}
			for r, g := range got {
				if c.err != nil {
					if !strings.Contains(g.Err, c.err[r]) {
						t.Errorf("rank %d: error %q, want %q", r, g.Err, c.err[r])
					}
					continue
				}
				if g.Err != "" {
					t.Fatalf("rank %d: %s", r, g.Err)
				}
				host, _, _ := net.SplitHostPort(g.Listen)
				if host != c.listen[r] && !(c.listen[r] == "*" && net.ParseIP(host).IsUnspecified()) {
					t.Errorf("rank %d listens on %s, want host %s", r, g.Listen, c.listen[r])
				}
				for p, a := range g.Addrs {
					host, port, _ := net.SplitHostPort(a)
					_, lport, _ := net.SplitHostPort(got[p].Listen)
					if host != c.dial[p] || port != lport {
						t.Errorf("rank %d has rank %d at %s; it listens on %s, want host %s", r, p, a, got[p].Listen, c.dial[p])
					}
				}
			}
			t.Logf("%+v", got)
		})
	}
}

// exchange checks what the allgather brings before any rank dials it.
func TestExchange(t *testing.T) {
	cases := []struct {
		name    string
		blobs   [][]byte
		gErr    error
		listen  error
		want    []string
		wantErr string
	}{
		{"ok", [][]byte{[]byte("127.0.0.1:5"), []byte("[::1]:6")}, nil, nil, []string{"127.0.0.1:5", "[::1]:6"}, ""},
		{"a rank could not listen", [][]byte{[]byte("127.0.0.1:5"), []byte("!listen on x: no")}, nil, nil, nil, "tcp: rank 1 has no address: listen on x: no"},
		{"this rank could not listen", [][]byte{[]byte("!mine"), []byte("127.0.0.1:6")}, nil, errors.New("mine"), nil, "mine"},
		{"not host:port", [][]byte{[]byte("127.0.0.1:5"), []byte("garbage")}, nil, nil, nil, `tcp: rank 1 published "garbage"`},
		{"too long", [][]byte{[]byte("127.0.0.1:5"), bytes.Repeat([]byte("a"), maxAddr+1)}, nil, nil, nil, "rank 1 published an address of 257 bytes"},
		{"too few", [][]byte{[]byte("127.0.0.1:5")}, nil, nil, nil, "1 for 2 ranks"},
		{"allgather fails", nil, errors.New("launcher gone"), nil, nil, "tcp: rank 0 exchanging addresses: launcher gone"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sent []byte
			env := transports.Env{Rank: 0, Size: 2, AllGather: func(b []byte) ([][]byte, error) { sent = b; return c.blobs, c.gErr }}
			got, err := exchange(env, "127.0.0.1:5", c.listen)
			if c.wantErr == "" {
				if err != nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Errorf("got %q, %v; want %q", got, err, c.want)
				}
			} else if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("got %q, %v; want error %q", got, err, c.wantErr)
			}
			if c.listen != nil && string(sent) != "!"+c.listen.Error() {
				t.Errorf("published %q for a failed listen", sent)
			}
		})
	}
}

func TestNoAllGather(t *testing.T) {
	_, err := New(transports.Env{Rank: 0, Size: 2, Token: "x"})
	if err == nil || !strings.Contains(err.Error(), "transports.Env.AllGather") {
		t.Errorf("New without an allgather: %v", err)
	}
}

// netpollRank: which of this rank's sockets the Go runtime's epoll instance
// watches: the listener (it accepts through the runtime), and none of the
// connections (the transport polls them itself).
func netpollRank(r *launch.Rank) (any, error) {
	t, _, err := open(r)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	watched, err := epollTargets()
	if err != nil {
		return nil, err
	}
	rc, err := t.ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		return nil, err
	}
	var lnIno uint64
	rc.Control(func(fd uintptr) { lnIno, err = sockInode(fd) })
	if err != nil {
		return nil, err
	}
	out := map[string]int{"listener": 0, "connections": 0}
	if watched[lnIno] {
		out["listener"]++
	}
	for _, c := range t.conns {
		ino, err := sockInode(c.fd)
		if err != nil {
			return nil, err
		}
		if watched[ino] {
			out["connections"]++
		}
	}
	return out, nil
}

// epollTargets lists the inodes of the files that this process's epoll
// instances watch (/proc/self/fdinfo of each eventpoll descriptor).
func epollTargets() (map[uint64]bool, error) {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	watched := map[uint64]bool{}
	for _, e := range ents {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); l != "anon_inode:[eventpoll]" {
			continue
		}
		info, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(info), "\n") {
			if !strings.HasPrefix(line, "tfd:") {
				continue
			}
			for _, f := range strings.Fields(line) {
				if v, ok := strings.CutPrefix(f, "ino:"); ok {
					var ino uint64
					if _, err := fmt.Sscanf(v, "%x", &ino); err != nil {
						return nil, fmt.Errorf("fdinfo %s: %q: %w", e.Name(), line, err)
					}
					watched[ino] = true
				}
			}
		}
	}
	return watched, nil
}

// sockInode is the inode of the socket fd refers to.
func sockInode(fd uintptr) (uint64, error) {
	l, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fd))
	if err != nil {
		return 0, err
	}
	var ino uint64
	if _, err := fmt.Sscanf(l, "socket:[%d]", &ino); err != nil {
		return 0, fmt.Errorf("fd %d is %q: %w", fd, l, err)
	}
	return ino, nil
}

// The connections are detached from the runtime's netpoller: a socket left
// registered there wakes a runtime thread for every segment and ACK that
// reaches it, which on two cores took CPU from the ranks (docs/transports.md, tcp).
// The listener, which accepts through the runtime, shows the check sees a
// registration.
func TestConnectionsOutsideNetpoller(t *testing.T) {
	res, err := run(t, "tcp-netpoll", scenario{Options: transports.Options{"tcp.conns": "3"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for r, raw := range res {
		var got map[string]int
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if got["listener"] != 1 || got["connections"] != 0 {
			t.Errorf("rank %d: registered with the runtime's epoll: %v (want the listener only)", r, got)
		}
	}
}
