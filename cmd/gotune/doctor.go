package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/bytesize"
	"github.com/gotune/gotune/internal/gpu"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/launchenv"
	"github.com/gotune/gotune/internal/nccl"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/verbs"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
)

// doctorEnv is what gotune doctor looks at; the golden test replaces it.
type doctorEnv struct {
	host    func() hostinfo.Provenance
	ptrace  func() ([]byte, error) // kernel.yama.ptrace_scope
	drivers func() []*transports.Driver
	probe   func(ctx context.Context, transport string) error
	gpus    func() (gpu.Source, func() error, error)
	job     func() (launchenv.Info, error) // what mpirun, mpiexec or srun says
	getenv  func(string) string            // gotune's own variables (GOTUNE_COORDINATOR, ...)
	pickIP  func() string                  // the address launcher rank 0 would listen on
	rdma    func(w io.Writer) error        // RDMA devices, ports and GIDs, or why none (nil: not asked)
	// module describes the kernel module behind a transport (knem, xpmem:
	// its device, version and features) for the line of one that works;
	// "" for a transport without one. Nil: not asked.
	module func(transport string) (string, error)
	// cpus is where ranks would run: this process's affinity mask, its
	// cpuset, and the CPUs --cpus auto pins a pair to (nil: none). Nil:
	// not asked.
	cpus func() (mask, cpuset, ranks []int)
	// nccl is the NCCL library gotune would load (its version and path),
	// or why none. Nil: not asked.
	nccl func() (version, path string, err error)
}

func realDoctorEnv() doctorEnv {
	return doctorEnv{
		host:   func() hostinfo.Provenance { return hostinfo.Collect("/") },
		ptrace: func() ([]byte, error) { return os.ReadFile("/proc/sys/kernel/yama/ptrace_scope") },
		drivers: func() []*transports.Driver {
			var ds []*transports.Driver
			for _, n := range transports.Names() {
				if d, err := transports.Lookup(n); err == nil {
					ds = append(ds, d)
				}
			}
			return ds
		},
		probe:  func(ctx context.Context, t string) error { return bench.Probe(ctx, t, nil) },
		gpus:   openGPUs,
		job:    func() (launchenv.Info, error) { return launchenv.FromEnv(os.LookupEnv) },
		getenv: os.Getenv,
		pickIP: launch.PickIP,
		rdma:   func(w io.Writer) error { return verbs.Report(w, os.DirFS(verbs.SysfsRoot)) },
		module: func(t string) (string, error) {
			if f, ok := selftestModules[t]; ok {
				return f(nil)
			}
			return "", nil
		},
		cpus: func() (mask, cpuset, ranks []int) {
			mask, _ = sys.AllowedCPUs()
			cpuset, _ = sys.CpusetCPUs("/")
			return mask, cpuset, bench.DefaultCPUs(2)
		},
		nccl: func() (string, string, error) {
			l, err := nccl.Load()
			if err != nil {
				return "", "", err
			}
			return l.Version.String(), l.Path, nil
		},
	}
}

// newDoctorEnv builds the doctor's environment; tests replace it.
var newDoctorEnv = realDoctorEnv

func newDoctor() *cobra.Command {
	var ranks int
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Say which transports and GPUs work here, and why not, and list the transport options",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("ranks") && ranks < 2 {
				return fmt.Errorf("doctor: --ranks %d: sm's footprint is for 2 ranks or more", ranks)
			}
			ctx, cancel := jobContext(time.Minute)
			defer cancel()
			failed := doctor(ctx, cmd.OutOrStdout(), newDoctorEnv(), ranks)
			if failed > 0 {
				return fmt.Errorf("%d check(s) failed", failed)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&ranks, "ranks", 0, "give sm's shared-memory footprint at this many ranks on the node (default: one per core)")
	return cmd
}

// doctor writes the report and returns how many checks failed (a transport
// that is merely not supported here is no failure). smRanks is the job
// size sm's footprint line is for; 0 is one rank per core.
func doctor(ctx context.Context, w io.Writer, env doctorEnv, smRanks int) (failed int) {
	p := env.host()
	fmt.Fprintf(w, "host %s: %s, %d cores, %d NUMA node(s), kernel %s\n", p.Host, p.CPUModel, p.Cores, p.NUMANodes, p.Kernel)
	if b, err := env.ptrace(); err == nil {
		fmt.Fprintf(w, "kernel.yama.ptrace_scope = %s\n", strings.TrimSpace(string(b)))
	} else {
		fmt.Fprintln(w, "kernel.yama.ptrace_scope: no Yama (no extra ptrace restrictions)")
	}
	failed += doctorLauncher(w, env)
	if env.cpus != nil {
		mask, cpuset, ranks := env.cpus()
		doctorCPUs(w, mask, cpuset, ranks)
	}
	doctorFootprint(w, p, smRanks)
	fmt.Fprintln(w)
	failed += doctorTransports(ctx, w, env)
	fmt.Fprintln(w)
	if env.rdma != nil && env.rdma(w) != nil {
		failed++
	}
	failed += doctorGPUs(w, env)
	failed += doctorNCCL(w, env)
	return failed
}

// doctorNCCL says which NCCL gotune would load, or why none; a library
// that is there but fails to load counts as a failed check.
func doctorNCCL(w io.Writer, env doctorEnv) (failed int) {
	if env.nccl == nil {
		return 0
	}
	version, path, err := env.nccl()
	switch {
	case errors.Is(err, sys.ErrNotSupported):
		fmt.Fprintf(w, "NCCL: none usable (%s)\n", notSupportedReason(err))
	case err != nil:
		fmt.Fprintf(w, "NCCL: FAILED: %v\n", err)
		return 1
	default:
		fmt.Fprintf(w, "NCCL: %s (%s; gotune nccl plugin builds its tuner plugin)\n", version, path)
	}
	return 0
}

// doctorLauncher says which launcher started this process and what it
// says; variables that contradict themselves are a failure.
func doctorLauncher(w io.Writer, env doctorEnv) (failed int) {
	if env.job == nil {
		return 0
	}
	in, err := env.job()
	switch {
	case errors.Is(err, launchenv.ErrNoLauncher):
		fmt.Fprintln(w, "launcher: none (started directly: ranks on this node only; under mpirun or srun, --launcher mpirun|srun spans nodes)")
	case err != nil:
		fmt.Fprintf(w, "launcher: FAILED: %v\n", err)
		return 1
	default:
		line := fmt.Sprintf("launcher: %s, rank %d of %d", in.Launcher, in.Rank, in.Size)
		if in.LocalRank >= 0 {
			line += fmt.Sprintf(", %d", in.LocalRank)
			if in.LocalSize > 0 {
				line += fmt.Sprintf(" of %d", in.LocalSize)
			}
			line += " on this node"
		}
		if in.Node >= 0 {
			line += fmt.Sprintf(", node %d", in.Node)
		}
		if in.JobID != "" {
			line += ", job " + in.JobID
		}
		fmt.Fprintln(w, line)
		if env.getenv != nil && env.pickIP != nil {
			plan, ok := bootstrapPlan(in, env.getenv, env.pickIP)
			if !ok {
				fmt.Fprintf(w, "  --launcher %s: FAILED: %s\n", launcherFlag(in.Launcher), plan)
				return 1
			}
			fmt.Fprintf(w, "  --launcher %s: %s\n", launcherFlag(in.Launcher), plan)
		}
	}
	return 0
}

// doctorCPUs says where a pair's ranks run with --cpus auto: on CPUs of
// this process's affinity mask, of its cpuset where a launcher's binding
// left the mask too narrow, or unpinned and sharing what there is.
func doctorCPUs(w io.Writer, mask, cpuset, ranks []int) {
	list := func(c []int) string { return gpu.CPUList(c).String() }
	pair := strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ranks)), ","), "[]")
	switch {
	case len(ranks) == 0:
		fmt.Fprintf(w, "ranks: not pinned: this process may run on CPU %s only (cpuset %s), so a pair's two ranks on this node share it (give it two: srun --cpus-per-task=2, a wider taskset)\n", list(mask), list(cpuset))
	case len(mask) >= len(ranks):
		fmt.Fprintf(w, "ranks: a pair on CPUs %s (--cpus auto; this process may run on %s)\n", pair, list(mask))
	default:
		fmt.Fprintf(w, "ranks: a pair on CPUs %s of this process's cpuset %s (--cpus auto; the launcher bound this process to %s)\n", pair, list(cpuset), list(mask))
	}
}

// doctorFootprint says what sm's built-in channels take with ranks ranks
// on the node (0: a rank on every core): a cell FIFO per ordered pair of
// ranks, a fragment ring per rank.
func doctorFootprint(w io.Writer, p hostinfo.Provenance, ranks int) {
	at := fmt.Sprintf("%d ranks (--ranks; %d cores)", ranks, p.Cores)
	if ranks == 0 {
		ranks, at = p.Cores, fmt.Sprintf("one rank per core (%d ranks)", p.Cores)
	}
	d := sm.DefaultParams().ForRanks(ranks)
	node := int64(d.SegmentBytes(ranks))
	share := ""
	if p.MemBytes > 0 {
		share = fmt.Sprintf(", %.2g%% of this node's %s", 100*float64(node)/float64(p.MemBytes), bytesize.Human(p.MemBytes))
		budget := sm.DefaultBudget(p.MemBytes)
		if node > budget {
			share += fmt.Sprintf(", over the built-in sm.budget of %s (1/%d of memory): such a job fails to start unless given a larger sm.budget or smaller channels", bytesize.Human(budget), sm.DefaultBudgetShare)
		} else {
			share += fmt.Sprintf(", within the built-in sm.budget of %s (1/%d of memory)", bytesize.Human(budget), sm.DefaultBudgetShare)
		}
	}
	fmt.Fprintf(w, "sm memory: %s of shared memory at %s%s; %s per ordered pair (%d cells of %d B), %s per rank (fragments %s x %d); a profile's footprint line gives its own\n",
		bytesize.Human(node), at, share, bytesize.Human(int64(d.PairBytes())), d.Depth, d.CellSize,
		bytesize.Human(int64(d.RingBytes())), bytesize.Human(int64(d.FragSize)), d.FragSlots)
}

// launcherFlag is the --launcher value for a launcher's environment.
func launcherFlag(name string) string {
	if name == "slurm" {
		return "srun"
	}
	return "mpirun"
}

// bootstrapPlan says how launcher rank 0 would be found from here; ok is
// false where it could not be.
func bootstrapPlan(in launchenv.Info, getenv func(string) string, pickIP func() string) (plan string, ok bool) {
	if addr := getenv(envCoordinator); addr != "" {
		if getenv(envJobToken) == "" {
			return fmt.Sprintf("$%s=%s but no $%s: every process needs the job's token", envCoordinator, addr, envJobToken), false
		}
		return fmt.Sprintf("launcher rank 0 at $%s=%s, with $%s", envCoordinator, addr, envJobToken), true
	}
	if in.JobID == "" {
		return fmt.Sprintf("no job id in the environment: set $%s and $%s on every process", envCoordinator, envJobToken), false
	}
	dir := cmp.Or(getenv(envRendezvous), defaultRendezvous)
	ip := pickIP()
	if b := getenv(envBootAddr); b != "" {
		ip = b
	}
	return fmt.Sprintf("launcher rank 0 listens on %s and publishes it in %s/ (a directory every node must share)", ip, dir), true
}

// doctorTransports writes a status line per transport, each followed by
// the options it reads. An option set is listed once: under the transport
// of its name (sm's under sm), else under the first transport that reads
// it; the others say "sm.* options apply". A transport is listed after
// those whose options it reads, auto last.
func doctorTransports(ctx context.Context, w io.Writer, env doctorEnv) (failed int) {
	drivers := env.drivers()
	byName := map[string]*transports.Driver{}
	for _, d := range drivers {
		byName[d.Name] = d
	}
	var order []*transports.Driver
	seen := map[string]bool{}
	var visit func(d *transports.Driver)
	visit = func(d *transports.Driver) {
		if seen[d.Name] {
			return
		}
		seen[d.Name] = true
		for _, s := range d.Options {
			if base := byName[s.Name]; base != nil && base != d {
				visit(base)
			}
		}
		order = append(order, d)
	}
	var auto *transports.Driver
	for _, d := range drivers {
		if d.Name == "auto" {
			auto = d
			continue
		}
		visit(d)
	}
	width := 0
	for _, d := range order {
		for _, s := range d.Options {
			for _, o := range s.Options {
				width = max(width, len(optionExample(o)))
			}
		}
	}
	width = min(width, 32)
	listed := map[*transports.OptionSet]bool{}
	for _, d := range order {
		status := "available"
		switch err := env.probe(ctx, d.Name); {
		case err == nil:
			if env.module != nil {
				// The job worked: what it ran on is worth saying (a
				// module's version, a DMA engine or none).
				if line, merr := env.module(d.Name); merr == nil && line != "" {
					status += ": " + line
				}
			}
		case errors.Is(err, sys.ErrNotSupported):
			status = "not supported: " + notSupportedWhy(err)
		default:
			failed++
			status = "FAILED: " + err.Error()
		}
		var apply []string
		var own []*transports.OptionSet
		for _, s := range d.Options {
			owner := byName[s.Name]
			if listed[s] || owner != nil && owner != d {
				apply = append(apply, s.Name+".*")
				continue
			}
			listed[s] = true
			own = append(own, s)
		}
		if len(apply) > 0 {
			status += "; " + strings.Join(apply, ", ") + " options apply"
		}
		fmt.Fprintf(w, "%-8s %s\n", d.Name, status)
		for _, s := range own {
			for _, o := range s.Options {
				fmt.Fprintf(w, "  --opt %-*s  %s\n", width, optionExample(o), o.Help)
			}
		}
	}
	if auto != nil {
		fmt.Fprintf(w, "%-8s the profile's routes over sm and its single copies: cma, knem, xpmem (gotune bench --profile FILE)\n", auto.Name)
	}
	return failed
}

// notSupportedWhy shortens a chain of "X: not supported: Y" errors to the
// innermost one's what and why: "CUDA driver: libcuda.so.1 not found".
func notSupportedWhy(err error) string {
	s := err.Error()
	const sep = ": not supported: "
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return notSupportedReason(err)
	}
	what := s[:i]
	if j := strings.LastIndex(what, ": "); j >= 0 {
		what = what[j+2:]
	}
	return what + ": " + s[i+len(sep):]
}

// doctorGPUs writes the GPUs NVML finds, a line each, and how each pair is
// linked (pairs linked alike share a line), or why there are none. A GPU
// source that fails counts as a failed check.
func doctorGPUs(w io.Writer, env doctorEnv) (failed int) {
	src, closeSrc, err := env.gpus()
	if errors.Is(err, gpu.ErrNotSupported) {
		fmt.Fprintf(w, "GPUs: none usable (%s)\n", notSupportedReason(err))
		return 0
	}
	if err != nil {
		fmt.Fprintf(w, "GPUs: FAILED: %v\n", err)
		return 1
	}
	topo, err := gpu.Discover(src)
	mem := map[int]uint64{}
	if ms, ok := src.(gpu.MemorySource); ok && err == nil {
		for _, d := range topo.Devices {
			if n, merr := ms.TotalMemory(d.Index); merr == nil {
				mem[d.Index] = n
			}
		}
	}
	if cerr := closeSrc(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(w, "GPUs: FAILED: %v\n", err)
		return 1
	}
	if len(topo.Devices) == 0 {
		fmt.Fprintln(w, "GPUs: none (NVML sees no devices)")
		return 0
	}
	fmt.Fprintf(w, "GPUs: %d (gotune topo shows the matrix and the CPUs near each)\n", len(topo.Devices))
	for _, d := range topo.Devices {
		size := "memory unknown"
		if n, ok := mem[d.Index]; ok {
			size = fmt.Sprintf("%.0f GiB", float64(n)/(1<<30))
		}
		fmt.Fprintf(w, "  GPU%d  %s, bus %s, %s, MIG %s\n", d.Index, d.Name, d.BusID, size, d.MIG)
	}
	var links []string
	pairs := map[string][]string{}
	for _, p := range topo.Pairs {
		l := fmt.Sprintf("%s, P2P read %s, write %s, NVLink %s", p.Label(), p.P2P.Read, p.P2P.Write, p.P2P.NVLink)
		if pairs[l] == nil {
			links = append(links, l)
		}
		pairs[l] = append(pairs[l], fmt.Sprintf("GPU%d-GPU%d", p.GPUs[0], p.GPUs[1]))
	}
	for _, l := range links {
		which := strings.Join(pairs[l], ", ")
		if len(links) == 1 && len(topo.Pairs) > 1 {
			which = fmt.Sprintf("all %d pairs", len(topo.Pairs))
		}
		fmt.Fprintf(w, "  %s: %s\n", which, l)
	}
	return 0
}

// optionExample is KEY=BUILT-IN, or KEY=TYPE for an option without a
// built-in value.
func optionExample(o transports.Option) string {
	if o.Default != "" {
		return o.Key + "=" + o.Default
	}
	if strings.Contains(o.Type, "|") {
		return o.Key + "=" + o.Type
	}
	return o.Key + "=" + strings.ToUpper(o.Type)
}
