package launch

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/gotune/gotune/internal/sys"
)

// Heartbeats live in a small shared memfd, one cache line per rank, that
// the launcher hands every rank as its first extra file. A rank beats with
// one atomic add to its own line; the launcher reads the lines at a fraction
// of the stall deadline, so the line bounces between caches a few times per
// deadline, never per beat.
const (
	heartbeatFD   = 3 // first of ExtraFiles
	segmentFD     = 4 // second, when the job has a memfd segment
	heartbeatLine = 64
)

func heartbeatBytes(ranks int) int { return sys.RoundUp(ranks*heartbeatLine, sys.PageSize) }

func heartbeatWord(hb []byte, rank int) *uint64 {
	return (*uint64)(unsafe.Pointer(&hb[rank*heartbeatLine]))
}

// Beat tells the launcher's watchdog that this rank is making progress.
// It is cheap enough for a measuring loop: one uncontended atomic add.
func (r *Rank) Beat() { atomic.AddUint64(heartbeatWord(r.heartbeats, r.ID), 1) }

// StallError reports ranks whose heartbeats stopped for longer than the
// job's stall deadline: a hang, a livelock or a deadlock (in which every
// rank waits, so usually all of them are named). The launcher asked each
// for its stacks (SIGQUIT) before killing the job.
type StallError struct {
	Kind   string
	Ranks  []int          // the stalled ranks
	Quiet  time.Duration  // how long the first one's heartbeat had not moved
	Stacks map[int]string // by rank: what it printed after SIGQUIT (every goroutine's stack)
}

func (e *StallError) Error() string {
	return fmt.Sprintf("%s stalled: rank(s) %v without a heartbeat for %v", e.Kind, e.Ranks, e.Quiet.Round(time.Millisecond))
}

// stackGrace bounds how long a stalled rank gets to print its stacks.
const stackGrace = 5 * time.Second

// startupGrace is the least a rank gets before its first heartbeat: start-up
// is not the measured work, and on a loaded machine (or under the race
// detector) it can outlast a short stall deadline.
const startupGrace = 10 * time.Second

// forgiveAbsence moves the times the ranks' heartbeats last moved on by
// the time the launcher itself did not run between two ticks a period
// apart (prev, now): stopped by SIGSTOP or a debugger, a suspended job, a
// paused VM. That time is no rank's silence: a rank waiting on the
// launcher could not beat meanwhile. A gap under four periods, or under
// a second, is a loaded machine's late tick and changes nothing.
func forgiveAbsence(moved []time.Time, prev, now time.Time, period time.Duration) {
	gap := now.Sub(prev)
	if gap <= max(4*period, time.Second) {
		return
	}
	for r := range moved {
		moved[r] = moved[r].Add(gap - period)
	}
}

// watch polls the heartbeats until the job ends, and handles the first
// rank whose heartbeat stays still for j.job.Stall.
func (j *running) watch(hb []byte, stop <-chan struct{}) {
	period := max(j.job.Stall/8, time.Millisecond)
	tick := time.NewTicker(period)
	defer tick.Stop()
	last := make([]uint64, j.size)
	moved := make([]time.Time, j.size)
	now := time.Now()
	for r := range moved {
		moved[r] = now
	}
	for {
		prev := now
		select {
		case <-stop:
			return
		case now = <-tick.C:
		}
		forgiveAbsence(moved, prev, now, period)
		var stalled, waiting []int
		var quiet time.Duration
		for r := range j.size {
			select {
			case <-j.exited[r]:
				continue // gone: its exit status speaks for it
			default:
			}
			j.mu.Lock()
			done := j.reported[r]
			j.mu.Unlock()
			if done {
				continue // its result is in; shutting down may take a while
			}
			if v := atomic.LoadUint64(heartbeatWord(hb, r)); v != last[r] {
				last[r], moved[r] = v, now
				continue
			}
			limit := j.job.Stall
			if last[r] == 0 { // not started yet: exec, runtime start-up, bootstrap
				limit = max(limit, startupGrace)
			}
			switch q := now.Sub(moved[r]); {
			case q > limit:
				stalled = append(stalled, r)
				quiet = max(quiet, q)
			case q > limit/2 && last[r] != 0:
				waiting = append(waiting, r)
			}
		}
		if len(stalled) > 0 {
			// Ranks quiet for half the deadline are part of the same hang
			// (a deadlock stops every rank, the one that caused it
			// included): their stacks are taken too. A rank on another
			// node beats through its agent, up to an eighth of the
			// deadline late, so it may not have crossed the line yet.
			stalled = append(stalled, waiting...)
			slices.Sort(stalled)
			j.stall(stalled, quiet)
			return
		}
	}
}

// stall collects a stalled rank's stacks and fails the job with them. Other
// failures the dying rank causes (its exit status, its closed connection)
// are ignored from now on: the stall is the cause.
func (j *running) stall(ranks []int, quiet time.Duration) {
	j.stalling.Store(true) // from now on, fail ignores the stall's consequences
	for _, r := range ranks {
		j.signal(r, syscall.SIGQUIT) // best effort: the stack dump is a courtesy
	}
	grace := time.After(stackGrace)
	stacks := map[int]string{}
	for _, r := range ranks {
		end := stacksEnd(strconv.Itoa(r))
	wait:
		for !strings.Contains(j.stderrTail[r].String(), end) {
			select {
			case <-j.stderrTail[r].changed:
			case <-j.exited[r]:
				break wait
			case <-grace:
				break wait
			}
		}
		stacks[r] = j.stderrTail[r].String()
	}
	j.report(&StallError{Kind: j.job.Kind, Ranks: ranks, Quiet: quiet, Stacks: stacks})
}

// tailBuffer keeps the last max bytes written to it; changed gets a token
// after every write (the watchdog waits on it for a rank's stack dump).
type tailBuffer struct {
	mu      sync.Mutex
	max     int
	b       []byte
	changed chan struct{}
}

func newTailBuffer(max int) *tailBuffer {
	return &tailBuffer{max: max, changed: make(chan struct{}, 1)}
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default: // a token is already waiting
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func newHeartbeats(ranks int) (*os.File, []byte, error) {
	f, err := sys.MemfdCreate("gotune-heartbeats", heartbeatBytes(ranks))
	if err != nil {
		return nil, nil, fmt.Errorf("launch: heartbeats: %w", err)
	}
	hb, err := sys.MapShared(f.Fd(), heartbeatBytes(ranks))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("launch: heartbeats: %w", err)
	}
	return f, hb, nil
}
