package cma

import (
	"fmt"
	"strconv"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// Params configure the single copy.
type Params struct {
	Pull bool // receiver reads (true) or sender writes (false)
	// Split: the receiver reads the first half while the sender writes the
	// second (sm.RouteSplit); the first message with a peer pulls whole.
	Split     bool
	Chunk     int // bytes per system call; 0 means the whole message
	Threshold int // smallest message sent by rendezvous
	// IgnoreErrors treats a failed or short copy as done, as code that
	// does not check what process_vm_readv returned does: hazard H6's
	// unsafe variant (cma.onerror=ignore). The receiver is left with
	// whatever its buffer held. Never set it for real traffic.
	IgnoreErrors bool
}

// Option keys.
const (
	KeyMode, KeyChunk, KeyThreshold, KeyOnError = "cma.mode", "cma.chunk", "cma.threshold", "cma.onerror"
)

// Options documents the options ParseParams reads (besides sm.*).
var Options = &transports.OptionSet{Name: "cma", Options: []transports.Option{
	{Key: KeyMode, Type: "pull|push|split", Default: "pull", Help: "pull (receiver process_vm_readv), push (sender process_vm_writev), or split (the receiver reads the first half while the sender writes the second: two cores copy one message)"},
	{Key: KeyChunk, Type: "size", Default: "0", Help: "bytes per process_vm_* call (0: whole message)"},
	{Key: KeyThreshold, Type: "size", Help: "smallest message sent by single copy (default: sm.eager+1)"},
	{Key: KeyOnError, Type: "fallback|ignore", Default: "fallback", Help: "fallback (a refused copy goes by copy-in/copy-out, other failures are errors on both sides) or ignore (UNSAFE: a failed copy counts as done, hazard H6's corruption, for probes only)"},
}}

// modes are cma.mode's values.
var modes = []string{"pull", "push", "split"}

// paramsFor is a mode's direction: split pulls where it cannot split.
func paramsFor(mode string) Params { return Params{Pull: mode != "push", Split: mode == "split"} }

// mode is p's cma.mode.
func (p Params) mode() string {
	switch {
	case p.Split:
		return "split"
	case p.Pull:
		return "pull"
	}
	return "push"
}

// ParseParams reads cma.* options; eagerLimit is the sm eager limit in force.
func ParseParams(o transports.Options, eagerLimit int) (Params, error) {
	mode, err := o.String(KeyMode, "pull", modes...)
	if err != nil {
		return Params{}, err
	}
	p := paramsFor(mode)
	if p.Chunk, err = o.Int(KeyChunk, 0); err != nil {
		return p, err
	}
	if p.Threshold, err = o.Int(KeyThreshold, eagerLimit+1); err != nil {
		return p, err
	}
	if p.Threshold <= eagerLimit {
		return p, fmt.Errorf("%s=%d: must exceed the eager limit %d", KeyThreshold, p.Threshold, eagerLimit)
	}
	onError, err := o.String(KeyOnError, "fallback", "fallback", "ignore")
	if err != nil {
		return p, err
	}
	p.IgnoreErrors = onError == "ignore"
	return p, nil
}

// Options renders p as the options ParseParams reads back into p (given
// the eager limit p.Threshold was read with). Every key is written, so the
// result means the same to a build whose defaults differ.
func (p Params) Options() transports.Options {
	return transports.Options{KeyMode: p.mode(), KeyChunk: strconv.Itoa(p.Chunk),
		KeyThreshold: strconv.Itoa(p.Threshold), KeyOnError: transports.Choice(p.IgnoreErrors, "ignore", "fallback")}
}

// Copier is the CMA single-copy mechanism.
type Copier struct {
	p     Params
	route func(n int) bool
}

// NewCopier returns a mechanism with these parameters: messages from
// p.Threshold up go by single copy.
func NewCopier(p Params) *Copier { return &Copier{p: p} }

// NewRoutedCopier returns a mechanism that takes exactly the messages route
// accepts (a profile's size ranges, say); p.Threshold is not used.
func NewRoutedCopier(p Params, route func(n int) bool) *Copier { return &Copier{p: p, route: route} }

func (c *Copier) Name() string          { return "cma" }
func (c *Copier) Pull() bool            { return c.p.Pull }
func (c *Copier) Rendezvous(n int) bool { return sm.RouteBySize(c.route, c.p.Threshold, n) }

// RouteFor is the mode's route: both sides copy in split mode.
func (c *Copier) RouteFor(int, sm.Place, sm.Place) sm.Route {
	switch {
	case c.p.Split:
		return sm.RouteSplit
	case c.p.Pull:
		return sm.RoutePull
	}
	return sm.RoutePush
}

// Copy moves len(local) bytes between local and [remote, remote+len) of
// pid. Errors matching ErrNotSupported (EPERM: ptrace rules; ENOSYS) make
// the sm engine fall back to copy-in/copy-out; others (ESRCH: the peer has
// exited) fail the message. With IgnoreErrors every error is dropped.
func (c *Copier) Copy(pid int, local []byte, _ sm.Place, remote uintptr, pull bool) error {
	err := c.copy(pid, local, remote, pull)
	if c.p.IgnoreErrors {
		return nil // hazard H6: the classic unchecked return
	}
	return err
}

func (c *Copier) copy(pid int, local []byte, remote uintptr, pull bool) error {
	chunk := c.p.Chunk
	if chunk <= 0 {
		chunk = len(local)
	}
	move := sys.CopyToProcess
	if pull {
		move = sys.CopyFromProcess
	}
	for off := 0; off < len(local); off += chunk {
		end := min(off+chunk, len(local))
		seg := []sys.RemoteSegment{{Addr: remote + uintptr(off), Len: end - off}}
		if _, err := move(pid, [][]byte{local[off:end]}, seg); err != nil {
			return err
		}
	}
	return nil
}

func init() {
	transports.Register(&transports.Driver{
		Name:        "cma",
		NodeLocal:   true,
		Options:     []*transports.OptionSet{sm.Options, Options},
		SharedBytes: sm.SharedBytes,
		New:         New,
		Check:       Check,
	})
	// auto's ranges that name cma: cma.mode is the direction of a range
	// without its own (auto copies each range in its mode).
	sm.RegisterMechanism("cma", sm.Mechanism{
		Routed: func(env transports.Env, route func(int) bool) (sm.SingleCopy, error) {
			mode, err := env.Options.String(KeyMode, "pull", modes...)
			if err != nil {
				return nil, err
			}
			if err := sys.AllowAnyTracer(); err != nil {
				return nil, err
			}
			return NewRoutedCopier(paramsFor(mode), route), nil
		},
		Check: Check,
	})
}

// New builds the cma transport: an sm engine with CMA rendezvous.
func New(env transports.Env) (transports.Transport, error) {
	sp, err := sm.ParseParams(env.Options)
	if err != nil {
		return nil, err
	}
	cp, err := ParseParams(env.Options, sp.EagerLimit)
	if err != nil {
		return nil, err
	}
	if err := sys.AllowAnyTracer(); err != nil {
		return nil, err
	}
	return sm.New(env, sp, NewCopier(cp), "cma")
}

// Check proves, between live ranks, that each can single-copy from the next:
// every rank sends the address of a marker word; the next rank reads it.
func Check(t transports.Transport, env transports.Env) error {
	return sm.RingCheck(t, env, "cma", sm.AddressHandle, func(prev int, addr uint64, got []byte) error {
		_, err := sys.CopyFromProcess(env.PIDs[prev], [][]byte{got}, []sys.RemoteSegment{{Addr: uintptr(addr), Len: len(got)}})
		return err
	})
}
