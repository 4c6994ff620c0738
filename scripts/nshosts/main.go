// Command nshosts brings up network namespaces as hosts on this machine
// (internal/testutil/cluster) for people and measurement scripts, and
// leaves them up until nshosts down: run gotune's ranks between them by
// hand through mpirun, mpiexec or srun. Needs root. docs/testing.md
// says how.
//
//	nshosts up [-slurm=auto|yes|no] [-cpus N] [-slot K] N   N hosts (and Slurm on them)
//	nshosts list                                          the clusters, their hosts and owners
//	nshosts run [-slot K] HOST CMD [ARG...]               run CMD on HOST (name, address, index, root)
//	nshosts mpirun-args [-slot K]                         mpirun's arguments, shell-quoted
//	nshosts mpiexec-args [-slot K]                        MPICH mpiexec's arguments, shell-quoted
//	nshosts srun-env [-slot K]                            export lines for srun, sinfo, scancel
//	nshosts iperf3 [-slot K] [-t SECS] SERVER CLIENT [IPERF3 CLIENT ARG...]
//	nshosts down [-slot K|-all]                           remove the detached cluster (and dead owners')
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gotune/gotune/internal/testutil/cluster"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, true)
	stop()
	os.Exit(code)
}

const usage = `usage: nshosts COMMAND [FLAGS] [ARGS]
  up [-slurm=auto|yes|no] [-cpus N] [-slot K] N   bring up N namespace-hosts (and Slurm on them)
  list                                          the clusters, their hosts and owners
  run [-slot K] HOST CMD [ARG...]               run CMD on HOST (name, address, index from 1, or root)
  mpirun-args [-slot K]                         Open MPI mpirun's arguments for the hosts, shell-quoted
  mpiexec-args [-slot K]                        MPICH mpiexec's arguments for the hosts, shell-quoted
  srun-env [-slot K]                            export lines for srun, sinfo, squeue, scancel
  iperf3 [-slot K] [-t SECS] SERVER CLIENT [ARG...]   iperf3 from CLIENT to SERVER, Gbit/s
  down [-slot K|-all]                           remove the detached cluster (slot K, every one with -all) and dead owners'
`

// cli runs one command; detach is false only in the tests, whose clusters
// die with them.
func cli(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, detach bool) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	fs := flag.NewFlagSet("nshosts "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	slot := fs.Int("slot", -1, "the cluster's slot (default: the only detached cluster; for up: the first free)")
	var err error
	switch args[0] {
	case "up":
		slurm := fs.String("slurm", "auto", "start Slurm on the hosts: auto (if installed), yes, no")
		cpus := fs.Int("cpus", 0, "CPUs each host offers (hostfile slots, Slurm's CPUs=); 0: this machine's")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		err = up(ctx, stdout, fs.Args(), *slot, *cpus, *slurm, detach)
	case "list":
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		err = list(stdout)
	case "down":
		all := fs.Bool("all", false, "every detached cluster (default: the only one, or -slot K)")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		err = down(stdout, *slot, *all)
	case "run":
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		return runOn(ctx, fs.Args(), *slot, stdin, stdout, stderr)
	case "mpirun-args", "mpiexec-args", "srun-env":
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		err = printFor(stdout, args[0], *slot)
	case "iperf3":
		secs := fs.Int("t", 10, "seconds")
		if fs.Parse(args[1:]) != nil {
			return 2
		}
		err = iperf(ctx, stdout, fs.Args(), *slot, *secs)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "nshosts: unknown command %q\n%s", args[0], usage)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "nshosts:", err)
		return 1
	}
	return 0
}

func up(ctx context.Context, w io.Writer, args []string, slot, cpus int, slurm string, detach bool) error {
	var n int
	if len(args) != 1 {
		return errors.New("up: want the number of hosts")
	}
	if _, err := fmt.Sscan(args[0], &n); err != nil {
		return fmt.Errorf("up: hosts %q: want a number", args[0])
	}
	switch slurm {
	case "auto", "yes", "no":
	default:
		return fmt.Errorf("up: -slurm=%q: want auto, yes or no", slurm)
	}
	if err := cluster.Available(); err != nil {
		return err
	}
	withSlurm := slurm == "yes"
	if slurm != "no" {
		if err := cluster.SlurmAvailable(); err == nil {
			withSlurm = true
		} else if slurm == "yes" {
			return err
		}
	}
	c, err := cluster.Up(ctx, cluster.Config{Hosts: n, CPUs: cpus, Slot: slot, Detach: detach})
	if err != nil {
		return err
	}
	if withSlurm {
		if _, err := c.StartSlurm(ctx); err != nil {
			if derr := c.Down(); derr != nil {
				err = fmt.Errorf("%w (and removing the hosts: %v)", err, derr)
			}
			return err
		}
	}
	describe(w, c, true)
	fmt.Fprintf(w, "next: nshosts run %s hostname; mpirun $(nshosts mpirun-args) -np 2 --map-by node hostname", c.Hosts[0].Name)
	if withSlurm {
		fmt.Fprint(w, "; eval $(nshosts srun-env) && srun -N2 -n2 hostname")
	}
	fmt.Fprintf(w, "; nshosts down\n")
	return nil
}

func describe(w io.Writer, c *cluster.Cluster, live bool) {
	owner := "detached (nshosts down removes it)"
	if c.Owner.PID != 0 {
		owner = fmt.Sprintf("process %d", c.Owner.PID)
		if !live {
			owner += " (dead: the next up or down removes it)"
		}
	}
	fmt.Fprintf(w, "cluster %d: %s, bridge %s, root %s, owner %s\n", c.Slot, c.Subnet, c.Bridge, c.Root, owner)
	for _, h := range c.Hosts {
		fmt.Fprintf(w, "  %-14s %s\n", h.Name, h.Addr)
	}
	if c.Slurm != nil {
		fmt.Fprintf(w, "  slurm: SLURM_CONF=%s (controller %s at %s)\n", c.Slurm.Conf, c.Slurm.Controller, c.Root)
	}
}

func list(w io.Writer) error {
	cs, live, err := cluster.List()
	if err != nil {
		return err
	}
	if len(cs) == 0 {
		fmt.Fprintln(w, "no clusters (nshosts up N)")
	}
	for i, c := range cs {
		describe(w, c, live[i])
	}
	return nil
}

// pick finds the cluster: slot K, or the only detached one.
func pick(slot int) (*cluster.Cluster, error) {
	if slot >= 0 {
		return cluster.Load(slot)
	}
	cs, _, err := cluster.List()
	if err != nil {
		return nil, err
	}
	var det []*cluster.Cluster
	for _, c := range cs {
		if c.Owner.PID == 0 {
			det = append(det, c)
		}
	}
	switch len(det) {
	case 0:
		return nil, errors.New("no detached cluster (nshosts up N; or -slot K for a test's)")
	case 1:
		return det[0], nil
	}
	var slots []string
	for _, c := range det {
		slots = append(slots, fmt.Sprint(c.Slot))
	}
	return nil, fmt.Errorf("several detached clusters (slots %s): say -slot K", strings.Join(slots, ", "))
}

// down removes slot K, or every detached cluster with all, or the only
// detached one; and the clusters of dead owners in any case. Several
// detached clusters without -slot or -all are an error: on a shared
// machine another person's may be among them.
func down(w io.Writer, slot int, all bool) error {
	cs, live, err := cluster.List()
	if err != nil {
		return err
	}
	if slot < 0 && !all {
		var det []string
		for _, c := range cs {
			if c.Owner.PID == 0 {
				det = append(det, fmt.Sprint(c.Slot))
			}
		}
		if len(det) > 1 {
			return fmt.Errorf("several detached clusters (slots %s): say -slot K or -all", strings.Join(det, ", "))
		}
	}
	var errs []error
	n := 0
	for i, c := range cs {
		dead := c.Owner.PID != 0 && !live[i]
		if slot >= 0 && c.Slot != slot && !dead {
			continue
		}
		if c.Owner.PID != 0 && live[i] {
			fmt.Fprintf(w, "cluster %d: left alone, process %d owns it\n", c.Slot, c.Owner.PID)
			continue
		}
		if err := c.Down(); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
		fmt.Fprintf(w, "cluster %d: removed\n", c.Slot)
	}
	if n == 0 && len(errs) == 0 {
		fmt.Fprintln(w, "nothing to remove")
	}
	return errors.Join(errs...)
}

func runOn(ctx context.Context, args []string, slot int, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 2 {
		fmt.Fprintln(stderr, "nshosts run: want HOST CMD [ARG...]")
		return 2
	}
	c, err := pick(slot)
	if err != nil {
		fmt.Fprintln(stderr, "nshosts:", err)
		return 1
	}
	h, err := c.Host(args[0])
	if err != nil {
		fmt.Fprintln(stderr, "nshosts:", err)
		return 1
	}
	cmd := h.Command(ctx, args[1], args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err = cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		if ee.ExitCode() < 0 {
			return 128 + 9 // killed by a signal
		}
		return ee.ExitCode()
	case err != nil:
		fmt.Fprintln(stderr, "nshosts:", err)
		return 127
	}
	return 0
}

func printFor(w io.Writer, what string, slot int) error {
	c, err := pick(slot)
	if err != nil {
		return err
	}
	switch what {
	case "mpirun-args":
		fmt.Fprintln(w, shellJoin(c.MpirunArgs()))
	case "mpiexec-args":
		fmt.Fprintln(w, shellJoin(c.MpiexecArgs()))
	case "srun-env":
		if c.Slurm == nil {
			return fmt.Errorf("cluster %d runs no Slurm (nshosts up -slurm=yes N)", c.Slot)
		}
		for _, kv := range c.Slurm.Env() {
			k, v, _ := strings.Cut(kv, "=")
			fmt.Fprintf(w, "export %s=%s\n", k, shellQuote(v))
		}
	}
	return nil
}

func iperf(ctx context.Context, w io.Writer, args []string, slot, secs int) error {
	if len(args) < 2 {
		return errors.New("iperf3: want SERVER CLIENT")
	}
	if err := cluster.IperfAvailable(); err != nil {
		return err
	}
	c, err := pick(slot)
	if err != nil {
		return err
	}
	r, err := c.Iperf3(ctx, args[0], args[1], secs, args[2:]...)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%s -> %s (%s): %.2f Gbit/s, %d retransmits, %.1f s\n", r.Client, r.Server, r.Target, r.BitsPerSecond/1e9, r.Retransmits, r.Seconds)
	return nil
}

func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// shellQuote quotes s for sh when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
