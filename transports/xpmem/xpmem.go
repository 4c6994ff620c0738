package xpmem

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// Params configure the transport.
type Params struct {
	Pull      bool   // receiver reads (true) or sender writes (false)
	Threshold int    // smallest message sent by single copy
	Cache     int    // attachments kept; 0: attach and detach per copy
	Align     int    // attachments cover the range rounded out to this (a power of two, at least a page)
	Device    string // the device node, or "fake"
	// LockedHook is hazard H1's unsafe form: the release hook takes the
	// cache lock, and the cache grows its table with the allocator while
	// holding it. Never set it for real traffic.
	LockedHook bool
}

// Option keys.
const (
	KeyMode      = "xpmem.mode"
	KeyThreshold = "xpmem.threshold"
	KeyCache     = "xpmem.cache"
	KeyAlign     = "xpmem.align"
	KeyDevice    = "xpmem.device"
	KeyHook      = "xpmem.hook"
)

// Fake is the xpmem.device value that selects the test stand-in.
const Fake = "fake"

// Built-in values.
const (
	DefaultCache = 128
	DefaultAlign = 64 << 10
)

// Options documents the options ParseParams reads (besides sm.*).
var Options = &transports.OptionSet{Name: "xpmem", Options: []transports.Option{
	{Key: KeyMode, Type: "pull|push", Default: "pull", Help: "pull (the receiver copies from its attachment of the sender's buffer) or push (the sender copies into its attachment of the receiver's)"},
	{Key: KeyThreshold, Type: "size", Help: "smallest message sent by single copy (default: sm.eager+1); smaller ones go by copy-in/copy-out"},
	{Key: KeyCache, Type: "int", Default: fmt.Sprint(DefaultCache), Help: "attachments kept per rank, least recently used dropped first; 0: attach and detach for every message"},
	{Key: KeyAlign, Type: "size", Default: transports.FormatSize(DefaultAlign), Help: "attachments cover the peer's range rounded out to this (a power of two, at least a page), so neighbouring buffers share one"},
	{Key: KeyDevice, Type: "path", Default: sys.XPMEMDevice, Help: "the XPMEM device node; fake: a stand-in for tests that copies with process_vm_readv/writev (no module needed)"},
	{Key: KeyHook, Type: "queue|lock", Default: "queue", Help: "queue (the allocator's release hook posts on the rank's notice board, never taking the attachment cache's lock) or lock (UNSAFE: the hook takes the cache lock and the cache grows its table under it, hazard H1, for probes only)"},
}}

// ParseParams reads xpmem.* options; eagerLimit is the sm eager limit in force.
func ParseParams(o transports.Options, eagerLimit int) (Params, error) {
	mode, err := o.String(KeyMode, "pull", "pull", "push")
	if err != nil {
		return Params{}, err
	}
	p := Params{Pull: mode == "pull", Device: sys.XPMEMDevice}
	if p.Threshold, err = o.Int(KeyThreshold, eagerLimit+1); err != nil {
		return p, err
	}
	if p.Threshold <= eagerLimit {
		return p, fmt.Errorf("%s=%d: must exceed the eager limit %d", KeyThreshold, p.Threshold, eagerLimit)
	}
	if p.Cache, err = o.Int(KeyCache, DefaultCache); err != nil {
		return p, err
	}
	if p.Cache < 0 {
		return p, fmt.Errorf("%s=%d: must not be negative", KeyCache, p.Cache)
	}
	if p.Align, err = o.Int(KeyAlign, DefaultAlign); err != nil {
		return p, err
	}
	if p.Align < sys.PageSize || p.Align&(p.Align-1) != 0 {
		return p, fmt.Errorf("%s=%d: must be a power of two of at least the page size %d", KeyAlign, p.Align, sys.PageSize)
	}
	if v, ok := o[KeyDevice]; ok {
		if v == "" {
			return p, fmt.Errorf("%s: empty (a device node, or %s)", KeyDevice, Fake)
		}
		p.Device = v
	}
	hook, err := o.String(KeyHook, "queue", "queue", "lock")
	if err != nil {
		return p, err
	}
	p.LockedHook = hook == "lock"
	return p, nil
}

// Options renders p as the options ParseParams reads back into p (given
// the eager limit p.Threshold was read with). Every key is written, so the
// result means the same to a build whose defaults differ.
func (p Params) Options() transports.Options {
	return transports.Options{KeyMode: transports.Choice(p.Pull, "pull", "push"), KeyThreshold: strconv.Itoa(p.Threshold),
		KeyCache: strconv.Itoa(p.Cache), KeyAlign: strconv.Itoa(p.Align), KeyDevice: p.Device, KeyHook: transports.Choice(p.LockedHook, "lock", "queue")}
}

func init() {
	transports.Register(&transports.Driver{
		Name:        "xpmem",
		NodeLocal:   true,
		Options:     []*transports.OptionSet{sm.Options, Options},
		SharedBytes: sm.SharedBytes,
		New:         func(env transports.Env) (transports.Transport, error) { return New(env) },
		Check:       Check,
		// The sweep weighs xpmem only where the device is there.
		Present: func(o transports.Options) error {
			_, err := Probe(o)
			return err
		},
	})
}

// Transport is the sm engine with XPMEM rendezvous. It implements
// transports.Invalidator: hook Invalidate to the allocator of the buffers
// it sends from and receives into.
type Transport struct {
	*sm.Endpoint
	x *state
}

// state is a rank's XPMEM setup: its device, segment and board, its
// permits and board attachments of every peer, and the cache.
type state struct {
	p       Params
	dev     device
	version uint32
	segid   int64
	board   *board
	cache   *cache
	rank    int
	peers   map[int]*peerState // by pid
	byRank  []*peerState
}

type peerState struct {
	rank  int
	pid   int
	apid  int64
	board peerBoard
	posts sync.Mutex // serialises reads of this peer's board
}

// Open returns the device p names: the module's, version-checked, or the fake.
func Open(p Params) (device, uint32, error) {
	if p.Device == Fake {
		d := newFake()
		v, _ := d.Version()
		return d, v, nil
	}
	d, err := openReal(p.Device)
	if err != nil {
		return nil, 0, err
	}
	v, err := d.Version()
	if err != nil {
		d.Close()
		return nil, 0, err
	}
	return d, v, nil
}

// Probe opens the device named by o (or /dev/xpmem) and reports its
// version: what doctor and selftest say. Absence matches ErrNotSupported.
func Probe(o transports.Options) (uint32, error) {
	p, err := ParseParams(o, 0)
	if err != nil {
		return 0, err
	}
	d, v, err := Open(p)
	if err != nil {
		return 0, err
	}
	return v, d.Close()
}

// params reads the sm engine's options and xpmem's own from o.
func params(o transports.Options) (sm.Params, Params, error) {
	sp, err := sm.ParseParams(o)
	if err != nil {
		return sp, Params{}, err
	}
	p, err := ParseParams(o, sp.EagerLimit)
	return sp, p, err
}

// setupBlob is what each rank publishes through AllGather.
const setupBlob = 24 // segid, board address, pid

// New builds the xpmem transport for env.
func New(env transports.Env) (*Transport, error) {
	sp, p, err := params(env.Options)
	if err != nil {
		return nil, err
	}
	if env.MultiHost() {
		return nil, sys.NotSupported("xpmem", "ranks on more than one host", nil)
	}
	x, err := setup(env, p)
	if err != nil {
		return nil, err
	}
	ep, err := sm.New(env, sp, &copier{x: x}, "xpmem")
	if err != nil {
		x.close()
		return nil, err
	}
	return &Transport{Endpoint: ep, x: x}, nil
}

// setup opens the device, exports this rank and attaches every peer's board.
// Every rank calls AllGather once, even when its own setup failed, so that
// no peer waits for it: a failure travels as an empty blob.
func setup(env transports.Env, p Params) (*state, error) {
	if env.Size > 1 && env.AllGather == nil {
		return nil, errors.New("xpmem: the job offers no AllGather to exchange segment ids")
	}
	if p.Device == Fake {
		if err := sys.AllowAnyTracer(); err != nil { // the fake copies with process_vm_*
			return nil, err
		}
	}
	x := &state{p: p, rank: env.Rank, peers: map[int]*peerState{}, byRank: make([]*peerState, env.Size)}
	var err error
	x.dev, x.version, err = Open(p)
	if err == nil {
		x.cache = newCache(x.dev, p.Align, p.Cache)
		x.board, err = newBoard()
	}
	if err == nil {
		x.segid, err = x.dev.Make()
	}
	blob := make([]byte, setupBlob)
	if err == nil {
		binary.LittleEndian.PutUint64(blob[0:], uint64(x.segid))
		binary.LittleEndian.PutUint64(blob[8:], uint64(x.board.addr))
		binary.LittleEndian.PutUint64(blob[16:], uint64(os.Getpid()))
	} else {
		blob = nil
	}
	if env.Size > 1 {
		all, gerr := env.AllGather(blob)
		if err == nil && gerr != nil {
			err = fmt.Errorf("xpmem: exchange segment ids: %w", gerr)
		}
		for r, b := range all {
			if err != nil {
				break
			}
			if r == env.Rank {
				continue
			}
			if len(b) != setupBlob {
				err = fmt.Errorf("xpmem: rank %d could not set up xpmem", r)
				break
			}
			ps := &peerState{rank: r, pid: int(binary.LittleEndian.Uint64(b[16:]))}
			ps.board.remote = uintptr(binary.LittleEndian.Uint64(b[8:]))
			if ps.apid, err = x.dev.Get(int64(binary.LittleEndian.Uint64(b[0:]))); err != nil {
				err = fmt.Errorf("xpmem: rank %d's segment: %w", r, err)
				break
			}
			x.peers[ps.pid], x.byRank[r] = ps, ps
			if ps.board.local, err = x.dev.Attach(ps.apid, ps.board.remote, boardBytes); err != nil {
				err = fmt.Errorf("attach xpmem notice board of rank %d: %w", r, err)
				break
			}
		}
	}
	if err != nil {
		x.close()
		return nil, err
	}
	return x, nil
}

// close undoes setup: attachments, permits, the segment, the device.
func (x *state) close() error {
	if x.dev == nil {
		return nil
	}
	var errs []error
	if x.cache != nil {
		errs = append(errs, x.cache.close())
	}
	for _, ps := range x.byRank {
		if ps == nil {
			continue
		}
		if ps.board.local != 0 {
			errs = append(errs, x.dev.Detach(ps.board.local))
		}
		if ps.apid != 0 {
			errs = append(errs, x.dev.Release(ps.apid))
		}
	}
	if x.segid != 0 {
		errs = append(errs, x.dev.Remove(x.segid))
	}
	errs = append(errs, x.dev.Close())
	if x.board != nil {
		errs = append(errs, x.board.close())
	}
	x.dev = nil
	return errors.Join(errs...)
}

// Close closes the engine, then detaches, releases and removes everything.
func (t *Transport) Close() error {
	return errors.Join(t.Endpoint.Close(), t.x.close())
}

// Invalidate is the allocator's release hook: [addr, addr+n) of this
// rank's memory is going back to the kernel, so peers must not keep it
// attached. The safe form takes only the board's lock.
func (t *Transport) Invalidate(addr uintptr, n int) {
	c := t.x.cache
	if t.x.p.LockedHook {
		// DELIBERATELY UNSAFE (hazard H1): one lock for the cache and the
		// board, which the allocating goroutine may hold while it grows
		// the table.
		c.entries.Locked(func() { t.x.board.post(addr, n) })
	} else {
		t.x.board.post(addr, n)
	}
	c.posted.Add(1)
}

// UseTableAllocator keeps the cache's table in a's memory (the unsafe
// form's setting; a's release hook should reach Invalidate).
func (t *Transport) UseTableAllocator(a TableAllocator) error { return t.x.cache.useTable(a) }

// Stats returns the cache's and the board's counters.
func (t *Transport) Stats() Stats { return t.x.cache.stats() }

// Counters are Stats by name (what gotune selftest prints).
func (t *Transport) Counters() map[string]int64 {
	s := t.Stats()
	return map[string]int64{"hits": s.Hits, "misses": s.Misses, "attaches": s.Attaches, "detaches": s.Detaches,
		"evictions": s.Evictions, "invalidations": s.Invalidations, "notices": s.Notices, "flushes": s.Flushes,
		"posted": s.Posted, "entries": int64(s.Entries)}
}

// Version is the device's XPMEM version word.
func (t *Transport) Version() uint32 { return t.x.version }

// Params returns the xpmem parameters in force.
func (t *Transport) XPMEMParams() Params { return t.x.p }

// copier is the engine's single-copy mechanism.
type copier struct{ x *state }

func (c *copier) Name() string          { return "xpmem" }
func (c *copier) Pull() bool            { return c.x.p.Pull }
func (c *copier) Rendezvous(n int) bool { return n >= c.x.p.Threshold }

// Copy reads [remote, remote+len(local)) of process pid into local (pull)
// or writes local there, through the cached attachment, after applying the
// peer's release notices.
func (c *copier) Copy(pid int, local []byte, _ sm.Place, remote uintptr, pull bool) error {
	x := c.x
	ps := x.peers[pid]
	if ps == nil {
		return fmt.Errorf("xpmem: no peer with pid %d", pid)
	}
	if err := x.applyNotices(ps); err != nil {
		return err
	}
	at, temp, err := x.cache.get(ps.rank, ps.apid, remote, len(local))
	if err != nil {
		return err
	}
	err = x.dev.Move(pid, at, remote, local, pull)
	if temp {
		start := x.cache.span(remote, len(local)).Start
		err = errors.Join(err, x.cache.detach(at-(remote-start)))
	}
	return err
}

// applyNotices drops the cached attachments of ps's memory that ps has
// released since the last look.
func (x *state) applyNotices(ps *peerState) error {
	ps.posts.Lock()
	spans, all, err := ps.board.read(x.dev, ps.pid)
	ps.posts.Unlock()
	if err != nil {
		return fmt.Errorf("xpmem: read rank %d's release notices: %w", ps.rank, err)
	}
	if len(spans) == 0 && !all {
		return nil
	}
	x.cache.drop(ps.rank, spans, all)
	return nil
}

// Check proves, between live ranks, that each can copy from the next
// through XPMEM: every rank sends the address of a marker; the previous
// rank reads it through its attachment.
func Check(tr transports.Transport, env transports.Env) error {
	t, ok := tr.(*Transport)
	if !ok {
		return fmt.Errorf("xpmem check: not an xpmem transport")
	}
	return sm.RingCheck(t, env, "xpmem", sm.AddressHandle, func(prev int, addr uint64, got []byte) error {
		return (&copier{x: t.x}).Copy(env.PIDs[prev], got, sm.PlaceHost, uintptr(addr), true)
	})
}
