package mpistack

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/sys"
)

// UCX is a UCX configuration measured through ucx_perftest's UCP tag tests,
// a server and a client process on this host.
type UCX struct {
	Name     string // label (default "ucx")
	Perftest string // the tool (default "ucx_perftest", Debian's ucx-utils)
	// Env is added to both processes' environment: UCX_TLS, UCX_RNDV_THRESH
	// and the like, or UCX_CONFIG_DIR naming the directory of a tuned
	// ucx.conf, which UCX 1.13 then loads as a file.
	Env []string
	// CPUs pins the server and the client, one core each (nil: the first
	// two this process may use, as bench.DefaultCPUs).
	CPUs []int
}

// ucxTests maps bench patterns onto ucx_perftest's tests and the column of
// its CSV that is the pattern's metric: tag_lat is a ping-pong reporting
// half the round trip (as OSU); tag_bw streams sends with at most -O
// outstanding (the window). UCX has no bidirectional tag test.
var ucxTests = map[bench.Pattern]struct{ test, column string }{
	bench.Latency:   {"tag_lat", "overall_lat"},
	bench.Bandwidth: {"tag_bw", "overall_bw"},
	bench.MsgRate:   {"tag_bw", "overall_mr"},
}

// RunUCX measures spec through ucx_perftest: for every size, Reps separate
// runs, each a fresh server (pinned to CPUs[0]) and client (CPUs[1]) that
// exchange addresses over a free TCP port on 127.0.0.1 and then move the
// messages over whatever UCX picks (UCX_TLS in Env), one value per run
// from the client's final report (-f -v: CSV). The result has one point per
// size, percentiles from those values (UCX reports no per-iteration
// values), in bench's units: us for latency (half the round trip), MB/s as
// 10^6 bytes (UCX prints MiB/s), msg/s.
//
// Of spec it uses Pattern (latency, bw, msgrate), Sizes, Reps (0:
// bench.DefaultReps), Iters and Warmup (0: OSU's counts; -n and -w),
// Window (0: bench.DefaultWindow; -O, bandwidth and message rate only) and
// CPUs (for u.CPUs). A run still going at ctx's deadline is ErrHang; a
// missing ucx_perftest is sys.ErrNotSupported ("ucx").
func RunUCX(ctx context.Context, u UCX, spec bench.Spec) (bench.Result, error) {
	name := cmp.Or(u.Name, "ucx")
	fail := func(err error) (bench.Result, error) {
		return bench.Result{}, fmt.Errorf("run ucx_perftest for %s: %w", name, err)
	}
	t, ok := ucxTests[spec.Pattern]
	if !ok {
		return fail(fmt.Errorf("ucx_perftest has no test for pattern %q (want latency, bw or msgrate)", spec.Pattern))
	}
	spec, err := resolve(Stack{Name: name}, spec)
	if err != nil {
		return fail(err)
	}
	if spec.Validate {
		return fail(errors.New("ucx_perftest does not validate payloads"))
	}
	cpus := u.CPUs
	if cpus == nil {
		cpus = bench.DefaultCPUs(2)
	}
	if len(cpus) != 2 {
		return fail(fmt.Errorf("want 2 CPUs for server and client, have %v", cpus))
	}
	tool, err := exec.LookPath(cmp.Or(u.Perftest, "ucx_perftest"))
	if err != nil {
		return fail(sys.NotSupported("ucx", cmp.Or(u.Perftest, "ucx_perftest")+" not found in PATH (Debian: ucx-utils)", err))
	}
	prov := hostinfo.Collect("/")
	if v := ucxVersion(ctx); v != "" {
		prov.Libraries = map[string]string{"ucx": v}
	}
	spec.CPUs = cpus
	res := bench.Result{Label: name, Provenance: prov, Spec: spec}
	for _, size := range spec.Sizes {
		iters, warmup := bench.DefaultIters(spec.Pattern, size)
		iters, warmup = cmp.Or(spec.Iters, iters), cmp.Or(spec.Warmup, warmup)
		args := []string{"-t", t.test, "-s", strconv.Itoa(size), "-n", strconv.Itoa(iters), "-w", strconv.Itoa(warmup), "-f", "-v"}
		if spec.Pattern != bench.Latency {
			args = append(args, "-O", strconv.Itoa(spec.Window))
		}
		samples := make([]float64, 0, spec.Reps)
		for rep := range spec.Reps {
			v, err := perftestOnce(ctx, tool, u.Env, cpus, args, t.column)
			if err != nil {
				return fail(fmt.Errorf("%s size %d repetition %d: %w", t.test, size, rep, err))
			}
			if t.column == "overall_bw" {
				v = v * (1 << 20) / 1e6 // ucx_perftest's MB is 2^20 bytes
			}
			samples = append(samples, v)
		}
		p := bench.Summarize(size, spec.Pattern.Unit(), samples, nil)
		p.Iters, p.Warmup = iters, warmup
		res.Points = append(res.Points, p)
	}
	return res, nil
}

// perftestOnce runs one server and one client and returns the client's
// value in column. A port taken between choosing and binding it makes the
// server fail: that is retried on another port.
func perftestOnce(ctx context.Context, tool string, env []string, cpus []int, args []string, column string) (float64, error) {
	var err error
	for range 3 {
		var out []byte
		out, err = perftestPair(ctx, tool, env, cpus, args)
		if errors.Is(err, errPortTaken) {
			continue
		}
		if err != nil {
			return 0, err
		}
		return parsePerftest(out, column)
	}
	return 0, err
}

var errPortTaken = errors.New("the server could not listen on its port")

// perftestPair starts the server, waits until it listens, runs the client
// and returns the client's stdout. Both are killed with their process
// groups on return, whatever happened.
func perftestPair(ctx context.Context, tool string, env []string, cpus []int, args []string) ([]byte, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	var srvOut bytes.Buffer
	srv := perftestCommand(ctx, tool, env, "-p", strconv.Itoa(port), "-c", strconv.Itoa(cpus[0]))
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("start server: %w", err)
	}
	srvDone := make(chan struct{})
	var srvErr error
	go func() { srvErr = srv.Wait(); close(srvDone) }()
	defer func() {
		_ = sys.KillGroup(srv.Process.Pid, syscall.SIGKILL)
		<-srvDone
	}()
	if err := waitListening(ctx, port, srvDone); err != nil {
		if errors.Is(err, errServerExited) {
			<-srvDone
			err = fmt.Errorf("%w (%v)", err, srvErr)
		}
		if errors.Is(err, errServerExited) && strings.Contains(srvOut.String(), "in use") {
			return nil, errPortTaken
		}
		return nil, hangOr(ctx, fmt.Errorf("server on port %d: %w%s", port, err, indentOutput(tail(srvOut.Bytes()))))
	}
	var cliOut, cliErr bytes.Buffer
	cli := perftestCommand(ctx, tool, env, append([]string{"127.0.0.1", "-p", strconv.Itoa(port), "-c", strconv.Itoa(cpus[1])}, args...)...)
	cli.Stdout, cli.Stderr = &cliOut, &cliErr
	if err := runGroup(cli); err != nil {
		return nil, hangOr(ctx, fmt.Errorf("%s: %w%s%s", strings.Join(cli.Args, " "), err,
			indentOutput(tail(cliErr.Bytes())), indentOutput(tail(srvOut.Bytes()))))
	}
	return cliOut.Bytes(), nil
}

// hangOr marks err as a hang when ctx's deadline ended the run.
func hangOr(ctx context.Context, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w (%w): %w", ErrHang, ctx.Err(), err)
	}
	return err
}

// perftestCommand prepares ucx_perftest as launcherCommand does a launcher.
func perftestCommand(ctx context.Context, tool string, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, tool, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return sys.KillGroup(cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// freePort returns a TCP port nobody listens on now (the kernel's choice).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var errServerExited = errors.New("exited before listening")

// waitListening returns once a socket listens on port: the server reports
// readiness neither on a pipe (its stdout is block-buffered there) nor in a
// way a probing connection would leave alone (it serves the first one).
func waitListening(ctx context.Context, port int, exited <-chan struct{}) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := listening(port)
		if err != nil || ok {
			return err
		}
		select {
		case <-exited:
			return errServerExited
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// listening reports whether /proc/net/tcp or tcp6 lists a listening socket
// on port.
func listening(port int) (bool, error) {
	suffix := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			// sl local_address rem_address st ...; st 0A is LISTEN
			f := strings.Fields(sc.Text())
			if len(f) > 3 && strings.HasSuffix(f[1], suffix) && f[3] == "0A" {
				return true, nil
			}
		}
	}
	return false, nil
}

// parsePerftest reads the value in column from ucx_perftest -f -v's
// output: a CSV header line starting "iterations," and one line of values
// (the rest of the output is a description box, which is skipped).
func parsePerftest(out []byte, column string) (float64, error) {
	lines := strings.Split(string(out), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(strings.TrimSpace(l), "iterations,") {
			continue
		}
		header := strings.Split(strings.TrimSpace(l), ",")
		// UCX's own log lines ("[1732611234.123456] [host:pid:0] ... UCX
		// WARN ...") may land between the header and its values.
		next := i + 1
		for next < len(lines) && ucxLogLine.MatchString(lines[next]) {
			next++
		}
		if next >= len(lines) || strings.TrimSpace(lines[next]) == "" {
			return 0, fmt.Errorf("ucx_perftest output: CSV header without values: %q", l)
		}
		values := strings.Split(strings.TrimSpace(lines[next]), ",")
		if len(values) != len(header) {
			return 0, fmt.Errorf("ucx_perftest output: %d values for %d columns: %q", len(values), len(header), lines[next])
		}
		for j, h := range header {
			if h == column {
				v, err := measurement(strings.TrimSpace(values[j]))
				if err != nil {
					return 0, fmt.Errorf("ucx_perftest output: %s: %w", column, err)
				}
				return v, nil
			}
		}
		return 0, fmt.Errorf("ucx_perftest output has no column %s: %q", column, l)
	}
	return 0, fmt.Errorf("ucx_perftest output has no CSV result line:%s", indentOutput(tail(out)))
}

var ucxVersionLine = regexp.MustCompile(`(?m)^# Version (\S+)`)

// ucxLogLine matches a line of UCX's own log: a bracketed timestamp, then
// the bracketed host and process.
var ucxLogLine = regexp.MustCompile(`^\s*\[\d+\.\d+\]\s+\[[^\]]*\]`)

// ucxVersion is the UCX version ucx_info reports, or "" without it.
func ucxVersion(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "ucx_info", "-v").Output()
	if m := ucxVersionLine.FindSubmatch(out); err == nil && m != nil {
		return string(m[1])
	}
	return ""
}
