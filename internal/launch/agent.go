package launch

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gotune/gotune/internal/sys"
)

// envSegment tells a rank started by a node agent that its segment is the
// inherited memfd, whatever the spec's path says (that path is node 0's).
const envSegment = "GOTUNE_SEGMENT"

// Serve is the side of every launcher process but rank 0: it joins the
// coordinator and, while it is its node's agent, starts the ranks the
// coordinator places on this node, forwards their output, heartbeats and
// exit statuses, and signals or kills them when told. It returns when the
// coordinator says exit (nil) or is lost (an error); either way no rank it
// started is left running.
func Serve(ctx context.Context, cfg ClusterConfig) error {
	if err := cfg.defaults(); err != nil {
		return err
	}
	jctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	addr, token := cfg.Addr, cfg.Token
	if addr == "" {
		rv, err := readRendezvous(jctx, cfg.RendezvousFile)
		if err != nil {
			return err
		}
		addr, token = rv.Addr, rv.Token
	}
	conn, err := dialCoordinator(jctx, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("node agent: find own executable: %w", err)
	}
	ag := &agent{exe: exe, link: &agentLink{conn: conn, enc: json.NewEncoder(conn), dec: json.NewDecoder(bufio.NewReader(conn))},
		jobs: map[int]*agentJob{}}
	if err := ag.link.send(ctl{Op: "join", Token: token, LRank: cfg.LRank, Host: cfg.Host}); err != nil {
		return fmt.Errorf("node agent: join %s: %w", addr, err)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer ag.killAll()
	for {
		var m ctl
		if err := ag.link.dec.Decode(&m); err != nil {
			return fmt.Errorf("node agent (launcher rank %d on %s): lost the coordinator at %s: %w", cfg.LRank, cfg.Host, addr, err)
		}
		switch m.Op {
		case "start":
			ag.start(m)
		case "signal":
			ag.signal(m.Job, m.Rank, syscall.Signal(m.Signal))
		case "kill":
			ag.kill(m.Job)
		case "exit":
			return nil
		default:
			return fmt.Errorf("node agent: unknown op %q from the coordinator", m.Op)
		}
	}
}

// dialCoordinator connects, retrying while nobody listens yet (rank 0 may
// start later than the others) until ctx ends.
func dialCoordinator(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("node agent: connect to coordinator %s: %w", addr, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("node agent: coordinator %s never listened: %w", addr, err)
		case <-tick.C:
		}
	}
}

type agent struct {
	exe  string
	link *agentLink
	mu   sync.Mutex
	jobs map[int]*agentJob
}

type agentJob struct {
	pgid  int
	procs map[int]*os.Process
}

// start starts the ranks of one job as a process group of children, from a
// thread locked for their life (PR_SET_PDEATHSIG is per forking thread).
func (ag *agent) start(m ctl) {
	fail := func(err error) {
		for _, r := range m.Ranks {
			ag.link.send(ctl{Op: "exited", Job: m.Job, Rank: r, Status: err.Error()})
		}
	}
	hbFile, hb, err := newHeartbeats(m.Size)
	if err != nil {
		fail(err)
		return
	}
	extra := []*os.File{hbFile}
	if m.SegmentBytes > 0 {
		seg, err := sys.MemfdCreate("gotune-job", m.SegmentBytes)
		if err != nil {
			hbFile.Close()
			sys.Unmap(hb)
			fail(fmt.Errorf("segment: %w", err))
			return
		}
		extra = append(extra, seg)
	}
	job := &agentJob{procs: map[int]*os.Process{}}
	ag.mu.Lock()
	ag.jobs[m.Job] = job
	ag.mu.Unlock()
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		var exits sync.WaitGroup
		for _, r := range m.Ranks {
			out := &outputForwarder{link: ag.link, job: m.Job, rank: r}
			ag.mu.Lock()
			pgid := job.pgid
			ag.mu.Unlock()
			cmd := rankCommand(ag.exe, r, m.Size, m.Boot, m.Token, out, out, extra, pgid)
			cmd.Env = append(cmd.Env, envSegment+"=inherited")
			if err := cmd.Start(); err != nil {
				ag.link.send(ctl{Op: "exited", Job: m.Job, Rank: r, Status: fmt.Sprintf("start: %v", err)})
				continue
			}
			ag.mu.Lock()
			if job.pgid == 0 {
				job.pgid = cmd.Process.Pid
			}
			job.procs[r] = cmd.Process
			ag.mu.Unlock()
			ag.link.send(ctl{Op: "started", Job: m.Job, Rank: r, PID: cmd.Process.Pid})
			exits.Add(1)
			go func() {
				defer exits.Done()
				report := ctl{Op: "exited", Job: m.Job, Rank: r}
				if err := cmd.Wait(); err != nil {
					var k *KilledError
					if e := exitError(err); errors.As(e, &k) {
						report.Signal = int(k.Signal)
					} else {
						report.Status = e.Error()
					}
				}
				ag.link.send(report)
			}()
		}
		done := make(chan struct{})
		go func() { exits.Wait(); close(done) }()
		if m.Stall > 0 {
			ag.forwardBeats(m, hb, done)
		}
		<-done
		ag.mu.Lock()
		delete(ag.jobs, m.Job)
		ag.mu.Unlock()
		for _, f := range extra {
			f.Close()
		}
		sys.Unmap(hb)
	}()
}

// forwardBeats copies the ranks' heartbeats to the coordinator, whose
// watchdog reads them, at the watchdog's own pace.
func (ag *agent) forwardBeats(m ctl, hb []byte, done <-chan struct{}) {
	tick := time.NewTicker(max(m.Stall/8, 10*time.Millisecond))
	defer tick.Stop()
	last := make(map[int]uint64)
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		for _, r := range m.Ranks {
			if v := atomic.LoadUint64(heartbeatWord(hb, r)); v != last[r] {
				last[r] = v
				ag.link.send(ctl{Op: "beat", Job: m.Job, Rank: r, Beat: v})
			}
		}
	}
}

func (ag *agent) signal(id, r int, sig syscall.Signal) {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if j := ag.jobs[id]; j != nil && j.procs[r] != nil {
		j.procs[r].Signal(sig)
	}
}

func (ag *agent) kill(id int) {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if j := ag.jobs[id]; j != nil && j.pgid > 0 {
		sys.KillGroup(j.pgid, syscall.SIGKILL)
	}
}

func (ag *agent) killAll() {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	for _, j := range ag.jobs {
		if j.pgid > 0 {
			sys.KillGroup(j.pgid, syscall.SIGKILL)
		}
	}
}

// outputForwarder sends a rank's stdout and stderr to the coordinator.
type outputForwarder struct {
	link      *agentLink
	job, rank int
}

func (o *outputForwarder) Write(p []byte) (int, error) {
	if err := o.link.send(ctl{Op: "output", Job: o.job, Rank: o.rank, Data: p}); err != nil {
		return 0, err
	}
	return len(p), nil
}
