package tcp

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/gotune/gotune/internal/queue"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/msgengine"
)

// Frame kinds.
const (
	kEager = 1 // header, then len payload bytes (on connection 0)
	kRTS   = 2 // request to send len bytes (on connection 0)
	kCTS   = 3 // clear to send: the receiver takes len bytes (on connection 0)
	kData  = 4 // len payload bytes of message seq at offset off (any connection)
)

// No shared segment: ranks exchange addresses through
// transports.Env.AllGather. The options are checked before any rank starts.
func init() { transports.Register(msgengine.Driver("tcp", Options, ParseParams, New, Check)) }

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
// Isend, Irecv and Wait are not safe for concurrent use. The embedded
// engine numbers, matches and completes the requests; the transport moves
// their frames.
type Transport struct {
	engine
	rank, size int
	params     Params
	peers      []*peer
	ln         net.Listener
	acc        *acceptor
	addrs      []string // every rank's listening address, by rank
	fds        []sys.PollFD
	conns      []*conn // every connection, in fds order
	freeFrames queue.FreeList[frame]
	freeArr    queue.FreeList[arrival]
	zcNote     string // why MSG_ZEROCOPY is off although asked for
}

type (
	request = msgengine.Request
	engine  = msgengine.Engine[request, *request, *arrival]
)

type peer struct {
	msgengine.Peer[*request, *arrival]
	addr    string
	conns   []*conn
	nconns  int
	ctsWait queue.FIFO[*request] // rendezvous sends waiting for clear-to-send
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
	t.Init("tcp", env.Rank, env.Size, p.Eager, msgengine.Hooks[*request, *arrival]{
		Start: t.start, Match: t.match, Progress: t.progress, Sleep: func() { t.block(100) }})
	if err := t.connect(env); err != nil {
		t.Close()
		return nil, err
	}
	if t.zcNote != "" {
		logf("gotune tcp: rank %d: tcp.zerocopy=%d asked for, but %s: sending by copy", t.rank, p.ZeroCopy, t.zcNote)
	}
	return t, nil
}

// ZeroCopy reports whether MSG_ZEROCOPY is in use, or why not.
func (t *Transport) ZeroCopy() (bool, string) {
	if t.params.ZeroCopy == 0 {
		return false, "tcp.zerocopy=0"
	}
	return t.zcNote == "", t.zcNote
}

// Addr is the address this rank listens on.
func (t *Transport) Addr() string { return t.ln.Addr().String() }

// Close shuts every connection down in order (each side sends its end of
// stream and reads the peer's, so no data in flight is reset) and stops
// listening.
func (t *Transport) Close() error {
	if t.Shut() {
		return nil
	}
	if t.ln != nil {
		t.ln.Close()
	}
	for _, c := range t.conns {
		sys.ShutdownWrite(c.fd)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, c := range t.conns {
		for !c.eof && c.peer.Err == nil {
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
	return msgengine.Check("tcp", tr, env, ring)
}

// ring is Check on a tcp transport.
func ring(t *Transport, env transports.Env) error {
	buf, err := sys.MapAnon(8, true)
	if err != nil {
		return err
	}
	defer sys.Unmap(buf)
	copy(buf, "gotune\x00\x02")
	prev, err := t.Ring(env, buf[:4], buf[4:])
	if err != nil {
		return err
	}
	if string(buf[4:]) != "gotu" {
		return fmt.Errorf("tcp check: got %q from rank %d", buf[4:], prev)
	}
	return nil
}
