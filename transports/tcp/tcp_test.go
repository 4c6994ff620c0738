package tcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/transporttest"
)

type scenario struct {
	Options  transports.Options `json:"options,omitempty"`
	Survivor string             `json:"survivor,omitempty"` // peer gone: "sender" or "receiver"
	// Addrs stand in for the ranks' bootstrap addresses (transports.Env.Addr),
	// by rank, as a launcher starting ranks on several hosts gives them.
	Addrs []string `json:"addrs,omitempty"`
}

// small socket buffers: an 8 MiB payload cannot sit in the kernel whole.
var small = transports.Options{"tcp.sndbuf": "64K", "tcp.rcvbuf": "64K"}

// job is a pair of ranks of kind on s.
func job(kind string, s scenario) transporttest.Job {
	return transporttest.Job{Kind: kind, Params: s, Stall: 30 * time.Second}
}

// results runs a pair of ranks of kind on s and decodes what each returns.
func results[T any](t *testing.T, kind string, s scenario) []T {
	t.Helper()
	return transporttest.Results[T](t, job(kind, s))
}

func open(r *launch.Rank) (*Transport, scenario, error) {
	return transporttest.OpenScenario[*Transport](r, "tcp", func(s scenario) transports.Env { return rankEnv(r, s) })
}

func TestMain(m *testing.M) {
	transporttest.Main(m, map[string]launch.Func{
		"tcp-intruder":    intruderRank,
		"tcp-wrong-token": wrongTokenRank,
		"tcp-peer-gone":   peerGoneRank,
		"tcp-exchange":    exchangeRank,
		"tcp-allocs":      allocsRank,
		"tcp-alltoall":    alltoallRank,
		"tcp-addrs":       addrsRank,
		"tcp-netpoll":     netpollRank,
		"tcp-exchange-zc-refused": func(r *launch.Rank) (any, error) {
			enableZeroCopy = func(uintptr) error {
				return sys.NotSupported("SO_ZEROCOPY", "refused by the test", nil)
			}
			return exchangeRank(r)
		},
	})
}

// rankEnv is the transport environment of a test rank.
func rankEnv(r *launch.Rank, s scenario) transports.Env {
	env := transporttest.Env(r, s.Options)
	if r.ID < len(s.Addrs) {
		env.Addr = s.Addrs[r.ID]
	}
	return env
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
	peer := transporttest.Peer(r)
	m, err := transporttest.NewMessages(sizes)
	if err != nil {
		return nil, err
	}
	sbuf, rbuf := m.Send, m.Recv
	m.Fill(func(i int) int { return i + 10*r.ID })
	var reqs []transports.Request
	for i := range sizes {
		q, err := t.Isend(peer, m.Out(i))
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, q)
	}
	if err := r.Barrier(); err != nil { // the peer's messages arrive before their receives
		return nil, err
	}
	time.Sleep(50 * time.Millisecond)
	var recvs []*request
	for i := range sizes {
		q, err := t.Irecv(peer, m.In(i))
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, q)
		recvs = append(recvs, q.(*request))
	}
	if err := t.Wait(reqs[:len(sizes)]...); err != nil {
		return nil, err
	}
	for _, q := range recvs {
		if err := t.Wait(q); err != nil {
			return nil, err
		}
	}
	if err := m.Verify(func(i int) int { return i + 10*peer }, peer); err != nil {
		return nil, err
	}
	// Truncation: a 100-byte eager message and a 1 MiB one into 10 bytes.
	for k, n := range []int{100, 1 << 20} {
		if err := transporttest.Truncate(t, r.ID, sbuf, rbuf, n, 10, 100+k); err != nil {
			return nil, err
		}
	}
	// Still in step after truncation (tcp.eager=0 included).
	if err := transporttest.InStep(t, peer, sbuf, rbuf); err != nil {
		return nil, err
	}
	on, why := t.ZeroCopy()
	return fmt.Sprintf("zerocopy %v %s", on, why), t.Close()
}

func TestUnexpectedAndTruncated(t *testing.T) {
	for _, opts := range []transports.Options{nil, {"tcp.conns": "4"}, {"tcp.zerocopy": "64K", "tcp.conns": "2"}, {"tcp.eager": "0"},
		{"tcp.busypoll": "50", "tcp.nodelay": "off"}, {"tcp.addr": "0.0.0.0:0"}, {"tcp.addr": "[::1]:0"}} {
		t.Run(fmt.Sprint(opts), func(t *testing.T) {
			res, err := transporttest.Start(t, job("tcp-exchange", scenario{Options: opts}))
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
			var stderr transporttest.Output
			j := job(kind, scenario{Options: transports.Options{"tcp.zerocopy": "64K", "tcp.conns": "2"}})
			j.Stderr = &stderr
			res, err := transporttest.Start(t, j)
			if err != nil {
				t.Fatal(err, stderr.String())
			}
			got := transporttest.Decode[string](t, res)[0]
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
	var stderr transporttest.Output
	j := job("tcp-intruder", scenario{})
	j.Stderr = &stderr
	intruder := transporttest.Results[string](t, j)[1]
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
	var stderr transporttest.Output
	j := job("tcp-wrong-token", scenario{})
	j.Stderr = &stderr
	res, err := transporttest.Start(t, j)
	if err != nil {
		t.Fatal(err, stderr.String())
	}
	errs := transporttest.Decode[string](t, res)
	e0, e1 := errs[0], errs[1]
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
	return transporttest.Survive(r, t, s.Survivor == "sender", buf, nil)
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
			j := job("tcp-peer-gone", scenario{Survivor: who, Options: small})
			j.Deadline = 60 * time.Second // a hang fails the test, its ranks killed
			msg := transporttest.Results[string](t, j)[0]
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
// counting the transport's heap allocations per message, with the stack of
// each allocation site.
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
	peer := transporttest.Peer(r)
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
	out := map[string]allocs{}
	for _, n := range []int{8, 1 << 20} {
		if err := pingpong(n, 20); err != nil {
			return nil, err
		}
		const iters = 200
		count, sites, err := transporttest.OwnAllocations(func() error { return pingpong(n, iters) })
		if err != nil {
			return nil, err
		}
		out[fmt.Sprint(n)] = allocs{PerMessage: float64(count) / (2 * iters), Sites: sites}
	}
	// A sender may still reap its zerocopy completions after its peer has
	// received everything: the peer closes only when both are done, for a
	// close seen mid-window is not the steady state.
	return out, r.Barrier()
}

type allocs struct {
	PerMessage float64  `json:"per_message"`
	Sites      []string `json:"sites,omitempty"`
}

// The steady state allocates nothing per message (requests, frames and
// arrivals are recycled; sendmsg goes through a reused header). What the
// Go runtime allocates for itself meanwhile (a thread) is not counted.
func TestNoAllocationPerMessage(t *testing.T) {
	for _, opts := range []transports.Options{nil, {"tcp.conns": "4", "tcp.zerocopy": "64K"}} {
		for rank, per := range results[map[string]allocs](t, "tcp-allocs", scenario{Options: opts}) {
			for n, a := range per {
				if a.PerMessage > 0 {
					t.Errorf("%v rank %d: %.3f allocations per %s-byte message, at:\n%s", opts, rank, a.PerMessage, n, strings.Join(a.Sites, "\n"))
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
			transporttest.Pattern(slot(sbuf, peer, i), r.ID*100+peer*10+i)
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
			transporttest.Pattern(want[:n], peer*100+r.ID*10+i)
			if !bytes.Equal(slot(rbuf, peer, i), want[:n]) {
				return nil, fmt.Errorf("message %d from rank %d differs", i, peer)
			}
		}
	}
	return len(reqs), t.Close()
}

func TestFourRanksAllToAll(t *testing.T) {
	j := job("tcp-alltoall", scenario{Options: transports.Options{"tcp.conns": "2"}})
	j.Size = 4
	for r, n := range transporttest.Results[int](t, j) {
		if n != 12 {
			t.Errorf("rank %d: %d", r, n)
		}
	}
}
