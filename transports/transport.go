package transports

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gotune/gotune/internal/bytesize"
	"github.com/gotune/gotune/internal/sys"
)

// ErrNotSupported is matched by errors meaning "not available on this machine".
var ErrNotSupported = sys.ErrNotSupported

// ErrTruncated reports a message longer than the receive buffer.
var ErrTruncated = errors.New("message truncated")

// Request is an outstanding non-blocking operation.
type Request interface {
	// Done reports completion; it does not drive progress.
	Done() bool
	// Len is the number of bytes transferred, valid once Done.
	Len() int
	// Err is the operation's error, valid once Done.
	Err() error
}

// Transport moves ordered messages between ranks of one job. Messages between
// a pair of ranks are matched in the order they were sent. Buffers passed to
// a transport must live outside the Go heap (hostmem.Allocator's, say) and
// must not be touched until the operation completes.
type Transport interface {
	Name() string
	Send(peer int, buf []byte) error
	Recv(peer int, buf []byte) (int, error)
	Isend(peer int, buf []byte) (Request, error)
	Irecv(peer int, buf []byte) (Request, error)
	// Wait drives progress until every request has completed and returns
	// the first error among them.
	Wait(reqs ...Request) error
	Close() error
}

// PersistentRequest is a communication set up once and started many times
// (MPI_Send_init/MPI_Recv_init and MPI_Start). Between a completion and the
// next Start it is inactive.
type PersistentRequest interface {
	Request
	// Start begins one operation; the request must be inactive. The
	// transport's Wait completes it and makes it inactive again (without
	// releasing it); waiting for an inactive request returns at once.
	Start() error
	// Free releases an inactive request and whatever it reserved.
	Free() error
}

// Persistent is implemented by transports that offer persistent requests.
type Persistent interface {
	SendInit(to int, buf []byte) (PersistentRequest, error)
	RecvInit(from int, buf []byte) (PersistentRequest, error)
}

// CollOp names a collective a transport may run whole.
type CollOp string

// The collectives, with nccl-tests' names.
const (
	AllReduce     CollOp = "allreduce"
	AllGather     CollOp = "allgather"
	ReduceScatter CollOp = "reducescatter"
	Broadcast     CollOp = "broadcast"
)

// Collectives is implemented by transports whose library runs a
// collective as one call (NCCL). Every rank calls it with the same op,
// sizes and root, in the same order. Lengths are in bytes: allreduce and
// broadcast take len(send) == len(recv); allgather gathers every rank's
// send into recv (len(recv) = ranks × len(send)); reducescatter leaves
// len(send)/ranks bytes of the reduction in recv. Reductions sum 32-bit
// floats. The request completes, through the transport's Wait, once recv
// holds the result and send may be reused.
type Collectives interface {
	Collective(op CollOp, send, recv []byte, root int) (Request, error)
}

// Invalidator is implemented by transports that keep state about user
// buffers between operations (ib's memory registrations). Invalidate must
// run before [addr, addr+n) goes back to the kernel (purged or unmapped);
// an allocator's release hook is where it belongs
// (hostmem.Allocator.OnRelease). It must be safe from any goroutine and
// must not allocate from a hooked allocator (hazard H1).
type Invalidator interface {
	Invalidate(addr uintptr, n int)
}

// Env is what a rank offers a transport when it starts.
type Env struct {
	Rank, Size int
	PIDs       []int   // process id of every rank, by rank
	Segment    []byte  // the job's shared segment, mapped by every rank; its pages are committed where first touched (sys.Populate pre-faults a part)
	Options    Options // transport parameters
	// Token is the job's secret (the launcher's per-job random token):
	// transports that accept connections (tcp) refuse any that does not
	// present it. Empty when the starter offers none.
	Token string
	// AllGather is a collective over the job's ranks: every rank calls it
	// with its own blob, in the same order of calls, and gets every rank's
	// blob, by rank. Transports that connect ranks on other hosts exchange
	// their addresses through it. Nil when the starter offers none.
	AllGather func(b []byte) ([][]byte, error)
	// Hosts names every rank's host, by rank: ranks with equal names share
	// a node. Nil when the starter does not say (one host).
	Hosts []string
	// Addr is this rank's IP address on the job's bootstrap network: a
	// transport that listens for ranks on other hosts listens there. Empty
	// when every rank runs on one host.
	Addr string
}

// SameHost reports whether ranks a and b share a node.
func (e Env) SameHost(a, b int) bool {
	return len(e.Hosts) == 0 || e.Hosts[a] == e.Hosts[b]
}

// MultiHost reports whether the job's ranks span more than one node.
func (e Env) MultiHost() bool {
	for _, h := range e.Hosts {
		if h != e.Hosts[0] {
			return true
		}
	}
	return false
}

// Options are transport parameters as key=value strings ("sm.depth=64").
type Options map[string]string

// With returns a new set: o's options with over's set over them (o and
// over are not changed).
func (o Options) With(over Options) Options {
	out := make(Options, len(o)+len(over))
	maps.Copy(out, o)
	maps.Copy(out, over)
	return out
}

// Int returns the integer option key (K/M/G suffixes allowed) or def.
func (o Options) Int(key string, def int) (int, error) {
	v, ok := o[key]
	if !ok {
		return def, nil
	}
	n, err := ParseSize(v)
	if err != nil {
		return 0, fmt.Errorf("option %s=%q: %w", key, v, err)
	}
	return n, nil
}

// Duration returns the duration option key (Go's syntax: 50us, 2ms) or
// def.
func (o Options) Duration(key string, def time.Duration) (time.Duration, error) {
	v, ok := o[key]
	if !ok {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("option %s=%q: want a duration such as 50us: %w", key, v, err)
	}
	return d, nil
}

// String returns option key or def, checking it against the allowed values.
func (o Options) String(key, def string, allowed ...string) (string, error) {
	v, ok := o[key]
	if !ok {
		return def, nil
	}
	for _, a := range allowed {
		if v == a {
			return v, nil
		}
	}
	return "", fmt.Errorf("option %s=%q: want one of %s", key, v, strings.Join(allowed, ", "))
}

// ParseSize parses a byte count such as 64, 4K, 16M or 1G (powers of 1024).
func ParseSize(s string) (int, error) { return bytesize.Parse(s) }

// FormatSize writes a byte count the way ParseSize reads it: with the
// largest K/M/G suffix that divides it exactly (65536 → "64K").
func FormatSize(n int) string { return bytesize.Format(n) }

// FormatDuration writes a duration the way Options.Duration reads it, in
// ASCII (50us, not 50µs), so that it can be typed back on a command line.
func FormatDuration(d time.Duration) string { return strings.Replace(d.String(), "µs", "us", 1) }

// Driver is a registered transport.
type Driver struct {
	Name string
	// Options are the option sets the driver reads (its own and those of
	// the packages it builds on, such as sm's).
	Options []*OptionSet
	// SharedBytes is the size of the shared segment the driver needs for
	// size ranks with these options.
	SharedBytes func(size int, opts Options) (int, error)
	// DeviceMemory says the transport takes buffers the CPU must not
	// touch (GPU memory); others would fault on them.
	DeviceMemory bool
	// DeviceDefault says a benchmark's buffers are device memory unless
	// --mem says otherwise (NCCL's, as nccl-tests allocate them).
	DeviceDefault bool
	// Collectives says the transport implements Collectives.
	Collectives bool
	// NodeLocal says the transport connects only ranks on one node (shared
	// memory, CMA, CUDA IPC): it cannot measure or carry an inter-node pair.
	NodeLocal bool
	// New builds the transport inside a rank.
	New func(env Env) (Transport, error)
	// Check reports, inside a running job, whether the transport can work
	// between these ranks (nil), or why not (an ErrNotSupported error).
	Check func(t Transport, env Env) error
	// Present reports, without starting a job, whether this node has what
	// the transport needs (a kernel module's device, say): nil, or why not
	// (an ErrNotSupported error). Nil when there is nothing to look for.
	// Why: a tuner weighs a transport only where it can run, and one whose
	// module is absent fails every trial.
	Present func(opts Options) error
}

var (
	mu      sync.RWMutex
	drivers = map[string]*Driver{}
)

// Register adds a driver; it panics on a duplicate name.
func Register(d *Driver) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := drivers[d.Name]; dup {
		panic("transports: duplicate driver " + d.Name)
	}
	drivers[d.Name] = d
}

// Lookup finds a driver by name.
func Lookup(name string) (*Driver, error) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := drivers[name]
	if !ok {
		return nil, fmt.Errorf("unknown transport %q (have %s)", name, strings.Join(namesLocked(), ", "))
	}
	return d, nil
}

// Names lists the registered transports, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	return namesLocked()
}

// InterNodeNames lists the registered transports that can connect ranks
// on different nodes (not NodeLocal), besides auto, which routes by a
// profile.
func InterNodeNames() []string {
	mu.RLock()
	defer mu.RUnlock()
	var names []string
	for _, n := range namesLocked() {
		if !drivers[n].NodeLocal && n != "auto" {
			names = append(names, n)
		}
	}
	return names
}

func namesLocked() []string {
	names := make([]string, 0, len(drivers))
	for n := range drivers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// CheckKeys rejects options that no registered driver understands.
func CheckKeys(opts Options) error {
	mu.RLock()
	defer mu.RUnlock()
	for k := range opts {
		known := false
		for _, d := range drivers {
			if slices.ContainsFunc(d.Options, func(s *OptionSet) bool { return s.Has(k) }) {
				known = true
				break
			}
		}
		if !known {
			return fmt.Errorf("unknown transport option %q", k)
		}
	}
	return nil
}
