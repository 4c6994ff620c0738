package mpistack

import (
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math/bits"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/importer"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/sys"
)

// OSU is an install of the OSU Micro-Benchmarks (MVAPICH's OMB) built by
// one MPI stack's compiler wrapper, whose binaries gotune stacks --osu
// runs through that stack's launcher beside the reference benchmark.
type OSU struct {
	Dir string
	// Family is the MPI library the binaries link: "openmpi" or "mpich"
	// (MPICH and the libraries of its ABI, libmpi.so.12).
	Family string
	// Binaries maps each benchmark found (osu_bw) to its path.
	Binaries map[string]string
}

// osuBinaries names the OSU benchmark of each pattern OMB has.
var osuBinaries = map[bench.Pattern]string{
	bench.Latency:        "osu_latency",
	bench.Bandwidth:      "osu_bw",
	bench.BiBandwidth:    "osu_bibw",
	bench.MultiBandwidth: "osu_mbw_mr",
	bench.MultiLatency:   "osu_multi_lat",
	bench.AllToAll:       "osu_alltoall",
}

// FindOSU looks below dir for OSU's benchmarks (a flat directory or an
// install's libexec/osu-micro-benchmarks/mpi/... tree) and reads from
// their ELF headers which MPI library they link. Every benchmark found
// must link the same one.
func FindOSU(dir string) (OSU, error) {
	o := OSU{Dir: dir, Binaries: map[string]string{}}
	wanted := map[string]bool{}
	for _, b := range osuBinaries {
		wanted[b] = true
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && wanted[d.Name()] && o.Binaries[d.Name()] == "" {
			o.Binaries[d.Name()] = path
		}
		return nil
	})
	if err != nil {
		return OSU{}, fmt.Errorf("osu %s: %w", dir, err)
	}
	if len(o.Binaries) == 0 {
		return OSU{}, fmt.Errorf("osu %s: none of %s below it", dir, strings.Join(slices.Sorted(maps.Values(osuBinaries)), ", "))
	}
	for _, name := range slices.Sorted(maps.Keys(o.Binaries)) {
		family, err := linkedMPI(o.Binaries[name])
		if err != nil {
			return OSU{}, fmt.Errorf("osu %s: %w", dir, err)
		}
		if o.Family != "" && family != o.Family {
			return OSU{}, fmt.Errorf("osu %s: %s links %s, the others %s: give one install per MPI stack", dir, name, family, o.Family)
		}
		o.Family = family
	}
	return o, nil
}

// linkedMPI says which MPI library the binary at path links (DT_NEEDED).
func linkedMPI(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	libs, err := f.ImportedLibraries()
	if err != nil {
		return "", fmt.Errorf("read the libraries %s links: %w", path, err)
	}
	for _, l := range libs {
		switch {
		case strings.HasPrefix(l, "libmpich.so"), l == "libmpi.so.12":
			return "mpich", nil
		case strings.HasPrefix(l, "libmpi.so"):
			return "openmpi", nil
		}
	}
	return "", fmt.Errorf("%s links no MPI library gotune knows (libmpi.so.40 of Open MPI, libmpich.so.12 of MPICH): %s", path, strings.Join(libs, ", "))
}

// stack is the launcher configuration OSU's binaries run under: the one
// the reference benchmark's defaults run under for the same family.
func (o OSU) stack(label string) Stack {
	if o.Family == "mpich" {
		return MPICH(label)
	}
	return OpenMPIFile(label)
}

// Launcher is the launcher o's binaries run under (mpirun.openmpi).
func (o OSU) Launcher() string { return o.stack("").mpirun() }

// Contender runs o's benchmarks with the stack's defaults, as label.
func (o OSU) Contender(label string) Contender { return o.ContenderUnder(o.stack(label)) }

// ContenderUnder runs o's benchmarks through s, labelled s.Name: the
// launcher configuration of o's MPI library with a tuned file loaded as
// a user loads it, so that OSU measures what the file changes.
func (o OSU) ContenderUnder(s Stack) Contender {
	return Contender{Label: s.Name, Run: func(ctx context.Context, spec bench.Spec) (bench.Result, error) {
		return RunOSU(ctx, o, s, spec)
	}}
}

// RunOSU runs OSU's benchmark of spec's pattern through s (o's MPI
// library, labelled s.Name), once
// per repetition, over spec's sizes (powers of two: OSU measures the
// ladder between -m's bounds), with spec's iteration counts where it sets
// them (OSU's own defaults, which bench.DefaultIters follows, otherwise)
// and OSU's window of 64. Multi-rank patterns run spec's ranks, the
// others 2.
func RunOSU(ctx context.Context, o OSU, s Stack, spec bench.Spec) (bench.Result, error) {
	label := s.Name
	if s.family() != o.Family {
		return bench.Result{}, fmt.Errorf("osu %s: its binaries link %s, not %s (%s)", o.Dir, o.Family, s.family(), label)
	}
	name, ok := osuBinaries[spec.Pattern]
	if !ok {
		return bench.Result{}, fmt.Errorf("osu: no OSU benchmark for pattern %s", spec.Pattern)
	}
	binary := o.Binaries[name]
	if binary == "" {
		return bench.Result{}, fmt.Errorf("osu %s: no %s below it (pattern %s)", o.Dir, name, spec.Pattern)
	}
	if len(spec.Sizes) == 0 {
		return bench.Result{}, errors.New("osu: no message sizes")
	}
	for _, n := range spec.Sizes {
		if n <= 0 || bits.OnesCount(uint(n)) != 1 {
			return bench.Result{}, fmt.Errorf("osu: size %d: OSU measures powers of two only", n)
		}
	}
	if spec.Window != 0 && spec.Window != bench.DefaultWindow {
		return bench.Result{}, fmt.Errorf("osu: window %d: only OSU's own window of %d is run", spec.Window, bench.DefaultWindow)
	}
	ranks := 2
	if spec.Pattern.MultiRank() {
		ranks = spec.RankCount()
	}
	launcher, err := exec.LookPath(s.mpirun())
	if err != nil {
		return bench.Result{}, fmt.Errorf("run %s through %s: %w", name, label, sys.NotSupported(s.family(), s.mpirun()+" not found in PATH", err))
	}
	prov := hostinfo.Collect("/")
	if prov.Libraries, err = libraryVersion(ctx, s, launcher); err != nil {
		return bench.Result{}, fmt.Errorf("run %s through %s: %w", name, label, err)
	}
	args := append([]string{"-np", strconv.Itoa(ranks)}, s.Args...)
	args = append(args, binary, "-m", fmt.Sprintf("%d:%d", slices.Min(spec.Sizes), slices.Max(spec.Sizes)))
	if spec.Iters > 0 {
		args = append(args, "-i", strconv.Itoa(spec.Iters), "-x", strconv.Itoa(spec.Warmup))
	}
	samples := map[int][]float64{}
	for range max(spec.Reps, 1) {
		var out bytes.Buffer
		cmd, err := runLaunch(ctx, s, launcher, args, func(cmd *exec.Cmd) { cmd.Stdout, cmd.Stderr = &out, &out })
		if err != nil {
			if errors.Is(err, ErrHang) {
				return bench.Result{}, fmt.Errorf("run %s through %s: %w%s", name, label, err, indentOutput(tail(out.Bytes())))
			}
			if ctx.Err() != nil {
				return bench.Result{}, fmt.Errorf("run %s through %s: %w", name, label, ctx.Err())
			}
			return bench.Result{}, fmt.Errorf("run %s through %s: %s: %w%s", name, label, strings.Join(cmd.Args, " "), err, indentOutput(tail(out.Bytes())))
		}
		_, results, err := importer.Parse(name, out.Bytes())
		if err != nil {
			return bench.Result{}, fmt.Errorf("run %s through %s: %w%s", name, label, err, indentOutput(tail(out.Bytes())))
		}
		for _, p := range results[0].Points { // osu_mbw_mr's second result is its message rate
			for _, v := range p.Samples {
				samples[p.Size] = append(samples[p.Size], v)
			}
		}
	}
	res := bench.Result{Label: label, Provenance: prov, Spec: bench.Spec{Transport: label, Pattern: spec.Pattern, Sizes: slices.Clone(spec.Sizes),
		Reps: max(spec.Reps, 1), Iters: spec.Iters, Warmup: spec.Warmup, Window: bench.DefaultWindow}}
	if ranks > 2 {
		res.Spec.Ranks = ranks
	}
	for _, n := range spec.Sizes {
		if len(samples[n]) == 0 {
			return bench.Result{}, fmt.Errorf("run %s through %s: it printed no row for size %d", name, label, n)
		}
		res.Points = append(res.Points, bench.Summarize(n, spec.Pattern.Unit(), samples[n], nil))
	}
	return res, nil
}
