package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/gotune/gotune/internal/queue"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

func init() {
	transports.Register(&transports.Driver{
		Name:    "tcp",
		Options: []*transports.OptionSet{Options},
		// No shared segment: ranks exchange addresses through
		// transports.Env.AllGather. The options are checked here, before
		// any rank starts.
		SharedBytes: func(size int, o transports.Options) (int, error) {
			_, err := ParseParams(o)
			return 0, err
		},
		New:   New,
		Check: Check,
	})
}

// Frame kinds.
const (
	kEager = 1 // header, then len payload bytes (on connection 0)
	kRTS   = 2 // request to send len bytes (on connection 0)
	kCTS   = 3 // clear to send: the receiver takes len bytes (on connection 0)
	kData  = 4 // len payload bytes of message seq at offset off (any connection)
)

// hdrLen is the frame header: kind u8, 3 bytes zero, seq u32, len u64, off u64.
const hdrLen = 24

// stageBytes is each connection's receive staging area: small frames
// arrive several to a read; large payloads are read straight into the
// receive buffer.
const stageBytes = 64 << 10

// minStripe is the smallest part of a rendezvous payload given its own
// connection.
const minStripe = 64 << 10

// Transport is one rank's tcp endpoint. It is driven by one goroutine:
// Isend, Irecv and Wait are not safe for concurrent use.
type Transport struct {
	rank, size int
	params     Params
	peers      []*peer
	ln         net.Listener
	acc        *acceptor
	addrs      []string // every rank's listening address, by rank
	fds        []sys.PollFD
	conns      []*conn // every connection, in fds order
	free       queue.FreeList[request]
	freeFrames queue.FreeList[frame]
	eagerBufs  [][]byte
	freeArr    queue.FreeList[arrival]
	zcNote     string // why MSG_ZEROCOPY is off although asked for
	closed     bool
}

type peer struct {
	rank             int
	addr             string
	conns            []*conn
	nconns           int
	sendSeq, recvSeq uint32
	posted           queue.FIFO[*request] // receives not yet matched with an arrival
	unexpected       queue.FIFO[*arrival] // arrivals not yet matched with a receive
	ctsWait          queue.FIFO[*request] // rendezvous sends waiting for clear-to-send
	rndvRecv         []*request           // rendezvous receives waiting for their payload
	err              error                // the pair has failed
}

// arrival is a message that came before its receive was posted.
type arrival struct {
	kind     byte
	seq      uint32
	len      int
	data     []byte   // eager payload (an eager buffer)
	complete bool     // the payload is all here
	req      *request // the receive matched while the payload was still coming
}

type request struct {
	t       *Transport
	peer    *peer
	buf     []byte
	send    bool
	rndv    bool
	seq     uint32
	n       int // bytes moved (receive: taken)
	msgLen  int // the message's length (receive)
	pending int // send: frames not yet written; receive: payload bytes still due
	done    bool
	err     error
}

func (r *request) Done() bool { return r.done }
func (r *request) Len() int   { return r.n }
func (r *request) Err() error { return r.err }

type frame struct {
	hdr     [hdrLen]byte
	payload []byte
	off     int // bytes of header and payload written
	req     *request
	zc      bool   // payload written with MSG_ZEROCOPY
	zcLast  uint32 // the id of the last zerocopy send carrying it
}

type conn struct {
	t    *Transport
	peer *peer
	idx  int
	fd   uintptr // the socket, detached from the runtime's netpoller
	snd  *sys.Sender
	rcv  *sys.Receiver
	// rdWait: the last read found the socket empty or drained it;
	// progress asks poll(2) before reading again (a read that finds
	// nothing still takes the socket's lock, which the packets arriving
	// for it then wait for; poll takes none).
	rdWait bool
	out    queue.FIFO[*frame] // to write, in order
	zc     bool               // SO_ZEROCOPY is on
	zcID   uint32             // zerocopy sends made
	zcOK   uint32             // zerocopy sends completed (all ids below it)
	zcQ    queue.FIFO[*frame] // written with MSG_ZEROCOPY, pages not yet released
	// receive side
	stage []byte
	r, w  int
	inHdr bool // a header has been parsed; its payload is being read
	kind  byte
	seq   uint32
	plen  int    // payload bytes of the current frame still to read
	dst   []byte // where they go; bytes beyond it are dropped (truncation)
	dpos  int    // bytes placed in dst
	areq  *request
	arr   *arrival
	eof   bool
}

// enableZeroCopy is sys.EnableZeroCopy; tests refuse it to see the fallback.
var enableZeroCopy = sys.EnableZeroCopy

// New starts the tcp transport in a rank: listen, exchange the addresses
// through the job's allgather, connect to every peer (lower ranks connect to higher
// ones; every connection opens with a handshake carrying the job token).
func New(env transports.Env) (transports.Transport, error) {
	p, err := ParseParams(env.Options)
	if err != nil {
		return nil, err
	}
	if env.Token == "" {
		return nil, errors.New("tcp: the job offers no token (transports.Env.Token): refusing to accept unauthenticated connections")
	}
	if env.AllGather == nil {
		return nil, errors.New("tcp: the job offers no allgather (transports.Env.AllGather) to exchange the ranks' addresses")
	}
	t := &Transport{rank: env.Rank, size: env.Size, params: p, peers: make([]*peer, env.Size)}
	if err := t.connect(env); err != nil {
		t.Close()
		return nil, err
	}
	if t.zcNote != "" {
		logf("gotune tcp: rank %d: tcp.zerocopy=%d asked for, but %s: sending by copy", t.rank, p.ZeroCopy, t.zcNote)
	}
	return t, nil
}

func (t *Transport) Name() string { return "tcp" }

// ZeroCopy reports whether MSG_ZEROCOPY is in use, or why not.
func (t *Transport) ZeroCopy() (bool, string) {
	if t.params.ZeroCopy == 0 {
		return false, "tcp.zerocopy=0"
	}
	return t.zcNote == "", t.zcNote
}

// Addr is the address this rank listens on.
func (t *Transport) Addr() string { return t.ln.Addr().String() }

// addConn configures an established connection and adds it to its peer.
func (t *Transport) addConn(rank int, addr string, idx int, nc *net.TCPConn) error {
	p := t.peers[rank]
	if p == nil {
		p = &peer{rank: rank, addr: addr, conns: make([]*conn, t.params.Conns)}
		t.peers[rank] = p
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

// peerOf checks a peer rank.
func (t *Transport) peerOf(rank int) (*peer, error) {
	if rank < 0 || rank >= t.size || rank == t.rank {
		return nil, fmt.Errorf("tcp: rank %d has no peer %d (job of %d)", t.rank, rank, t.size)
	}
	if t.closed {
		return nil, errors.New("tcp: transport closed")
	}
	return t.peers[rank], nil
}

func (t *Transport) newRequest(p *peer, buf []byte, send bool) *request {
	r := t.free.Get()
	r.t, r.peer, r.buf, r.send = t, p, buf, send
	return r
}

func (t *Transport) newFrame(kind byte, seq uint32, n, off int, payload []byte, req *request) *frame {
	f := t.freeFrames.Get()
	f.hdr[0] = kind
	binary.LittleEndian.PutUint32(f.hdr[4:], seq)
	binary.LittleEndian.PutUint64(f.hdr[8:], uint64(n))
	binary.LittleEndian.PutUint64(f.hdr[16:], uint64(off))
	f.payload, f.req = payload, req
	return f
}

func (t *Transport) newArrival(kind byte, seq uint32, n int) *arrival {
	a := t.freeArr.Get()
	*a = arrival{kind: kind, seq: seq, len: n}
	return a
}

func (t *Transport) eagerBuf() []byte {
	if k := len(t.eagerBufs); k > 0 {
		b := t.eagerBufs[k-1]
		t.eagerBufs = t.eagerBufs[:k-1]
		return b
	}
	return make([]byte, t.params.Eager)
}

// Isend starts sending buf to peer.
func (t *Transport) Isend(peer int, buf []byte) (transports.Request, error) {
	p, err := t.peerOf(peer)
	if err != nil {
		return nil, err
	}
	r := t.newRequest(p, buf, true)
	r.seq = p.sendSeq
	p.sendSeq++
	if p.err != nil {
		t.finish(r, p.err)
		return r, nil
	}
	c := p.conns[0]
	if len(buf) <= t.params.Eager {
		r.pending = 1
		c.out.Push(t.newFrame(kEager, r.seq, len(buf), 0, buf, r))
	} else {
		r.rndv = true
		c.out.Push(t.newFrame(kRTS, r.seq, len(buf), 0, nil, nil))
		p.ctsWait.Push(r)
	}
	if err := c.flush(); err != nil {
		p.fail(err)
	}
	return r, nil
}

// Irecv posts a receive of the next message from peer into buf.
func (t *Transport) Irecv(peer int, buf []byte) (transports.Request, error) {
	p, err := t.peerOf(peer)
	if err != nil {
		return nil, err
	}
	r := t.newRequest(p, buf, false)
	r.seq = p.recvSeq
	p.recvSeq++
	if p.unexpected.Len() > 0 {
		a := p.unexpected.Pop()
		switch a.kind {
		case kEager:
			r.msgLen = a.len
			if a.complete {
				t.deliverArrival(r, a)
			} else {
				a.req = r
			}
		case kRTS:
			t.clearToSend(r, a.len)
			t.freeArr.Put(a)
		}
		return r, nil
	}
	if p.err != nil {
		t.finish(r, p.err)
		return r, nil
	}
	p.posted.Push(r)
	return r, nil
}

// deliverArrival copies a buffered eager message into its receive.
func (t *Transport) deliverArrival(r *request, a *arrival) {
	n := copy(r.buf, a.data[:a.len])
	r.n = n
	var err error
	if a.len > len(r.buf) {
		err = fmt.Errorf("tcp: message of %d bytes from rank %d into %d: %w", a.len, r.peer.rank, len(r.buf), transports.ErrTruncated)
	}
	t.eagerBufs = append(t.eagerBufs, a.data)
	*a = arrival{}
	t.freeArr.Put(a)
	t.finish(r, err)
}

// clearToSend answers a request to send: the receive takes min(n, len(buf)).
func (t *Transport) clearToSend(r *request, n int) {
	p := r.peer
	r.rndv, r.msgLen = true, n
	r.n = min(n, len(r.buf))
	r.pending = r.n
	if p.err != nil {
		t.finish(r, p.err)
		return
	}
	c := p.conns[0]
	c.out.Push(t.newFrame(kCTS, r.seq, r.n, 0, nil, nil))
	if r.pending == 0 {
		t.finishRecv(r)
	} else {
		p.rndvRecv = append(p.rndvRecv, r)
	}
	if err := c.flush(); err != nil {
		p.fail(err)
	}
}

func (t *Transport) finishRecv(r *request) {
	var err error
	if r.msgLen > len(r.buf) {
		err = fmt.Errorf("tcp: message of %d bytes from rank %d into %d: %w", r.msgLen, r.peer.rank, len(r.buf), transports.ErrTruncated)
	}
	t.finish(r, err)
}

func (t *Transport) finish(r *request, err error) {
	if r.done {
		return
	}
	r.done, r.err = true, err
	if err != nil && r.send {
		r.n = 0
	} else if r.send {
		r.n = len(r.buf)
	}
}

// Send is Isend and Wait.
func (t *Transport) Send(peer int, buf []byte) error {
	r, err := t.Isend(peer, buf)
	if err != nil {
		return err
	}
	return t.Wait(r)
}

// Recv is Irecv and Wait; it returns the message's length.
func (t *Transport) Recv(peer int, buf []byte) (int, error) {
	r, err := t.Irecv(peer, buf)
	if err != nil {
		return 0, err
	}
	q := r.(*request)
	err = t.Wait(r)
	return q.n, err
}

// spin is how long Wait polls the sockets without blocking before it
// sleeps in poll(2).
const spin = 50 * time.Microsecond

// Wait drives every connection until the requests are done, then recycles
// them (a request must not be used after Wait returns).
func (t *Transport) Wait(reqs ...transports.Request) error {
	var idleSince time.Time
	for {
		all := true
		for _, q := range reqs {
			if !q.(*request).done {
				all = false
				break
			}
		}
		if all {
			break
		}
		if t.progress() {
			idleSince = time.Time{}
			continue
		}
		if idleSince.IsZero() {
			idleSince = time.Now()
			continue
		}
		if time.Since(idleSince) < spin {
			continue
		}
		t.block(100)
	}
	var first error
	for _, q := range reqs {
		r := q.(*request)
		if r.err != nil && first == nil {
			first = r.err
		}
		t.free.Put(r)
	}
	return first
}

// block sleeps in poll(2) until a connection can move (or timeoutMs).
func (t *Transport) block(timeoutMs int) {
	t.pollEvents(true)
	if n, _ := sys.Poll(t.fds, timeoutMs); n > 0 {
		t.pollResults()
	}
}

// pollEvents sets what to poll each connection for: everything it waits
// for when every is true (before sleeping), else only whether a drained
// socket has more to read.
func (t *Transport) pollEvents(every bool) {
	for i, c := range t.conns {
		ev := int16(0)
		if c.peer.err == nil {
			if !c.eof && (every || c.rdWait) {
				ev = sys.PollIn
			}
			if c.out.Len() > 0 && every {
				ev |= sys.PollOut
			}
		}
		t.fds[i].Events = ev
		t.fds[i].Revents = 0
	}
}

// pollResults lets the connections that poll found readable read again.
func (t *Transport) pollResults() {
	for i, c := range t.conns {
		re := t.fds[i].Revents
		if re&(sys.PollIn|sys.PollErr|sys.PollHup) != 0 {
			c.rdWait = false
		}
	}
}

// progress moves whatever can move on every connection without blocking;
// it reports whether anything did. Connections whose socket was empty are
// asked with one poll(2) over all of them, which takes no socket lock,
// rather than read again. Queued frames are simply written again: a write
// waits for no poll, so the pipe refills as soon as the peer takes data.
func (t *Transport) progress() bool {
	moved := t.step()
	if moved {
		return true
	}
	t.pollEvents(false)
	if n, _ := sys.PollNow(t.fds); n == 0 {
		return false
	}
	t.pollResults()
	return t.step()
}

// step tries every connection once.
func (t *Transport) step() bool {
	moved := false
	for _, c := range t.conns {
		p := c.peer
		if p.err != nil {
			continue
		}
		m, err := c.progress()
		moved = moved || m
		if err != nil {
			p.fail(err)
			moved = true
		}
	}
	return moved
}

func (c *conn) progress() (bool, error) {
	moved := false
	if c.out.Len() > 0 {
		before := c.out.Len()
		if err := c.flush(); err != nil {
			return true, err
		}
		moved = c.out.Len() != before
	}
	if c.zcQ.Len() > 0 {
		m, err := c.reap()
		if err != nil {
			return true, err
		}
		moved = moved || m
	}
	if !c.eof && !c.rdWait {
		m, err := c.read()
		if err != nil {
			return true, err
		}
		moved = moved || m
	}
	return moved, nil
}

// flush writes queued frames until the socket is full.
func (c *conn) flush() error {
	t := c.t
	for c.out.Len() > 0 {
		f := c.out.Front()
		var a, b []byte
		if f.off < hdrLen {
			a, b = f.hdr[f.off:], f.payload
		} else {
			a = f.payload[f.off-hdrLen:]
		}
		zc := c.zc && f.hdr[0] == kData && len(f.payload) >= t.params.ZeroCopy
		n, err := c.snd.Send(a, b, zc)
		if err == sys.ErrWouldBlock {
			return nil
		}
		if err != nil {
			return c.wrap(err)
		}
		if zc {
			f.zc, f.zcLast = true, c.zcID
			c.zcID++
		}
		f.off += n
		if f.off < hdrLen+len(f.payload) {
			return nil // a short write: the socket is full
		}
		c.out.Pop()
		if f.zc {
			c.zcQ.Push(f)
			continue
		}
		t.frameWritten(f)
	}
	return nil
}

func (t *Transport) frameWritten(f *frame) {
	if r := f.req; r != nil {
		r.pending--
		if r.pending == 0 {
			t.finish(r, nil)
		}
	}
	t.freeFrames.Put(f)
}

// reap collects MSG_ZEROCOPY completions and finishes the frames whose
// pages the kernel has released.
func (c *conn) reap() (bool, error) {
	moved := false
	for {
		_, hi, _, ok, err := c.snd.Completions()
		if err != nil {
			return true, c.wrap(err)
		}
		if !ok {
			break
		}
		if int32(hi+1-c.zcOK) > 0 {
			c.zcOK = hi + 1
		}
	}
	for c.zcQ.Len() > 0 && int32(c.zcQ.Front().zcLast-c.zcOK) < 0 {
		c.t.frameWritten(c.zcQ.Pop())
		moved = true
	}
	return moved, nil
}

// read takes in what the socket holds and dispatches it. A read that
// returns less than it asked for has drained the socket: the next one waits
// for poll(2) to see more (rdWait) rather than find it empty.
func (c *conn) read() (bool, error) {
	moved := false
	for {
		var a, b []byte
		switch {
		case c.r < c.w:
			// Staged bytes first: a header, or payload that came with one.
			err := c.consume()
			if err == nil {
				moved = true
				continue
			}
			if err != errPartial {
				return true, err
			}
			// A partial header: move it to the front and read the rest.
			k := copy(c.stage, c.stage[c.r:c.w])
			c.r, c.w = 0, k
			a = c.stage[k:]
		case c.inHdr && c.dpos < len(c.dst):
			// The rest of a payload straight into its destination;
			// what follows it lands in the stage.
			c.r, c.w = 0, 0
			a, b = c.dst[c.dpos:], c.stage
		default:
			c.r, c.w = 0, 0
			a = c.stage
		}
		n, err := c.rcv.Recv(a, b)
		if err == sys.ErrWouldBlock {
			c.rdWait = true
			return moved, nil
		}
		if err != nil {
			return true, c.wrap(err)
		}
		if n == 0 {
			return true, c.closed()
		}
		moved = true
		if b != nil {
			k := min(n, len(a))
			c.plen -= k
			c.dpos += k
			c.w = n - k
			c.payloadDone(k)
		} else {
			c.w += n
		}
		if n < len(a)+len(b) {
			c.rdWait = true // drained: consume what came, then ask poll
			for c.r < c.w {
				if err := c.consume(); err == errPartial {
					break
				} else if err != nil {
					return true, err
				}
			}
			return moved, nil
		}
	}
}

// consume handles staged bytes: a header, or part of a payload. It returns
// errPartial when less than a header is staged.
func (c *conn) consume() error {
	if c.inHdr {
		n := min(c.w-c.r, c.plen)
		placed := copy(c.dst[c.dpos:], c.stage[c.r:c.r+n]) // the rest is dropped
		c.r += n
		c.plen -= n
		c.dpos += placed
		c.payloadDone(placed)
		return nil
	}
	if c.w-c.r < hdrLen {
		return errPartial
	}
	h := c.stage[c.r : c.r+hdrLen]
	c.r += hdrLen
	kind, seq := h[0], binary.LittleEndian.Uint32(h[4:])
	n, off := int(binary.LittleEndian.Uint64(h[8:])), int(binary.LittleEndian.Uint64(h[16:]))
	return c.dispatch(kind, seq, n, off)
}

// errPartial: less than a header is staged.
var errPartial = errors.New("partial header")

// dispatch starts handling one frame.
func (c *conn) dispatch(kind byte, seq uint32, n, off int) error {
	t, p := c.t, c.peer
	switch kind {
	case kEager:
		c.startPayload(kind, seq, n)
		if p.posted.Len() > 0 {
			r := p.posted.Pop()
			r.msgLen = n
			c.areq = r
			c.dst = r.buf[:min(n, len(r.buf))]
		} else {
			if n > t.params.Eager {
				return c.wrap(fmt.Errorf("eager message of %d bytes over tcp.eager=%d: do both ranks use the same tcp.eager?", n, t.params.Eager))
			}
			a := t.newArrival(kEager, seq, n)
			a.data = t.eagerBuf()
			p.unexpected.Push(a)
			c.arr = a
			c.dst = a.data[:n]
		}
		if n == 0 {
			c.payloadDone(0)
		}
	case kRTS:
		if p.posted.Len() > 0 {
			t.clearToSend(p.posted.Pop(), n)
		} else {
			a := t.newArrival(kRTS, seq, n)
			a.complete = true
			p.unexpected.Push(a)
		}
	case kCTS:
		if p.ctsWait.Len() == 0 || p.ctsWait.Front().seq != seq {
			return c.wrap(fmt.Errorf("clear-to-send for message %d that is not waiting", seq))
		}
		t.stripe(p.ctsWait.Pop(), n)
	case kData:
		var r *request
		for _, q := range p.rndvRecv {
			if q.seq == seq {
				r = q
				break
			}
		}
		if r == nil || off+n > r.n {
			return c.wrap(fmt.Errorf("payload for message %d (%d bytes at %d) that is not expected", seq, n, off))
		}
		c.startPayload(kind, seq, n)
		c.areq = r
		c.dst = r.buf[off : off+n]
		if n == 0 {
			c.payloadDone(0)
		}
	default:
		return c.wrap(fmt.Errorf("frame of unknown kind %d", kind))
	}
	return nil
}

func (c *conn) startPayload(kind byte, seq uint32, n int) {
	c.inHdr, c.kind, c.seq, c.plen = true, kind, seq, n
	c.dst, c.dpos, c.areq, c.arr = nil, 0, nil, nil
}

// payloadDone accounts n payload bytes just placed; at the frame's end it
// completes what the frame completes.
func (c *conn) payloadDone(n int) {
	t, p := c.t, c.peer
	if c.kind == kData && c.areq != nil {
		c.areq.pending -= n
		if c.areq.pending == 0 {
			r := c.areq
			for i, q := range p.rndvRecv {
				if q == r {
					p.rndvRecv = append(p.rndvRecv[:i], p.rndvRecv[i+1:]...)
					break
				}
			}
			t.finishRecv(r)
			c.areq = nil
		}
	}
	if c.plen > 0 {
		return
	}
	// Frame over. An eager payload longer than the receive buffer left
	// plen counting the dropped tail: see startPayload's callers.
	if c.kind == kEager {
		if c.areq != nil {
			r := c.areq
			r.n = len(c.dst)
			t.finishRecv(r)
		} else if a := c.arr; a != nil {
			a.complete = true
			if a.req != nil {
				t.deliverArrival(a.req, a)
			}
		}
	}
	c.inHdr, c.dst, c.areq, c.arr = false, nil, nil, nil
}

// stripe queues a rendezvous payload of n bytes over the connections.
func (t *Transport) stripe(r *request, n int) {
	p := r.peer
	if n == 0 {
		t.finish(r, nil)
		return
	}
	parts := min(t.params.Conns, (n+minStripe-1)/minStripe)
	size := (n + parts - 1) / parts
	r.pending = 0
	for off := 0; off < n; off += size {
		l := min(size, n-off)
		c := p.conns[(off/size)%len(p.conns)]
		c.out.Push(t.newFrame(kData, r.seq, l, off, r.buf[off:off+l], r))
		r.pending++
	}
	for _, c := range p.conns {
		if c.out.Len() > 0 {
			if err := c.flush(); err != nil {
				p.fail(err)
				return
			}
		}
	}
}

func (c *conn) wrap(err error) error {
	if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
		err = fmt.Errorf("%w: the peer is gone (has it exited?)", err)
	}
	return fmt.Errorf("tcp: rank %d connection %d with rank %d (%s): %w", c.t.rank, c.idx, c.peer.rank, c.peer.addr, err)
}

var errPeerClosed = errors.New("the peer closed the connection (has it exited?)")

func (c *conn) closed() error {
	c.eof = true
	err := c.wrap(errPeerClosed)
	if c.inHdr {
		return err // cut off in the middle of a frame
	}
	// The peer ends all its connections at once (Close, or exit); until
	// the last has ended, what is under way may still come on the others
	// (the stripes of a rendezvous payload).
	for _, o := range c.peer.conns {
		if !o.eof {
			return nil
		}
	}
	if c.peer.busy() {
		return err
	}
	// A quiet end (the peer closed after its last message): later
	// operations with it fail.
	c.peer.err = err
	return nil
}

// busy reports whether anything is under way with the peer.
func (p *peer) busy() bool {
	if p.posted.Len() > 0 || p.ctsWait.Len() > 0 || len(p.rndvRecv) > 0 {
		return true
	}
	for _, c := range p.conns {
		if c.out.Len() > 0 || c.zcQ.Len() > 0 {
			return true
		}
	}
	return false
}

// fail ends every operation with the peer with err.
func (p *peer) fail(err error) {
	if p.err != nil {
		return
	}
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: %w", err, errPeerClosed)
	}
	p.err = err
	var t *Transport
	for _, c := range p.conns {
		t = c.t
		for _, q := range []*queue.FIFO[*frame]{&c.out, &c.zcQ} {
			for _, f := range q.All() {
				if f.req != nil {
					t.finish(f.req, opErr(f.req, err))
				}
			}
			q.Reset()
		}
		if c.areq != nil {
			t.finish(c.areq, opErr(c.areq, err))
		}
		if c.arr != nil && c.arr.req != nil {
			t.finish(c.arr.req, opErr(c.arr.req, err))
		}
	}
	for _, q := range [][]*request{p.posted.All(), p.ctsWait.All(), p.rndvRecv} {
		for _, r := range q {
			t.finish(r, opErr(r, err))
		}
	}
	p.posted.Reset()
	p.ctsWait.Reset()
	p.rndvRecv = nil
}

// opErr names the operation that err ended.
func opErr(r *request, err error) error {
	op := "eager"
	if r.rndv || (!r.send && r.msgLen > r.t.params.Eager) || len(r.buf) > r.t.params.Eager {
		op = "rendezvous"
	}
	if r.send {
		return fmt.Errorf("%s send of %d bytes to rank %d: %w", op, len(r.buf), r.peer.rank, err)
	}
	return fmt.Errorf("%s receive into %d bytes from rank %d: %w", op, len(r.buf), r.peer.rank, err)
}

// Close shuts every connection down in order (each side sends its end of
// stream and reads the peer's, so no data in flight is reset) and stops
// listening.
func (t *Transport) Close() error {
	if t.closed {
		return nil
	}
	t.closed = true
	if t.ln != nil {
		t.ln.Close()
	}
	for _, c := range t.conns {
		sys.ShutdownWrite(c.fd)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, c := range t.conns {
		for !c.eof && c.peer.err == nil {
			n, err := sys.Recv(c.fd, c.stage)
			if err == sys.ErrWouldBlock {
				left := time.Until(deadline)
				if left <= 0 {
					break
				}
				sys.Poll([]sys.PollFD{{Fd: int32(c.fd), Events: sys.PollIn}}, int(left/time.Millisecond)+1)
				continue
			}
			if err != nil || n == 0 {
				break
			}
		}
	}
	for _, c := range t.conns {
		sys.CloseFD(c.fd)
	}
	if t.acc != nil {
		t.acc.wg.Wait()
	}
	return nil
}

// Check proves that every rank reaches every other: a ring exchange.
func Check(tr transports.Transport, env transports.Env) error {
	if env.Size < 2 {
		return nil
	}
	t, ok := tr.(*Transport)
	if !ok {
		return fmt.Errorf("tcp check: not a tcp transport")
	}
	next, prev := (env.Rank+1)%env.Size, (env.Rank+env.Size-1)%env.Size
	buf, err := sys.MapAnon(8, true)
	if err != nil {
		return err
	}
	defer sys.Unmap(buf)
	copy(buf, "gotune\x00\x02")
	s, err := t.Isend(next, buf[:4])
	if err != nil {
		return err
	}
	r, err := t.Irecv(prev, buf[4:])
	if err != nil {
		return err
	}
	if err := t.Wait(s, r); err != nil {
		return fmt.Errorf("tcp check: %w", err)
	}
	if string(buf[4:]) != "gotu" {
		return fmt.Errorf("tcp check: got %q from rank %d", buf[4:], prev)
	}
	return nil
}
