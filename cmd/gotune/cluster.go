package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/launchenv"
)

// Environment a user sets for a job started by an external launcher.
const (
	envRendezvous     = "GOTUNE_RENDEZVOUS"     // directory shared by every node
	envCoordinator    = "GOTUNE_COORDINATOR"    // host:port of launcher rank 0, instead of a rendezvous file
	envJobToken       = "GOTUNE_JOB_TOKEN"      // the job's secret, with GOTUNE_COORDINATOR
	envBootAddr       = "GOTUNE_BOOTSTRAP_ADDR" // IP or interface rank 0 listens on
	defaultRendezvous = ".gotune-rendezvous"    // under the working directory
)

// launchers are --launcher's values and the launcher environments each
// accepts (internal/launchenv's names).
var launchers = map[string][]string{"local": nil, "mpirun": {"openmpi", "hydra"}, "srun": {"slurm"}}

// clusterFlags are how a command runs as one process of a job that mpirun
// or srun started: launcher rank 0 runs the command and places rank jobs
// on the nodes; every other process serves it until it is done.
type clusterFlags struct {
	launcher, rendezvous, bootstrap string
	joinTimeout                     time.Duration
}

func (c *clusterFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&c.launcher, "launcher", "local", "who started this process: local (gotune starts its own ranks on this node), mpirun or srun (one gotune per launcher rank; rank 0 runs the command, pairs span nodes)")
	fl.StringVar(&c.rendezvous, "rendezvous", "", "directory on a file system every node shares, where launcher rank 0 publishes its address and the job token (default $"+envRendezvous+" or ./.gotune-rendezvous; or set $"+envCoordinator+" and $"+envJobToken+" on every process)")
	fl.StringVar(&c.bootstrap, "bootstrap-addr", "", "IP or interface launcher rank 0 listens on (default $"+envBootAddr+", else the first non-loopback IPv4 address)")
	fl.DurationVar(&c.joinTimeout, "join-timeout", 2*time.Minute, "how long launcher processes wait for each other")
}

// joined is the outcome of joining a launcher's job.
type joined struct {
	cluster *launch.Cluster // nil: local, or not rank 0
	serve   bool            // this process served rank 0 and is done
}

// nodes is the number of nodes of the job (1 locally).
func (j joined) nodes() int {
	if j.cluster == nil {
		return 1
	}
	return len(j.cluster.Nodes())
}

func (j joined) close() {
	if j.cluster != nil {
		j.cluster.Close()
	}
}

// join makes this process part of the launcher's job. Launcher rank 0 gets
// the cluster; any other process serves rank 0 until it is done, and then
// reports serve, for the command to return at once.
func (c *clusterFlags) join(ctx context.Context, cmd *cobra.Command) (joined, error) {
	accept, ok := launchers[c.launcher]
	if !ok {
		return joined{}, fmt.Errorf("--launcher %q: want local, mpirun or srun", c.launcher)
	}
	if c.launcher == "local" {
		return joined{}, nil
	}
	info, err := launchenv.FromEnv(os.LookupEnv)
	if errors.Is(err, launchenv.ErrNoLauncher) {
		return joined{}, fmt.Errorf("--launcher %s: %w; start gotune as %s", c.launcher, err, launcherExample(c.launcher))
	}
	if err != nil {
		return joined{}, fmt.Errorf("--launcher %s: %w", c.launcher, err)
	}
	if !slices.Contains(accept, info.Launcher) {
		return joined{}, fmt.Errorf("--launcher %s, but the environment is %s's", c.launcher, info.Launcher)
	}
	cfg := launch.ClusterConfig{LRank: info.Rank, LSize: info.Size, Timeout: c.joinTimeout}
	if addr := os.Getenv(envCoordinator); addr != "" {
		cfg.Addr, cfg.Token = addr, os.Getenv(envJobToken)
		if cfg.Token == "" {
			return joined{}, fmt.Errorf("$%s is set without $%s: every process needs the job's token", envCoordinator, envJobToken)
		}
	} else {
		file, err := c.rendezvousFile(info)
		if err != nil {
			return joined{}, err
		}
		cfg.RendezvousFile = file
	}
	if b := cmp.Or(c.bootstrap, os.Getenv(envBootAddr)); b != "" {
		ip, err := launch.InterfaceIP(b)
		if err != nil {
			return joined{}, fmt.Errorf("--bootstrap-addr: %w", err)
		}
		cfg.BindIP = ip
	}
	if info.Rank != 0 {
		if err := launch.Serve(ctx, cfg); err != nil {
			return joined{}, err
		}
		return joined{serve: true}, nil
	}
	cl, err := launch.Coordinate(ctx, cfg)
	if err != nil {
		return joined{}, err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "gotune: %d launcher processes (%s) on %d node(s): %s\n", info.Size, info.Launcher, len(cl.Nodes()), strings.Join(cl.Nodes(), ", "))
	if bench.DefaultCPUs(2) == nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "gotune: warning: the launcher gave this process fewer than 2 CPUs: the two ranks of a pair on one node will share them and measure contention (srun: --cpus-per-task=2 or more)\n")
	}
	return joined{cluster: cl}, nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// rendezvousFile names the job's file in the shared directory.
func (c *clusterFlags) rendezvousFile(info launchenv.Info) (string, error) {
	if info.JobID == "" {
		return "", fmt.Errorf("the %s environment names no job id: set $%s=HOST:PORT and $%s on every process instead", info.Launcher, envCoordinator, envJobToken)
	}
	dir := cmp.Or(c.rendezvous, os.Getenv(envRendezvous), defaultRendezvous)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("--rendezvous: %w", err)
	}
	return filepath.Join(dir, info.Launcher+"-"+unsafeName.ReplaceAllString(info.JobID, "_")+".json"), nil
}

func launcherExample(name string) string {
	if name == "srun" {
		return "srun -N2 --ntasks-per-node=1 gotune ... --launcher srun"
	}
	return "mpirun -np 2 --map-by node gotune ... --launcher mpirun"
}
