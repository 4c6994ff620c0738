package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// A Slurm cluster on two hosts: srun places tasks on both with Slurm's
// variables, and scancel kills a hung step on every host.
func TestSlurm(t *testing.T) {
	c := Hosts(t, 2)
	s := StartSlurm(t, c)
	h1, h2 := c.Hosts[0].Name, c.Hosts[1].Name

	t.Run("srun", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			want []string // sorted lines: host procid nodeid localid ntasks tasks-per-node
		}{
			{[]string{"-N2", "-n2"}, []string{
				h1 + " 0 0 0 2 1(x2)",
				h2 + " 1 1 0 2 1(x2)",
			}},
			{[]string{"-N2", "-n4", "--overcommit"}, []string{
				h1 + " 0 0 0 4 2(x2)",
				h1 + " 1 0 1 4 2(x2)",
				h2 + " 2 1 0 4 2(x2)",
				h2 + " 3 1 1 4 2(x2)",
			}},
		} {
			t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				args := append(tc.args, "sh", "-c",
					`echo $(hostname) $SLURM_PROCID $SLURM_NODEID $SLURM_LOCALID $SLURM_NTASKS $SLURM_STEP_TASKS_PER_NODE`)
				out, err := s.Srun(ctx, args...).Output() // srun's own messages are on stderr
				if err != nil {
					t.Fatalf("srun %s: %v: %s", strings.Join(args, " "), err, stderrOf(err))
				}
				got := strings.Split(strings.TrimSpace(string(out)), "\n")
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Errorf("srun %s:\ngot  %q\nwant %q", strings.Join(tc.args, " "), got, tc.want)
				}
			})
		}
	})

	// The environment srun is started with reaches the tasks (gotune's
	// ranks find the rendezvous directory by it).
	t.Run("environment", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := s.Srun(ctx, "-N2", "-n2", "sh", "-c", `echo $GOTUNE_RENDEZVOUS`)
		cmd.Env = append(cmd.Env, "GOTUNE_RENDEZVOUS=/tmp/rv-test")
		out, err := cmd.Output()
		if got := strings.Fields(string(out)); err != nil || !slices.Equal(got, []string{"/tmp/rv-test", "/tmp/rv-test"}) {
			t.Errorf("srun environment: %q (%v %s)", out, err, stderrOf(err))
		}
	})

	t.Run("scancel kills a hung step", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		name := fmt.Sprintf("gotune-hang-%d", os.Getpid())
		srun := s.Srun(ctx, "-N2", "-n2", "-J", name, "sh", "-c", hangScript)
		pids, hosts, stderr := startHung(t, srun, 2, "task")
		if !hosts[h1] || !hosts[h2] {
			t.Errorf("tasks on %v, want %s and %s", hosts, h1, h2)
		}
		if out, err := s.Command(ctx, "scancel", "--name", name).CombinedOutput(); err != nil {
			t.Fatalf("scancel: %v: %s", err, out)
		}
		if err := srun.Wait(); err == nil {
			t.Errorf("srun of a cancelled step exited 0")
		}
		if ctx.Err() != nil {
			t.Fatalf("srun did not end after scancel: %s", stderr.String())
		}
		for _, pid := range pids {
			if !waitFor(30*time.Second, func() bool { _, err := stat(pid); return err != nil }) {
				t.Errorf("task %d still runs after scancel", pid)
			}
		}
		out, err := s.Command(ctx, "squeue", "-h", "--name", name, "-t", "running").Output()
		if err != nil || len(strings.TrimSpace(string(out))) > 0 {
			t.Errorf("squeue after scancel: %q (%v)", out, err)
		}
	})
}

// stderrOf is what a command run by Output wrote to stderr.
func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
