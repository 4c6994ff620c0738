package launch

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/gotune/gotune/internal/registry"
	"github.com/gotune/gotune/internal/sys"
)

// Func is a rank's body. Its result is JSON-encoded back to the launcher.
type Func func(r *Rank) (any, error)

var kinds = registry.New[Func]("launch: duplicate job kind ")

// Register makes a job kind runnable in rank processes. Call it from init so
// every re-executed binary knows the same kinds.
func Register(kind string, f Func) { kinds.Register(kind, f) }

// Rank is a running rank's view of its job.
type Rank struct {
	ID, Size int
	PIDs     []int
	Segment  []byte // nil when the job has none
	Token    string // the job's secret: every bootstrap connection presents it, and so does every tcp transport connection
	Job      Job
	// Hosts names every rank's node, by rank (nil: one host); Addr is this
	// rank's IP address on the bootstrap network ("" on one host).
	Hosts []string
	Addr  string
	enc   *json.Encoder
	dec   *json.Decoder

	heartbeats []byte
}

// IsRank reports whether this process was started by a launcher as a rank.
func IsRank() bool { return os.Getenv(envRank) != "" }

// MaybeRunRank runs the rank body and exits if this process is a rank;
// otherwise it returns at once. Call it first thing in main and TestMain.
func MaybeRunRank() {
	if !IsRank() {
		return
	}
	if err := runRank(); err != nil {
		fmt.Fprintf(os.Stderr, "gotune rank %s: %v\n", os.Getenv(envRank), err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runRank() error {
	dumpStacksOnQuit()
	id, err := strconv.Atoi(os.Getenv(envRank))
	if err != nil {
		return fmt.Errorf("bad %s: %w", envRank, err)
	}
	network, addr := bootstrapAddr(os.Getenv(envBoot))
	c, err := net.Dial(network, addr)
	if err != nil {
		return fmt.Errorf("connect to launcher: %w", err)
	}
	defer c.Close()
	r := &Rank{ID: id, Token: os.Getenv(envToken), enc: json.NewEncoder(c), dec: json.NewDecoder(bufio.NewReader(c))}
	if err := r.enc.Encode(message{Op: "hello", Token: os.Getenv(envToken), Rank: id, PID: os.Getpid()}); err != nil {
		return fmt.Errorf("bootstrap hello: %w", err)
	}
	var m message
	if err := r.dec.Decode(&m); err != nil || m.Op != "spec" || m.Spec == nil {
		return fmt.Errorf("bootstrap spec: %v (op %q)", err, m.Op)
	}
	r.Job, r.PIDs, r.Size, r.Hosts = m.Spec.Job, m.Spec.PIDs, m.Spec.Job.Size, m.Spec.Hosts
	if id < len(m.Spec.Addrs) {
		r.Addr = m.Spec.Addrs[id]
	}

	result, ferr := r.run(m.Spec.ShmPath)
	if ferr != nil {
		if r.enc.Encode(message{Op: "error", Error: ferr.Error(), NotSupported: errors.Is(ferr, sys.ErrNotSupported)}) == nil {
			var ack message
			r.dec.Decode(&ack) // exit only once the launcher has the cause
		}
		return ferr
	}
	b, err := json.Marshal(result)
	if err != nil {
		return fmt.Errorf("encode result: %w", err)
	}
	if err := r.enc.Encode(message{Op: "result", Result: b}); err != nil {
		return fmt.Errorf("send result: %w", err)
	}
	return nil
}

func (r *Rank) run(shmPath string) (any, error) {
	f, _ := kinds.Lookup(r.Job.Kind)
	if f == nil {
		return nil, fmt.Errorf("unknown job kind %q", r.Job.Kind)
	}
	hb, err := sys.MapShared(heartbeatFD, heartbeatBytes(r.Size))
	if err != nil {
		return nil, fmt.Errorf("map heartbeats: %w", err)
	}
	defer sys.Unmap(hb)
	r.heartbeats = hb
	r.Beat()
	if n := r.Job.SegmentBytes; n > 0 {
		var fd uintptr
		if shmPath != "" && os.Getenv(envSegment) == "" {
			f, err := os.OpenFile(shmPath, os.O_RDWR, 0)
			if err != nil {
				return nil, fmt.Errorf("open shared segment: %w", err)
			}
			defer f.Close()
			fd = f.Fd()
		} else {
			fd = segmentFD // the launcher's memfd
		}
		// Lazily: a transport pre-faults the parts it uses (sm: its own
		// fragment ring), and the rest is committed only where touched,
		// so pairs of ranks that never talk cost the node no memory.
		seg, err := sys.MapSharedLazy(fd, n)
		if err != nil {
			return nil, err
		}
		defer sys.Unmap(seg)
		r.Segment = seg
	}
	// The measuring goroutine owns this thread for the rank's life.
	runtime.LockOSThread()
	if len(r.Job.CPUs) > 0 {
		if err := sys.PinThread(r.Job.CPUs[r.ID]); err != nil {
			return nil, err
		}
	}
	if err := r.Barrier(); err != nil { // everyone has mapped the segment
		return nil, err
	}
	return f(r)
}

// dumpStacksOnQuit makes the watchdog's SIGQUIT print every goroutine's
// stack, then stacksEnd, then wait for the watchdog to kill the job: a rank
// that exited after its dump would let its peers see it gone and exit
// before printing theirs. The runtime's own SIGQUIT traceback cannot unwind a
// goroutine that is running on another thread, or inside the race
// detector's C code, at the moment of the signal: a spinning rank's stack
// came out empty. runtime.Stack stops the world first, which preempts the
// spinner at a Go instruction, so its stack is always there.
func dumpStacksOnQuit() {
	quit := make(chan os.Signal, 1)
	signal.Notify(quit, syscall.SIGQUIT)
	go func() {
		<-quit
		buf := make([]byte, 1<<20)
		for {
			n := runtime.Stack(buf, true)
			if n < len(buf) {
				buf = buf[:n]
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		rank := os.Getenv(envRank)
		fmt.Fprintf(os.Stderr, "SIGQUIT: gotune rank %s, every goroutine:\n%s\n%s", rank, buf, stacksEnd(rank))
		select {} // the watchdog kills the job once every stalled rank has printed
	}()
}

// stacksEnd is the line that ends a rank's stack dump.
func stacksEnd(rank string) string { return "end of stacks of gotune rank " + rank + "\n" }

// Barrier returns once every rank of the job has called it.
func (r *Rank) Barrier() error {
	r.Beat()
	if err := r.enc.Encode(message{Op: "barrier"}); err != nil {
		return fmt.Errorf("barrier: %w", err)
	}
	var m message
	if err := r.dec.Decode(&m); err != nil || m.Op != "go" {
		return fmt.Errorf("barrier: %v (op %q)", err, m.Op)
	}
	return nil
}

// AllGather is a collective: every rank calls it with its own blob and
// gets every rank's, by rank.
func (r *Rank) AllGather(b []byte) ([][]byte, error) {
	r.Beat()
	if err := r.enc.Encode(message{Op: "allgather", Blob: b}); err != nil {
		return nil, fmt.Errorf("allgather: %w", err)
	}
	var m message
	if err := r.dec.Decode(&m); err != nil || m.Op != "gathered" {
		return nil, fmt.Errorf("allgather: %v (op %q)", err, m.Op)
	}
	if len(m.Blobs) != r.Size {
		return nil, fmt.Errorf("allgather: %d blobs for %d ranks", len(m.Blobs), r.Size)
	}
	return m.Blobs, nil
}

// bootstrapAddr splits the bootstrap address a rank is given: "tcp:HOST:PORT"
// for a launcher on another host, else the path of a unix socket.
func bootstrapAddr(s string) (network, addr string) {
	if a, ok := strings.CutPrefix(s, "tcp:"); ok {
		return "tcp", a
	}
	return "unix", s
}

// Params decodes the job's parameters into v.
func (r *Rank) Params(v any) error {
	if err := json.Unmarshal(r.Job.Params, v); err != nil {
		return fmt.Errorf("job %s parameters: %w", r.Job.Kind, err)
	}
	return nil
}
