package launch

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gotune/gotune/internal/sys"
)

// Segment backends.
const (
	Memfd = "memfd" // anonymous, inherited: nothing can be left behind
	Posix = "posix" // /dev/shm file, unlinked once every rank has it mapped
)

// ShmDir is where POSIX segments live.
var ShmDir = "/dev/shm"

// ShmPrefix starts the name of every POSIX segment gotune creates.
const ShmPrefix = "gotune-"

// Job describes what to run.
type Job struct {
	Kind         string          // registered rank function
	Size         int             // number of ranks
	SegmentBytes int             // shared segment size (0: none)
	Backend      string          // Memfd (default) or Posix
	CPUs         []int           // CPU for each rank (empty: no pinning)
	Params       json.RawMessage // handed to the rank function
	// Nodes spreads the ranks over this many nodes, in blocks (rank r on
	// node r/ceil(Size/Nodes)); 0 or 1 keeps them on this launcher's node.
	// More than one needs a cluster (Coordinate): ranks started by mpirun
	// or srun; without one Run fails with an ErrNotSupported error.
	Nodes int
	// Stall arms the watchdog: a rank whose heartbeat (Rank.Beat) does not
	// move for this long is asked for its stacks (SIGQUIT) and the job is
	// killed with a *StallError. Zero disables it.
	Stall time.Duration
}

// Hooks let callers observe a job; all are optional.
type Hooks struct {
	Started func(pids []int) // every rank process exists
	Ready   func(pids []int) // every rank has mapped the segment
	Stderr  io.Writer        // ranks' stdout and stderr (default os.Stderr)
	Exe     string           // binary to execute (default os.Executable)
}

// Result is what each rank's function returned, by rank.
type Result []json.RawMessage

// wire messages between launcher and ranks (JSON lines).
type message struct {
	Op     string          `json:"op"`               // hello, spec, barrier, go, allgather, gathered, result, error
	Token  string          `json:"token,omitempty"`  // hello
	Rank   int             `json:"rank"`             // hello
	PID    int             `json:"pid,omitempty"`    // hello
	Spec   *spec           `json:"spec,omitempty"`   // spec
	Result json.RawMessage `json:"result,omitempty"` // result
	Error  string          `json:"error,omitempty"`  // error
	Blob   []byte          `json:"blob,omitempty"`   // allgather
	Blobs  [][]byte        `json:"blobs,omitempty"`  // gathered
	// NotSupported marks an error that matched sys.ErrNotSupported in the
	// rank, so it still does after crossing the process boundary.
	NotSupported bool `json:"not_supported,omitempty"`
}

type spec struct {
	Job     Job      `json:"job"`
	PIDs    []int    `json:"pids"`
	ShmPath string   `json:"shm_path,omitempty"`
	Hosts   []string `json:"hosts,omitempty"` // by rank; nil on one host
	Addrs   []string `json:"addrs,omitempty"` // by rank: bootstrap-network IPs
}

const (
	envRank  = "GOTUNE_RANK"
	envSize  = "GOTUNE_SIZE"
	envBoot  = "GOTUNE_BOOTSTRAP"
	envToken = "GOTUNE_TOKEN"
)

// Run starts job.Size ranks and waits for their results. Cancelling ctx kills
// the ranks. Every segment is gone when Run returns.
func Run(ctx context.Context, job Job, hooks Hooks) (Result, error) {
	if job.Size < 1 {
		return nil, fmt.Errorf("launch %s: %d ranks", job.Kind, job.Size)
	}
	if job.Backend == "" {
		job.Backend = Memfd
	}
	if len(job.CPUs) != 0 && len(job.CPUs) < job.Size {
		return nil, fmt.Errorf("launch %s: %d cpus for %d ranks", job.Kind, len(job.CPUs), job.Size)
	}
	cl := active.Load()
	nodes, err := cl.place(job)
	if err != nil {
		return nil, err
	}
	RemoveStaleSegments()
	RemoveStaleBootDirs()
	exe := hooks.Exe
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("launch: find own executable: %w", err)
		}
	}
	stderr := hooks.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	dir, err := TempDir("boot")
	if err != nil {
		return nil, fmt.Errorf("launch: bootstrap dir: %w", err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "boot.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("launch: bootstrap socket: %w", err)
	}
	defer ln.Close()

	// Heartbeats first (fd 3), then the segment (fd 4).
	hbFile, hb, err := newHeartbeats(job.Size)
	if err != nil {
		return nil, err
	}
	defer hbFile.Close()
	defer sys.Unmap(hb)
	extra := []*os.File{hbFile}
	shmPath := ""
	if job.SegmentBytes > 0 {
		switch job.Backend {
		case Memfd:
			f, err := sys.MemfdCreate("gotune-"+job.Kind, job.SegmentBytes)
			if err != nil {
				return nil, fmt.Errorf("launch: %w", err)
			}
			defer f.Close()
			extra = append(extra, f)
		case Posix:
			shmPath = filepath.Join(ShmDir, fmt.Sprintf("%s%d-%s", ShmPrefix, os.Getpid(), token[:12]))
			f, err := sys.CreateShmFile(shmPath, job.SegmentBytes)
			if err != nil {
				return nil, fmt.Errorf("launch: %w", err)
			}
			f.Close()
			defer os.Remove(shmPath)
		default:
			return nil, fmt.Errorf("launch: unknown segment backend %q (want memfd or posix)", job.Backend)
		}
	}

	j := newRunning(job, token, syncWriter(stderr))
	j.hooks, j.shmPath, j.node, j.hb = hooks, shmPath, nodes, hb
	listeners := []net.Listener{ln}
	if cl != nil {
		j.hosts, j.addrs = cl.hostsOf(nodes)
		if slices.ContainsFunc(nodes, func(n int) bool { return n != 0 }) {
			tln, err := net.Listen("tcp", net.JoinHostPort(cl.ip, "0"))
			if err != nil {
				return nil, fmt.Errorf("launch %s: bootstrap listener: %w", job.Kind, err)
			}
			defer tln.Close()
			listeners = append(listeners, tln)
			if err := cl.startRemote(j, "tcp:"+tln.Addr().String()); err != nil {
				j.kill()
				return nil, err
			}
		}
	}
	if err := j.start(exe, sock, extra, j.stderr); err != nil {
		j.kill()
		j.exits.Wait()
		select {
		case ferr := <-j.failed: // the real cause, e.g. rank 0 died first
			return nil, ferr
		default:
			return nil, err
		}
	}
	var accepting sync.WaitGroup
	closeListeners := func() {
		for _, l := range listeners {
			l.Close()
		}
		accepting.Wait()
		j.closeStrangers()
	}
	// No rank, and no goroutine serving one (hooks included), outlives Run.
	defer func() {
		j.kill()
		j.exits.Wait()
		closeListeners()
		j.serving.Wait()
		if cl != nil {
			cl.forget(j)
		}
	}()
	if hooks.Started != nil {
		hooks.Started(j.pids())
	}
	if job.Stall > 0 {
		stopWatch := make(chan struct{})
		defer close(stopWatch)
		go j.watch(hb, stopWatch)
	}
	for _, l := range listeners {
		accepting.Add(1)
		go func() { defer accepting.Done(); j.accept(l) }()
	}
	go func() {
		// Once every rank has exited and every message it sent is read,
		// a missing result is a failure, whatever the exit status said.
		<-j.allExited
		closeListeners()
		j.serving.Wait()
		j.mu.Lock()
		defer j.mu.Unlock()
		for r, res := range j.results {
			if res == nil {
				j.fail(fmt.Errorf("rank %d of %s exited without a result", r, job.Kind))
				return
			}
		}
	}()
	select {
	case err := <-j.failed:
		return nil, j.rootCause(err)
	case <-j.doneCh:
	case <-ctx.Done():
		return nil, fmt.Errorf("launch %s: %w", job.Kind, context.Cause(ctx))
	}
	j.exits.Wait()
	var errs []error
	for r, err := range j.exitErr {
		if err != nil {
			errs = append(errs, fmt.Errorf("rank %d of %s: %w", r, job.Kind, exitError(err)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return j.results, nil
}

// newRunning is the launcher's state of job before any rank has started:
// every rank's slots empty, its output to stderr.
func newRunning(job Job, token string, stderr io.Writer) *running {
	j := &running{job: job, token: token, size: job.Size, stderr: stderr,
		local: make([]*exec.Cmd, job.Size), pidOf: make([]int, job.Size), node: make([]int, job.Size),
		conns: make([]*rankConn, job.Size), results: make(Result, job.Size),
		reported: make([]bool, job.Size), exitErr: make([]error, job.Size),
		exited: make([]chan struct{}, job.Size), allExited: make(chan struct{}),
		stderrTail: make([]*tailBuffer, job.Size),
		doneCh:     make(chan struct{}), failed: make(chan error, 1), strangers: map[net.Conn]bool{}}
	for r := range j.exited {
		j.exited[r] = make(chan struct{})
		j.stderrTail[r] = newTailBuffer(256 << 10)
	}
	return j
}

type rankConn struct {
	enc *json.Encoder
	dec *json.Decoder
}

type running struct {
	job       Job
	token     string
	size      int
	hooks     Hooks
	shmPath   string
	local     []*exec.Cmd // by rank: the ranks this launcher started (nil: a node agent's)
	node      []int       // by rank: index of its node in the cluster (all 0 on one host)
	hosts     []string    // by rank, for the spec (nil on one host)
	addrs     []string    // by rank, for the spec (nil on one host)
	hb        []byte      // heartbeats: local ranks beat here, node agents' beats are copied in
	stderr    io.Writer   // where every rank's output goes
	pgid      int
	exitErr   []error           // by rank, valid once exited[rank] is closed
	exited    []chan struct{}   // closed when that rank has been reaped
	allExited chan struct{}     // closed when every started rank has been reaped
	exits     sync.WaitGroup    // one per started rank
	serving   sync.WaitGroup    // one per bootstrap connection
	strangers map[net.Conn]bool // connections without a hello yet (nil: bootstrap closed)
	failed    chan error        // first failure wins
	stalling  atomic.Bool       // the watchdog is handling a stall

	mu       sync.Mutex
	pidOf    []int // by rank: from this launcher's start or a node agent's report
	conns    []*rankConn
	waiting  int      // ranks at the current barrier
	barriers int      // barriers completed
	gathered [][]byte // blobs of the allgather under way, by rank
	gathers  int      // ranks in the allgather under way
	results  Result
	reported []bool // rank sent its result or error

	stderrTail []*tailBuffer // the last of each rank's stderr, for stacks
	finished   int
	doneCh     chan struct{} // closed when every rank has sent its result
}

func (j *running) pids() []int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.pidOf)
}

func (j *running) start(exe, sock string, extra []*os.File, stderr io.Writer) error {
	// PR_SET_PDEATHSIG fires when the thread that forked exits: fork from a
	// locked thread that outlives every rank.
	started := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		for r := 0; r < j.size; r++ {
			if j.node[r] != 0 {
				continue // a node agent starts it
			}
			cmd := rankCommand(exe, r, j.size, sock, j.token, stderr, io.MultiWriter(stderr, j.stderrTail[r]), extra, j.pgid)
			if err := cmd.Start(); err != nil {
				started <- fmt.Errorf("launch rank %d of %s: %w", r, j.job.Kind, err)
				return
			}
			if j.pgid == 0 {
				j.pgid = cmd.Process.Pid
			}
			j.local[r] = cmd
			j.mu.Lock()
			j.pidOf[r] = cmd.Process.Pid
			j.mu.Unlock()
			j.exits.Add(1)
			go func() {
				defer j.exits.Done()
				err := cmd.Wait()
				j.exitErr[r] = err
				close(j.exited[r])
				if err != nil {
					j.fail(fmt.Errorf("rank %d of %s: %w", r, j.job.Kind, exitError(err)))
				}
			}()
		}
		started <- nil
		j.exits.Wait()
		close(j.allExited)
	}()
	return <-started
}

// rankCommand is the command that starts rank r: this binary again, told
// its rank, the bootstrap address and the token, in process group pgid (0:
// a new group led by the rank). The caller starts it from a locked thread
// that outlives the rank (PR_SET_PDEATHSIG fires when the forking thread
// exits).
func rankCommand(exe string, r, size int, boot, token string, stdout, stderr io.Writer, extra []*os.File, pgid int) *exec.Cmd {
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(),
		envRank+"="+strconv.Itoa(r), envSize+"="+strconv.Itoa(size),
		envBoot+"="+boot, envToken+"="+token,
		"GOTRACEBACK=all") // every goroutine, should SIGQUIT come before the rank's own handler
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid, Pdeathsig: syscall.SIGKILL}
	return cmd
}

// rootCause returns the death of a rank this launcher started, by a
// signal the job did not send, when that rank had already exited as err
// arrived; else err. A peer that sees the death (sm polls its pidfd) can
// report it before the launcher reaps the dead rank, and the death is the
// cause the user needs. Only ranks already exited are waited for, so this
// returns at once; the caller has not killed anything yet.
func (j *running) rootCause(err error) error {
	for r, cmd := range j.local {
		if cmd == nil || cmd.Process == nil {
			continue
		}
		select {
		case <-j.exited[r]:
		default:
			w, werr := sys.WatchProcess(cmd.Process.Pid)
			if werr != nil {
				continue
			}
			gone := w.Exited()
			w.Close()
			if !gone {
				continue
			}
			<-j.exited[r]
		}
		var killed *KilledError
		if e := exitError(j.exitErr[r]); errors.As(e, &killed) {
			return fmt.Errorf("rank %d of %s: %w", r, j.job.Kind, e)
		}
	}
	return err
}

// KilledError is a rank process ended by a signal the job did not send
// (an operator's kill -9, the OOM killer).
type KilledError struct{ Signal syscall.Signal }

func (e *KilledError) Error() string {
	return "killed by signal " + strconv.Itoa(int(e.Signal)) + " (" + e.Signal.String() + ")"
}

// exitError says how a rank process ended: a *KilledError, a status, or
// what went wrong waiting for it.
func exitError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return &KilledError{Signal: ws.Signal()}
		}
		return errors.New("exited with status " + strconv.Itoa(ee.ExitCode()))
	}
	return err
}

// kill ends every rank still alive. Once all are reaped it does nothing:
// the group id may by then belong to someone else.
func (j *running) kill() {
	select {
	case <-j.allExited:
		return
	default:
	}
	if j.pgid > 0 {
		sys.KillGroup(j.pgid, syscall.SIGKILL)
	}
	if cl := active.Load(); cl != nil {
		cl.killRemote(j)
	}
}

// signal sends sig to rank r, wherever it runs (best effort).
func (j *running) signal(r int, sig syscall.Signal) {
	if c := j.local[r]; c != nil {
		c.Process.Signal(sig)
		return
	}
	if cl := active.Load(); cl != nil {
		cl.signalRemote(j, r, sig)
	}
}

// remoteExited records how rank r, started by a node agent, ended.
func (j *running) remoteExited(r int, err error) {
	j.exitErr[r] = err
	close(j.exited[r])
	j.exits.Done()
	if err != nil {
		j.fail(fmt.Errorf("rank %d of %s: %w", r, j.job.Kind, err))
	}
}

// fail reports a failure; the first one wins. While the watchdog handles a
// stall, failures are its consequences (the SIGQUIT exit status, closed
// connections, missing results) and are dropped: the stall reports itself.
func (j *running) fail(err error) {
	if j.stalling.Load() {
		return
	}
	j.report(err)
}

func (j *running) report(err error) {
	select {
	case j.failed <- err:
	default:
	}
}

func (j *running) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // listener closed: every rank has exited
		}
		j.serving.Add(1)
		go func() { defer j.serving.Done(); j.serve(c) }()
	}
}

// A connection presents its hello within helloTimeout and helloBytes, or
// it is refused: until then it may be anybody on the bootstrap network.
const (
	helloTimeout = 10 * time.Second
	helloBytes   = 64 << 10
)

var errHelloTooLong = fmt.Errorf("no hello in its first %d bytes", helloBytes)

// refuse says on the job's stderr that a connection did not present
// itself as one of the job's ranks (serve then closes it): a stranger on the bootstrap
// network (a port scan, another job, a hostile process) neither joins nor
// ends the job. A rank of the job that cannot present itself exits, and
// its exit fails the job.
func (j *running) refuse(c net.Conn, why string) {
	fmt.Fprintf(j.stderr, "gotune launch %s: refused a bootstrap connection from %s: %s\n", j.job.Kind, c.RemoteAddr(), why)
}

// hold counts c among the connections that have not presented their
// hello, unless the job's bootstrap has closed (then c is closed).
func (j *running) hold(c net.Conn) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.strangers == nil {
		return false
	}
	j.strangers[c] = true
	return true
}

// admitted takes c off that list.
func (j *running) admitted(c net.Conn) {
	j.mu.Lock()
	delete(j.strangers, c)
	j.mu.Unlock()
}

// closeStrangers closes every connection still without a hello once the
// listeners are closed: a silent stranger must not hold Run's return.
func (j *running) closeStrangers() {
	j.mu.Lock()
	defer j.mu.Unlock()
	for c := range j.strangers {
		c.Close()
	}
	j.strangers = nil
}

func (j *running) serve(c net.Conn) {
	defer c.Close()
	if !j.hold(c) {
		return
	}
	defer j.admitted(c)
	in := &io.LimitedReader{R: c, N: helloBytes}
	rc := &rankConn{enc: json.NewEncoder(c), dec: json.NewDecoder(bufio.NewReader(in))}
	var hello message
	c.SetReadDeadline(time.Now().Add(helloTimeout))
	if err := rc.dec.Decode(&hello); err != nil || hello.Op != "hello" {
		if in.N == 0 {
			err = errHelloTooLong
		}
		j.refuse(c, fmt.Sprintf("no hello (op %q): %v", hello.Op, err))
		return
	}
	if subtle.ConstantTimeCompare([]byte(hello.Token), []byte(j.token)) != 1 {
		j.refuse(c, fmt.Sprintf("wrong job token (claims rank %d)", hello.Rank))
		return
	}
	if hello.Rank < 0 || hello.Rank >= j.size {
		j.fail(fmt.Errorf("launch %s: a bootstrap connection with the job's token claims rank %d of %d", j.job.Kind, hello.Rank, j.size))
		return
	}
	in.N = math.MaxInt64
	c.SetReadDeadline(time.Time{})
	j.admitted(c)
	r := hello.Rank
	j.mu.Lock()
	if j.local[r] == nil && hello.PID > 0 {
		j.pidOf[r] = hello.PID // a node agent's rank: its pid on its node
	}
	if j.conns[r] != nil {
		j.mu.Unlock()
		j.fail(fmt.Errorf("launch %s: rank %d connected twice", j.job.Kind, r))
		return
	}
	j.conns[r] = rc
	all := true
	for _, x := range j.conns {
		all = all && x != nil
	}
	j.mu.Unlock()
	if all {
		sp := &spec{Job: j.job, PIDs: j.pids(), ShmPath: j.shmPath, Hosts: j.hosts, Addrs: j.addrs}
		for _, x := range j.conns {
			if err := x.enc.Encode(message{Op: "spec", Spec: sp}); err != nil {
				j.fail(fmt.Errorf("launch %s: send spec: %w", j.job.Kind, err))
			}
		}
	}
	for {
		var m message
		if err := rc.dec.Decode(&m); err != nil {
			// The connection ends with the rank. If it said nothing, its
			// peers may wait for it forever: fail the job now, with the
			// exit status if there is one (it says more than the socket).
			j.mu.Lock()
			silent := !j.reported[r]
			j.mu.Unlock()
			if silent {
				<-j.exited[r]
				if e := j.exitErr[r]; e != nil {
					j.fail(fmt.Errorf("rank %d of %s: %w", r, j.job.Kind, exitError(e)))
				} else {
					j.fail(fmt.Errorf("rank %d of %s closed its bootstrap connection without a result", r, j.job.Kind))
				}
			}
			return
		}
		switch m.Op {
		case "barrier":
			if first := j.barrier(); first && j.hooks.Ready != nil {
				j.hooks.Ready(j.pids())
			}
		case "allgather":
			j.allgather(r, m.Blob)
		case "result":
			j.mu.Lock()
			if j.reported[r] {
				j.mu.Unlock()
				j.fail(fmt.Errorf("launch %s: rank %d reported twice", j.job.Kind, r))
				return
			}
			j.results[r] = m.Result
			j.reported[r] = true
			j.finished++
			if j.finished == j.size {
				close(j.doneCh)
			}
			j.mu.Unlock()
		case "error":
			// Record the cause before acknowledging: the rank exits only
			// after the ack, so its exit status never hides the cause.
			j.mu.Lock()
			j.reported[r] = true
			j.mu.Unlock()
			err := fmt.Errorf("rank %d of %s: %s", r, j.job.Kind, m.Error)
			if m.NotSupported {
				err = &sys.NotSupportedError{What: fmt.Sprintf("rank %d of %s", r, j.job.Kind), Reason: m.Error}
			}
			j.fail(err)
			rc.enc.Encode(message{Op: "ack"})
			return
		default:
			j.fail(fmt.Errorf("launch %s: rank %d sent unknown op %q", j.job.Kind, r, m.Op))
			return
		}
	}
}

// barrier counts a rank in; the last one in releases everybody. It
// reports whether this call completed the job's first barrier (every rank
// has mapped the segment).
func (j *running) barrier() (first bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.waiting++
	if j.waiting < j.size {
		return false
	}
	j.waiting = 0
	j.barriers++
	if j.barriers == 1 && j.shmPath != "" {
		os.Remove(j.shmPath) // everyone has it mapped: the name has done its job
	}
	for r, x := range j.conns {
		if err := x.enc.Encode(message{Op: "go"}); err != nil {
			j.fail(fmt.Errorf("launch %s: release rank %d from barrier: %w", j.job.Kind, r, err))
		}
	}
	return j.barriers == 1
}

// allgather records rank r's blob; the last rank in sends every rank all
// of them.
func (j *running) allgather(r int, blob []byte) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.gathered == nil {
		j.gathered = make([][]byte, j.size)
	}
	if blob == nil {
		blob = []byte{} // present, if empty
	}
	if j.gathered[r] != nil {
		j.fail(fmt.Errorf("launch %s: rank %d joined an allgather twice", j.job.Kind, r))
		return
	}
	j.gathered[r] = blob
	j.gathers++
	if j.gathers < j.size {
		return
	}
	all := j.gathered
	j.gathered, j.gathers = nil, 0
	for p, x := range j.conns {
		if err := x.enc.Encode(message{Op: "gathered", Blobs: all}); err != nil {
			j.fail(fmt.Errorf("launch %s: allgather to rank %d: %w", j.job.Kind, p, err))
		}
	}
}

// syncWriter serialises writes from the ranks' output copiers. exec copies
// a non-file writer's input in one goroutine per command, and they would
// race on a shared writer; an *os.File is handed to the children directly.
func syncWriter(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return w
	}
	return &lockedWriter{w: w}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("launch: job token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// StaleSegments lists the POSIX segments whose launcher no longer exists
// (a launcher killed between creating and unlinking one): a live
// launcher's segments, another job's on the same node, are not stale.
func StaleSegments() []string {
	entries, err := os.ReadDir(ShmDir)
	if err != nil {
		return nil
	}
	var stale []string
	for _, e := range entries {
		if pid, ok := SegmentLauncher(e.Name()); ok && sys.ProcessGone(pid) {
			stale = append(stale, filepath.Join(ShmDir, e.Name()))
		}
	}
	return stale
}

// SegmentLauncher is the pid of the launcher that created the POSIX
// segment named name (ShmPrefix, the pid, a dash, the job's token); false
// for a name of another form.
func SegmentLauncher(name string) (pid int, ok bool) {
	rest, ok := strings.CutPrefix(name, ShmPrefix)
	if !ok {
		return 0, false
	}
	pidStr, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(pidStr)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// bootDirPrefix starts the name of a launcher's bootstrap directory in
// the temporary directory, followed by the launcher's pid and a dash.
const bootDirPrefix = "gotune-boot-"

// pidDirKinds name the temporary directories and files gotune makes with
// its pid in the name (gotune-KIND-PID-...): a launcher's bootstrap, the
// scratch of gotune stacks and anchors, of a sweep's stack tuning and of
// gotune check, and the reference benchmark's report files.
var pidDirKinds = []string{"boot", "stacks", "anchor", "stack", "check"}

// TempDir makes a temporary directory named for kind (one of pidDirKinds)
// and this process, so that the next launch on the node removes it if the
// process is killed before it can.
func TempDir(kind string) (string, error) {
	return os.MkdirTemp("", tempPrefix(kind))
}

// TempFile is TempDir's file: created, open, named for kind and this
// process.
func TempFile(kind string) (*os.File, error) {
	return os.CreateTemp("", tempPrefix(kind))
}

func tempPrefix(kind string) string { return "gotune-" + kind + "-" + strconv.Itoa(os.Getpid()) + "-" }

// RemoveStaleBootDirs deletes the temporary directories and files
// (TempDir, TempFile) of gotune processes that no longer exist (killed
// before they could remove their own) and returns the paths removed.
func RemoveStaleBootDirs() []string {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return nil
	}
	var removed []string
	for _, e := range entries {
		for _, kind := range pidDirKinds {
			name, ok := strings.CutPrefix(e.Name(), "gotune-"+kind+"-")
			if !ok {
				continue
			}
			pidStr, _, withPID := strings.Cut(name, "-") // an older gotune's name has no pid
			if pid, err := strconv.Atoi(pidStr); withPID && err == nil && pid > 0 && sys.ProcessGone(pid) {
				path := filepath.Join(os.TempDir(), e.Name())
				if os.RemoveAll(path) == nil {
					removed = append(removed, path)
				}
			}
		}
	}
	return removed
}

// RemoveStaleSegments deletes the StaleSegments and returns the paths
// removed.
func RemoveStaleSegments() []string {
	var removed []string
	for _, p := range StaleSegments() {
		if os.Remove(p) == nil {
			removed = append(removed, p)
		}
	}
	return removed
}
