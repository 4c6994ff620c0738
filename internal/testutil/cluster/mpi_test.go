package cluster

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/testutil"
)

// whereAmI prints a process's hostname and eth0's address.
const whereAmI = `echo $(hostname) $(ip -4 -o addr show dev eth0 | awk '{print $4}')`

// Open MPI's mpirun and MPICH's mpiexec start one process on each host
// (by the hostfile and the agent), and Open MPI's btl tcp carries a
// checked message between them.
func TestMPIAcrossHosts(t *testing.T) {
	c := Hosts(t, 2)
	var want []string
	for _, h := range c.Hosts {
		want = append(want, h.Name+" "+h.Addr+"/24")
	}
	for _, tc := range []struct {
		name       string
		capability string   // GOTUNE_REQUIRE's name
		need       []string // programs
		cmd        func(ctx context.Context, dir string) *exec.Cmd
		want       []string // lines, in any order
	}{
		{"openmpi hostname", "openmpi", []string{"mpirun"}, func(ctx context.Context, _ string) *exec.Cmd {
			return c.Mpirun(ctx, "-np", "2", "--map-by", "node", "sh", "-c", whereAmI)
		}, want},
		{"openmpi btl tcp", "openmpi", []string{"mpirun", "mpicc.openmpi"}, func(ctx context.Context, dir string) *exec.Cmd {
			prog := filepath.Join(dir, "pingpong")
			if out, err := exec.CommandContext(ctx, "mpicc.openmpi", "-O2", "-o", prog, filepath.Join("testdata", "pingpong.c")).CombinedOutput(); err != nil {
				t.Fatalf("mpicc: %v: %s", err, out)
			}
			return c.Mpirun(ctx, "-np", "2", "--map-by", "node", "--mca", "pml", "ob1", "--mca", "btl", "tcp,self", prog)
		}, []string{"rank 0 on " + c.Hosts[0].Name + ": 0 bad bytes", "rank 1 on " + c.Hosts[1].Name + ": 0 bad bytes"}},
		{"mpich hostname", "mpich", []string{"mpiexec.mpich"}, func(ctx context.Context, _ string) *exec.Cmd {
			return c.Mpiexec(ctx, "-n", "2", "-ppn", "1", "sh", "-c", whereAmI)
		}, want},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range tc.need {
				_, err := exec.LookPath(p)
				testutil.SkipUnless(t, tc.capability, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := tc.cmd(ctx, t.TempDir())
			var stderr strings.Builder
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", strings.Join(cmd.Args, " "), err, out, stderr.String())
			}
			got := strings.Split(strings.TrimSpace(string(out)), "\n")
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("%s:\ngot  %q\nwant %q\nstderr: %s", strings.Join(cmd.Args, " "), got, tc.want, stderr.String())
			}
		})
	}
}

// The agent refuses a host it does not know, as ssh would (exit 255).
func TestAgentUnknownHost(t *testing.T) {
	c := Hosts(t, 1)
	out, err := exec.Command(c.Agent(), "-x", "10.213.250.9", "hostname").CombinedOutput()
	want := fmt.Sprintf("gotune agent: no host 10.213.250.9 in cluster %d", c.Slot)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 255 || !strings.Contains(string(out), want) {
		t.Errorf("agent for an unknown host: %v: %q, want exit 255 and %q", err, out, want)
	}
	out, err = exec.Command(c.Agent(), "-x", c.Hosts[0].Addr, "echo", "'a  b'", "$(hostname)").CombinedOutput()
	if got, want := strings.TrimSpace(string(out)), "a  b "+c.Hosts[0].Name; err != nil || got != want {
		t.Errorf("agent runs a shell line on the host: %q (%v), want %q", got, err, want)
	}
}

// A hung job is killed through mpirun: SIGTERM to mpirun ends the ranks
// on every host (mpirun tells the orteds, which kill their children).
func TestMpirunKillsHungRanks(t *testing.T) {
	c := Hosts(t, 2)
	_, err := exec.LookPath("mpirun")
	testutil.SkipUnless(t, "openmpi", err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := c.Mpirun(ctx, "-np", "2", "--map-by", "node", "sh", "-c", hangScript)
	pids, hosts, _ := startHung(t, cmd, 2, "rank")
	if !hosts[c.Hosts[0].Name] || !hosts[c.Hosts[1].Name] {
		t.Errorf("ranks on %v, want both hosts", hosts)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err == nil {
		t.Errorf("mpirun of a terminated job exited 0")
	}
	for _, pid := range pids {
		if !waitFor(30*time.Second, func() bool { _, err := stat(pid); return err != nil }) {
			t.Errorf("rank %d still runs after mpirun got SIGTERM", pid)
		}
	}
}

// hangScript makes each task say "ready HOST PID", then hang (exec: the
// same PID).
const hangScript = `echo ready $(hostname) $$; exec sleep 3600`

// startHung starts cmd, whose n tasks (what: "rank", "task") run
// hangScript, and returns their PIDs, the hosts they run on and what cmd
// writes to stderr. It kills cmd and fails the test when they never all
// say they are ready.
func startHung(t *testing.T, cmd *exec.Cmd, n int, what string) ([]int, map[string]bool, *strings.Builder) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	hosts := map[string]bool{}
	sc := bufio.NewScanner(stdout)
	for len(pids) < n && sc.Scan() {
		var host string
		var pid int
		if _, err := fmt.Sscanf(sc.Text(), "ready %s %d", &host, &pid); err != nil {
			t.Fatalf("%s: %q: %v", what, sc.Text(), err)
		}
		pids = append(pids, pid)
		hosts[host] = true
	}
	if len(pids) < n {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("%ss never ready: %s", what, stderr.String())
	}
	return pids, hosts, stderr
}
