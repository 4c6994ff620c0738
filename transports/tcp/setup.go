package tcp

// Connection setup: listen, exchange the addresses through the job's
// allgather, connect lower to higher, and the handshake that carries the job
// token.

import (
	"context"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

// SetupTimeout bounds how long New waits for its peers' connections.
var SetupTimeout = 60 * time.Second

// handshake wire format (little endian): magic, rank, connection index,
// connections per peer, job size, token length, token. The acceptor answers
// one status byte, or closes the connection without one when it refuses.
var magic = [8]byte{'g', 'o', 't', 'u', 'n', 'e', 't', '1'}

const (
	helloFixed  = 8 + 5*4
	maxToken    = 1024
	statusOK    = 'K' // accepted
	statusLater = 'L' // a valid hello to a listener whose setup is over: a stale address, look again
)

// logf reports refused connections; ranks' stderr reaches the launcher.
var logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// maxAddr bounds an address a rank publishes (host:port, with a zone).
const maxAddr = 256

// exchange publishes this rank's listening address (or why it has none)
// through the job's allgather and returns every rank's, by rank. Every rank
// takes part even when its listen failed, so its peers fail at once with its
// reason instead of waiting for a connection that never comes.
func exchange(env transports.Env, addr string, listenErr error) ([]string, error) {
	blob := []byte(addr)
	if listenErr != nil {
		blob = append([]byte{'!'}, listenErr.Error()...)
	}
	all, err := env.AllGather(blob)
	if err != nil {
		return nil, fmt.Errorf("tcp: rank %d exchanging addresses: %w", env.Rank, err)
	}
	if listenErr != nil {
		return nil, listenErr
	}
	if len(all) != env.Size {
		return nil, fmt.Errorf("tcp: rank %d exchanging addresses: %d for %d ranks", env.Rank, len(all), env.Size)
	}
	addrs := make([]string, env.Size)
	for r, b := range all {
		switch {
		case len(b) > 0 && b[0] == '!':
			return nil, fmt.Errorf("tcp: rank %d has no address: %s", r, b[1:])
		case len(b) > maxAddr:
			return nil, fmt.Errorf("tcp: rank %d published an address of %d bytes", r, len(b))
		}
		if _, _, err := net.SplitHostPort(string(b)); err != nil {
			return nil, fmt.Errorf("tcp: rank %d published %q: %w", r, b, err)
		}
		addrs[r] = string(b)
	}
	return addrs, nil
}

// hello is what a connecting rank says first.
type hello struct {
	rank, idx, conns, size int
	token                  string
}

func (h hello) marshal() []byte {
	b := make([]byte, helloFixed+len(h.token))
	copy(b, magic[:])
	for i, v := range []int{h.rank, h.idx, h.conns, h.size, len(h.token)} {
		binary.LittleEndian.PutUint32(b[8+4*i:], uint32(v))
	}
	copy(b[helloFixed:], h.token)
	return b
}

func readHello(c net.Conn) (hello, error) {
	var fixed [helloFixed]byte
	if _, err := io.ReadFull(c, fixed[:]); err != nil {
		return hello{}, fmt.Errorf("no handshake: %w", err)
	}
	if [8]byte(fixed[:8]) != magic {
		return hello{}, errors.New("not a gotune tcp handshake")
	}
	u := func(i int) int { return int(binary.LittleEndian.Uint32(fixed[8+4*i:])) }
	h := hello{rank: u(0), idx: u(1), conns: u(2), size: u(3)}
	if u(4) > maxToken {
		return h, fmt.Errorf("token of %d bytes", u(4))
	}
	tok := make([]byte, u(4))
	if _, err := io.ReadFull(c, tok); err != nil {
		return h, fmt.Errorf("handshake cut short: %w", err)
	}
	h.token = string(tok)
	return h, nil
}

// dialHandshake connects to addr and presents h; it returns the connection
// once the peer accepted it, or why not: the peer closed the connection
// without a status (a wrong token, say) or answered statusLater.
func dialHandshake(ctx context.Context, d *net.Dialer, addr string, h hello) (_ *net.TCPConn, err error) {
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := nc.(*net.TCPConn)
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	c.SetDeadline(deadline)
	if _, err := c.Write(h.marshal()); err != nil {
		return nil, fmt.Errorf("handshake: %w", err)
	}
	var st [1]byte
	if _, err := io.ReadFull(c, st[:]); err != nil {
		return nil, fmt.Errorf("handshake refused (connection closed without an answer: wrong job token?): %w", err)
	}
	if st[0] != statusOK {
		return nil, fmt.Errorf("handshake: peer answered %q (its setup is over: a stale address)", st[0])
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// acceptor takes the connections of lower ranks during setup and refuses
// everything else for the transport's life.
type acceptor struct {
	ln    net.Listener
	t     *Transport
	token string
	mu    sync.Mutex
	want  map[[2]int]bool // (rank, idx) still expected
	got   chan accepted
	wg    sync.WaitGroup
}

type accepted struct {
	h hello
	c *net.TCPConn
}

func (a *acceptor) loop() {
	defer a.wg.Done()
	for {
		c, err := a.ln.Accept()
		if err != nil {
			return // closed
		}
		a.wg.Add(1)
		go a.handle(c.(*net.TCPConn))
	}
}

func (a *acceptor) handle(c *net.TCPConn) {
	defer a.wg.Done()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	refuse := func(why string) {
		logf("gotune tcp: rank %d (%s) refused a connection from %s: %s", a.t.rank, a.ln.Addr(), c.RemoteAddr(), why)
		c.Close()
	}
	h, err := readHello(c)
	if err != nil {
		refuse(err.Error())
		return
	}
	if subtle.ConstantTimeCompare([]byte(h.token), []byte(a.token)) != 1 {
		refuse(fmt.Sprintf("wrong job token (claims rank %d)", h.rank))
		return
	}
	p := a.t.params
	if h.size != a.t.size || h.conns != p.Conns || h.rank < 0 || h.rank >= a.t.rank || h.idx < 0 || h.idx >= p.Conns {
		refuse(fmt.Sprintf("rank %d connection %d of %d in a job of %d does not fit rank %d (tcp.conns=%d, %d ranks; lower ranks connect to higher)",
			h.rank, h.idx, h.conns, h.size, a.t.rank, p.Conns, a.t.size))
		return
	}
	a.mu.Lock()
	ok := a.want[[2]int{h.rank, h.idx}]
	delete(a.want, [2]int{h.rank, h.idx})
	a.mu.Unlock()
	if !ok {
		c.Write([]byte{statusLater})
		c.Close()
		return
	}
	if _, err := c.Write([]byte{statusOK}); err != nil {
		c.Close()
		return
	}
	c.SetDeadline(time.Time{})
	a.got <- accepted{h, c}
}

// closeWant stops accepting ranks' connections (setup is over).
func (a *acceptor) closeWant() {
	a.mu.Lock()
	clear(a.want)
	a.mu.Unlock()
}

// sockopts applies the options that must precede listen or connect.
func (p Params) preconnect(_, _ string, rc syscall.RawConn) error {
	var err error
	cerr := rc.Control(func(fd uintptr) {
		if p.RcvBuf > 0 {
			err = sys.SetRecvBuffer(fd, p.RcvBuf)
		}
		if err == nil && p.SndBuf > 0 {
			err = sys.SetSendBuffer(fd, p.SndBuf)
		}
	})
	return errors.Join(cerr, err)
}

// listenAddr is where this rank listens: tcp.addr when given, else the
// rank's address on the job's bootstrap network (ranks on several hosts),
// else loopback (ranks on one host).
func listenAddr(p Params, env transports.Env) string {
	switch {
	case p.Addr != AutoAddr:
		return p.Addr
	case env.Addr != "":
		return net.JoinHostPort(env.Addr, "0")
	}
	return "127.0.0.1:0"
}

// connect builds every connection of this rank: listen, exchange the
// addresses, dial the higher ranks, accept the lower ones.
func (t *Transport) connect(env transports.Env) error {
	where := listenAddr(t.params, env)
	lc := net.ListenConfig{Control: t.params.preconnect}
	ln, err := lc.Listen(context.Background(), "tcp", where)
	if err != nil {
		err = fmt.Errorf("tcp: rank %d listen on %s: %w", t.rank, where, err)
		_, err = exchange(env, "", err)
		return err
	}
	t.ln = ln
	a := &acceptor{ln: ln, t: t, token: env.Token, want: map[[2]int]bool{}, got: make(chan accepted, t.size*t.params.Conns)}
	for r := 0; r < t.rank; r++ {
		for i := range t.params.Conns {
			a.want[[2]int{r, i}] = true
		}
	}
	t.acc = a
	a.wg.Add(1)
	go a.loop()
	t.addrs, err = exchange(env, publishable(ln.Addr().(*net.TCPAddr), env.Addr), nil)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), SetupTimeout)
	defer cancel()
	d := &net.Dialer{Control: t.params.preconnect, Timeout: 10 * time.Second}
	for r := t.rank + 1; r < t.size; r++ {
		addr := t.addrs[r]
		for i := range t.params.Conns {
			h := hello{rank: t.rank, idx: i, conns: t.params.Conns, size: t.size, token: env.Token}
			var last error
			pause := 5 * time.Millisecond
			for {
				c, err := dialHandshake(ctx, d, addr, h)
				if err == nil {
					if err := t.addConn(r, addr, i, c); err != nil {
						return err
					}
					break
				}
				var ne net.Error
				if last == nil || !(errors.As(err, &ne) && ne.Timeout()) { // not the deadline cutting a try short
					last = err
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("tcp: rank %d connecting to rank %d at %s: %w", t.rank, r, addr, last)
				case <-time.After(pause):
				}
				pause = min(2*pause, 500*time.Millisecond)
			}
		}
	}
	for n := t.rank * t.params.Conns; n > 0; n-- {
		select {
		case ac := <-a.got:
			if err := t.addConn(ac.h.rank, t.addrs[ac.h.rank], ac.h.idx, ac.c); err != nil {
				return err
			}
		case <-ctx.Done():
			missing := []int{}
			for r := range t.rank {
				if t.peers[r] == nil || t.peers[r].nconns < t.params.Conns {
					missing = append(missing, r)
				}
			}
			return fmt.Errorf("tcp: rank %d waited %v for the connections of ranks %v", t.rank, SetupTimeout, missing)
		}
	}
	a.closeWant()
	return nil
}

// publishable is the address peers dial: a wildcard listener (0.0.0.0,
// ::) is reached at the rank's bootstrap address when the job has one, else
// over loopback (ranks on one host).
func publishable(a *net.TCPAddr, bootstrap string) string {
	if !a.IP.IsUnspecified() {
		return a.String()
	}
	if bootstrap != "" {
		return net.JoinHostPort(bootstrap, fmt.Sprint(a.Port))
	}
	lo := net.IPv4(127, 0, 0, 1)
	if a.IP.To4() == nil {
		lo = net.IPv6loopback
	}
	return (&net.TCPAddr{IP: lo, Port: a.Port}).String()
}

// addConn configures an established connection and adds it to its peer.
func (t *Transport) addConn(rank int, addr string, idx int, nc *net.TCPConn) error {
	p := t.peers[rank]
	if p == nil {
		p = &peer{addr: addr, conns: make([]*conn, t.params.Conns)}
		p.Rank = rank
		t.peers[rank] = p
		t.AddPeer(&p.Peer)
	}
	c := &conn{t: t, peer: p, idx: idx, stage: make([]byte, stageBytes)}
	fail := func(err error) error {
		return fmt.Errorf("tcp: rank %d connection %d to rank %d (%s): %w", t.rank, idx, rank, addr, err)
	}
	// Detach the socket from the runtime's netpoller: this transport polls
	// it itself, and the registration would wake a runtime thread for every
	// segment and ACK (see sys.DupFD). Closing nc removes it; the duplicate
	// keeps the connection.
	rc, err := nc.SyscallConn()
	if err != nil {
		nc.Close()
		return fail(err)
	}
	var derr error
	if cerr := rc.Control(func(fd uintptr) { c.fd, derr = sys.DupFD(fd) }); cerr != nil {
		derr = cerr
	}
	nc.Close()
	if derr != nil {
		return fail(derr)
	}
	c.snd = sys.NewSender(c.fd)
	c.rcv = sys.NewReceiver(c.fd)
	fail = func(err error) error {
		sys.CloseFD(c.fd)
		return fmt.Errorf("tcp: rank %d connection %d to rank %d (%s): %w", t.rank, idx, rank, addr, err)
	}
	if err := sys.SetNoDelay(c.fd, t.params.NoDelay); err != nil {
		return fail(err)
	}
	if t.params.BusyPoll > 0 {
		if err := sys.SetBusyPoll(c.fd, t.params.BusyPoll); err != nil {
			return fail(err)
		}
	}
	if t.params.ZeroCopy > 0 && t.zcNote == "" {
		if err := enableZeroCopy(c.fd); err != nil {
			if !errors.Is(err, sys.ErrNotSupported) {
				return fail(err)
			}
			t.zcNote = err.Error()
		} else {
			c.zc = true
		}
	}
	p.conns[idx] = c
	p.nconns++
	t.conns = append(t.conns, c)
	t.fds = append(t.fds, sys.PollFD{Fd: int32(c.fd)})
	return nil
}
