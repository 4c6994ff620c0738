package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	nshosts "github.com/gotune/gotune/internal/testutil/cluster"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/transports"
)

// clusterPlan is a sweep plan with the host stages at one candidate each
// and one round: the inter-node stages between two hosts are the subject.
const clusterPlan = `budget: 5m
rounds: 1
max_rounds: 1
reps: 2
rep_bytes: 2M
window: 8
eager: [4K]
eager_sizes: "2K"
fragments: [64Kx16]
fragment_sizes: "1M"
depths: [64]
depth_sizes: "8"
confirm_sizes: ""
transports: [sm]
transport_sizes: "1M"
bisect: false
alloc_purges: []
probes: []
verify_sizes: ""
internode:
  transports: [tcp, ib]
  eager: [16K, 64K]
  conns: [1, 2]
  socket_buffers: [0, 4M]
  sizes: "8,64K,1M"
`

// launched is how a test starts the gotune command (this test binary,
// through cliEnv) once per launcher rank on two namespace-hosts.
type launched func(ctx context.Context, dir string, args ...string) *exec.Cmd

// TestAcrossHostsThroughLaunchers: a sweep started by Open MPI's mpirun and
// one started by Slurm's srun, each on two network-namespace hosts, emit a
// profile with an inter-node decision, and gotune bench --profile routes an
// inter-node pair by it with every payload checked.
func TestAcrossHostsThroughLaunchers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real launchers on namespace-hosts")
	}
	hosts := nshosts.Hosts(t, 2)
	names := []string{hosts.Hosts[0].Name, hosts.Hosts[1].Name}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cli := func(args []string) string { return cliEnv + "=" + strings.Join(args, "\x1f") }
	launchers := map[string]func(t *testing.T) launched{
		"mpirun": func(t *testing.T) launched {
			if _, err := exec.LookPath("mpirun"); err != nil {
				t.Skip("no mpirun")
			}
			return func(ctx context.Context, dir string, args ...string) *exec.Cmd {
				cmd := hosts.Mpirun(ctx, "-np", "2", "--map-by", "node", "-x", cliEnv, "--wdir", dir, exe)
				cmd.Env = append(os.Environ(), cli(args))
				// A hang ends through the launcher: mpirun kills its job on SIGTERM.
				cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
				cmd.WaitDelay = 30 * time.Second
				return cmd
			}
		},
		"srun": func(t *testing.T) launched {
			slurm := nshosts.StartSlurm(t, hosts)
			return func(ctx context.Context, dir string, args ...string) *exec.Cmd {
				job := filepath.Base(dir)
				cmd := slurm.Srun(ctx, "-N2", "-n2", "--job-name", job, "--chdir", dir, exe)
				cmd.Env = append(cmd.Env, cli(args))
				// A hang ends through the launcher: scancel, as a user would.
				cmd.Cancel = func() error { return slurm.Command(context.Background(), "scancel", "--name", job).Run() }
				cmd.WaitDelay = 30 * time.Second
				return cmd
			}
		},
	}
	for _, name := range []string{"mpirun", "srun"} {
		t.Run(name, func(t *testing.T) {
			start := launchers[name](t)
			dir := t.TempDir()
			plan := filepath.Join(dir, "cluster.yaml")
			if err := os.WriteFile(plan, []byte(clusterPlan), 0o644); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
			defer cancel()
			out, err := start(ctx, dir, "sweep", "--launcher", name, "--plan", plan, "--out", filepath.Join(dir, "results")).CombinedOutput()
			if err != nil {
				t.Fatalf("sweep through %s: %v\n%s", name, err, out)
			}
			paths, _ := filepath.Glob(filepath.Join(dir, "results", names[0], "*", "profile.yaml"))
			if len(paths) != 1 {
				t.Fatalf("profiles %v, want one under %s's results\n%s", paths, names[0], out)
			}
			p, err := profile.Load(paths[0])
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Scope.Hosts, names) {
				t.Errorf("scope.hosts %v, want %v", p.Scope.Hosts, names)
			}
			d, ok := p.Decisions[profile.Internode][profile.HostHost]
			if !ok || d.Ranges[0].Transport != "tcp" {
				t.Fatalf("inter-node decision %+v (present %v)\n%s", d, ok, out)
			}

			out, err = start(ctx, dir, "bench", "--launcher", name, "--profile", paths[0], "-p", "bw",
				"-s", "8,"+strconv.Itoa(d.EagerLimit)+","+strconv.Itoa(d.EagerLimit+1)+",1M", "--validate", "--reps", "2", "-q", "-f", "json").CombinedOutput()
			if err != nil {
				t.Fatalf("bench --profile through %s: %v\n%s", name, err, out)
			}
			if !strings.Contains(string(out), "on 2 node(s): "+strings.Join(names, ", ")) || !strings.Contains(string(out), `"label":"gotune auto"`) {
				t.Errorf("bench did not run auto across %v:\n%s", names, out)
			}
			// Each rank has a CPU of its own, whatever the launcher bound
			// the gotune processes to (mpirun binds each host's first to
			// core 0; the namespace-hosts share the machine's cores).
			if cpus := runCPUs(t, out); len(cpus) != 2 || cpus[0] == cpus[1] {
				t.Errorf("ranks pinned to %v through %s, want two distinct CPUs\n%s", cpus, name, out)
			}

			// A hang on the other node is caught by the watchdog, with the
			// stuck rank's stacks brought back by its node agent.
			out, err = start(ctx, dir, "bench", "--launcher", name, "-t", "tcp-hang", "-p", "latency", "-s", "8", "--stall", "3s", "-q").CombinedOutput()
			if err == nil || !strings.Contains(string(out), "stalled: rank(s)") || !strings.Contains(string(out), "(*hangingRecv).Recv") {
				t.Errorf("a rank hung on %s: exit %v, want a stall with its stacks:\n%s", names[1], err, out)
			}
		})
	}
}

func init() {
	// tcp, except that rank 1's 50th receive never returns: a hang on the
	// second node, in real rank processes started by a real launcher.
	base, _ := transports.Lookup("tcp")
	transports.Register(&transports.Driver{
		Name: "tcp-hang", Options: base.Options, SharedBytes: base.SharedBytes,
		Check: func(t transports.Transport, env transports.Env) error {
			if h, ok := t.(*hangingRecv); ok {
				t = h.Transport
			}
			return base.Check(t, env)
		},
		New: func(env transports.Env) (transports.Transport, error) {
			t, err := base.New(env)
			if err != nil || env.Rank != 1 {
				return t, err
			}
			return &hangingRecv{Transport: t}, nil
		},
	})
}

type hangingRecv struct {
	transports.Transport
	n int
}

//go:noinline
func (h *hangingRecv) Recv(peer int, buf []byte) (int, error) {
	if h.n++; h.n == 50 {
		select {} // a goroutine blocked forever, as in a lost wake-up
	}
	return h.Transport.Recv(peer, buf)
}

// runCPUs is the CPUs of the run record in bench's JSON lines.
func runCPUs(t *testing.T, out []byte) []int {
	t.Helper()
	for _, line := range strings.Split(string(out), "\n") {
		var rec struct {
			Type string `json:"type"`
			Spec struct {
				CPUs []int `json:"cpus"`
			} `json:"spec"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Type == "run" {
			return rec.Spec.CPUs
		}
	}
	t.Fatalf("no run record in:\n%s", out)
	return nil
}
