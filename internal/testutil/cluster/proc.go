package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stat reads a process's identity from /proc/PID/stat; a zombie counts as
// gone (it has exited; only its parent's wait is missing).
func stat(pid int) (Proc, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Proc{}, err
	}
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after its last ')'. Field 3 is the state, 22 the start.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 20 {
		return Proc{}, fmt.Errorf("/proc/%d/stat: unexpected %q", pid, b)
	}
	if f[0] == "Z" || f[0] == "X" {
		return Proc{}, fmt.Errorf("process %d: exited", pid)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return Proc{}, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return Proc{PID: pid, Start: start}, nil
}

func self() (Proc, error) { return stat(os.Getpid()) }

// alive reports whether p still runs (the same process, not a new one
// with its PID).
func alive(p Proc) bool {
	if p.PID <= 0 {
		return false
	}
	q, err := stat(p.PID)
	return err == nil && q.Start == p.Start
}

// stop ends p: SIGTERM, then SIGKILL if it is still there after a grace
// period, and waits (polling /proc, with a deadline) until it is gone.
func stop(p Proc) error {
	for _, s := range []struct {
		sig   os.Signal
		grace time.Duration
	}{{syscall.SIGTERM, 5 * time.Second}, {syscall.SIGKILL, 5 * time.Second}} {
		if !alive(p) {
			return nil
		}
		if proc, err := os.FindProcess(p.PID); err == nil {
			_ = proc.Signal(s.sig)
		}
		if waitFor(s.grace, func() bool { return !alive(p) }) {
			return nil
		}
	}
	return fmt.Errorf("process %d survived SIGKILL", p.PID)
}

// waitFor polls cond every 20 ms until it holds (true) or d has passed.
func waitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// spawn runs f on one OS thread that never exits. A parent-death signal
// fires when the thread that forked the child exits, not the process; Go
// may end a thread (one a goroutine locked and left), so daemons are
// forked from this thread, which lives as long as the process.
var spawnOnce sync.Once
var spawnq chan func()

func spawn(f func()) {
	spawnOnce.Do(func() {
		spawnq = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread stays
			for f := range spawnq {
				f()
			}
		}()
	})
	done := make(chan struct{})
	spawnq <- func() { f(); close(done) }
	<-done
}

// startDaemon starts argv as a daemon of the cluster, its output in
// Dir/log/<name>.log, and records it (Down stops it). Unless the cluster is
// detached, the daemon is killed when this process dies.
func (c *Cluster) startDaemon(name string, argv []string, env []string) (Daemon, error) {
	d := Daemon{Name: name, Log: filepath.Join(c.Dir, "log", name+".log")}
	f, err := os.OpenFile(d.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return d, fmt.Errorf("start %s: %w", name, err)
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = c.Dir
	cmd.Env = append(os.Environ(), env...)
	if c.Owner.PID == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	spawn(func() { err = cmd.Start() })
	if err != nil {
		return d, fmt.Errorf("start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }() // reaped, so that stop sees it gone
	d.Proc, err = stat(cmd.Process.Pid)
	if err != nil {
		// It exited at once: its log says why.
		return d, fmt.Errorf("start %s: exited at once: %s", name, tail(d.Log))
	}
	c.mu.Lock()
	c.Daemons = append(c.Daemons, d)
	c.mu.Unlock()
	return d, c.save()
}

// stopDaemons stops (in reverse order of start) the daemons whose name
// has prefix, and forgets them.
func (c *Cluster) stopDaemons(prefix string) error {
	c.mu.Lock()
	var ds, keep []Daemon
	for _, d := range c.Daemons {
		if strings.HasPrefix(d.Name, prefix) {
			ds = append(ds, d)
		} else {
			keep = append(keep, d)
		}
	}
	c.mu.Unlock()
	var errs []error
	for i := len(ds) - 1; i >= 0; i-- {
		if err := stop(ds[i].Proc); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", ds[i].Name, err))
		}
	}
	c.mu.Lock()
	c.Daemons = keep
	c.mu.Unlock()
	if err := c.save(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// tail returns the last lines of a log file, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return path + ":\n\t" + strings.Join(lines, "\n\t")
}
