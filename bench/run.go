package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/launchenv"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
)

const jobKind = "bench"

// rankMemoryLimit bounds a rank's Go heap while its collector is off.
const rankMemoryLimit = 2 << 30

func init() { launch.Register(jobKind, rankMain) }

// rankOutput is what a benchmark rank returns.
type rankOutput struct {
	Points   []Point            `json:"points,omitempty"`   // rank 0's
	Warnings [][]string         `json:"warnings,omitempty"` // rank 1's, one list per size
	Rank     *hostinfo.RankInfo `json:"rank,omitempty"`     // with a GPU: its buffers and device
	Times    []rankTimes        `json:"times,omitempty"`    // a multi-rank pattern's: every rank's, one per size
	// GaveUp says, for a single-copy transport, with which peers the rank
	// gave single copy up and why: its figures are then copy-in/copy-out's.
	GaveUp []string `json:"gave_up,omitempty"`
	// Alternates are rank 0's points of each of Spec.Alternates.
	Alternates [][]Point `json:"alternates,omitempty"`
}

// rankMain is the body of each benchmark rank. It runs on the rank's
// measuring goroutine, which launch has locked to its OS thread: a GPU is
// bound to that thread before the transport starts, and its buffers outlive
// the transport.
func rankMain(r *launch.Rank) (any, error) {
	var spec Spec
	if err := r.Params(&spec); err != nil {
		return nil, err
	}
	st := &stepper{w: os.Stderr, rank: r.ID}
	if len(spec.Alternates) > 0 {
		return rankAlternates(r, spec, st)
	}
	if spec.UsesGPU() {
		st.start("opening the GPUs")
	}
	g, err := openRankGPU(&spec, r.ID)
	if err != nil {
		return nil, err
	}
	defer g.close()
	st.start("starting transport %s", spec.Transport)
	t, err := Open(r, spec.Transport, spec.Options)
	if err != nil {
		return nil, err
	}
	st.start("allocating %s", buffersWhat(spec, r.ID))
	a, err := newArena(spec, r.ID, g)
	if err != nil {
		t.Close()
		return nil, err
	}
	defer a.free() // after the transport's Close, before the device's
	unhook := a.hookInvalidation(t)
	holdCollector()
	var out rankOutput
	if spec.Pattern.MultiRank() {
		out.Times, err = measureMulti(t, r.ID, spec, a, r.Beat, st)
	} else {
		out.Points, out.Warnings, err = measureAll(t, r.ID, spec, a, r.Beat, st)
	}
	out.GaveUp = gaveUp(t)
	st.start("closing transport %s", spec.Transport)
	unhook()
	keepFirst(&err, t.Close())
	if g != nil {
		info := g.info(r.ID)
		out.Rank = &info
	}
	return out, err
}

// holdCollector keeps the collector out of the timed regions: message
// buffers are off-heap and the loops allocate nothing. Transports may
// still allocate (early arrivals, say); the limit lets the collector run
// rather than the rank run out of memory.
func holdCollector() {
	runtime.GC()
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(rankMemoryLimit)
}

// gaveUp lists the peers t gave single copy up with, and why ("rank 1:
// ..."), in rank order; nil for a transport without single copy.
func gaveUp(t transports.Transport) []string {
	f, ok := t.(interface{ Fallbacks() map[int]error })
	if !ok {
		return nil
	}
	fallbacks := f.Fallbacks()
	var out []string
	for _, peer := range slices.Sorted(maps.Keys(fallbacks)) {
		out = append(out, fmt.Sprintf("rank %d: %v", peer, fallbacks[peer]))
	}
	return out
}

// keepFirst sets *err to next unless it already holds an error: of a run
// and the releases after it, the first failure is the one reported.
func keepFirst(err *error, next error) {
	if *err == nil {
		*err = next
	}
}

// RankEnv is the environment a transport starts with in rank r: what the
// launcher told the rank, and opts.
func RankEnv(r *launch.Rank, opts transports.Options) transports.Env {
	return transports.Env{Rank: r.ID, Size: r.Size, PIDs: r.PIDs, Segment: r.Segment, Options: opts, Token: r.Token,
		AllGather: r.AllGather, Hosts: r.Hosts, Addr: r.Addr}
}

// Open starts the named transport in rank r and proves it works between
// the ranks (its driver's Check, where it has one).
func Open(r *launch.Rank, name string, opts transports.Options) (transports.Transport, error) {
	return openIn(r, name, opts, r.Segment)
}

// openIn is Open over segment, a part of the job's.
func openIn(r *launch.Rank, name string, opts transports.Options, segment []byte) (transports.Transport, error) {
	d, err := transports.Lookup(name)
	if err != nil {
		return nil, err
	}
	env := RankEnv(r, opts)
	env.Segment = segment
	t, err := d.New(env)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	if d.Check == nil {
		return t, nil
	}
	if err := d.Check(t, env); err != nil {
		return nil, err
	}
	return t, nil
}

// Normalize fills defaults and checks a spec, naming the offending field.
func (s *Spec) Normalize() error {
	if len(s.Alternates) > 0 {
		if err := s.normalizeAlternates(); err != nil {
			return err
		}
	}
	if _, err := transports.Lookup(s.Transport); err != nil {
		return err
	}
	if err := checkOptions(s.Options); err != nil {
		return err
	}
	if _, err := ParsePattern(string(s.Pattern)); err != nil {
		return err
	}
	if len(s.Sizes) == 0 {
		return fmt.Errorf("no message sizes")
	}
	if s.Reps == 0 {
		s.Reps = DefaultReps
	}
	if s.Window == 0 {
		s.Window = DefaultWindow
	}
	switch {
	case s.Reps < 1:
		return fmt.Errorf("reps=%d: need at least 1", s.Reps)
	case s.Window < 1:
		return fmt.Errorf("window=%d: need at least 1", s.Window)
	case s.Iters < 0 || s.Warmup < 0:
		return fmt.Errorf("iters=%d warmup=%d: must not be negative", s.Iters, s.Warmup)
	case s.Buffers < 0:
		return fmt.Errorf("buffers=%d: must not be negative", s.Buffers)
	case s.Peers < 0:
		return fmt.Errorf("peers=%d: must not be negative", s.Peers)
	case s.Settle < 0:
		return fmt.Errorf("settle=%d: must not be negative", s.Settle)
	case s.Buffers > 0 && s.Validate && s.Pattern.windowed() && s.Buffers < s.Window:
		return fmt.Errorf("buffers=%d with validate: need at least window=%d, one per message in flight", s.Buffers, s.Window)
	}
	for _, n := range s.Sizes {
		if n < 0 {
			return fmt.Errorf("size %d: negative", n)
		}
	}
	if s.Nodes < 0 || s.Nodes > 2 {
		return fmt.Errorf("nodes=%d: a pair spans 1 or 2 nodes", s.Nodes)
	}
	if d, _ := transports.Lookup(s.Transport); s.InterNode() && d.NodeLocal {
		return fmt.Errorf("transport %s moves data within a node: an inter-node pair needs %s", s.Transport, strings.Join(transports.InterNodeNames(), " or "))
	}
	if err := s.normalizeRanks(); err != nil {
		return err
	}
	return s.normalizeGPU()
}

// DefaultCPUs pins rank i to the i-th CPU this process may use, when there
// are enough of them; otherwise it returns nil (no pinning). Under a
// launcher an affinity mask narrower than that is the launcher's binding
// of the one process it started (mpirun binds to a core by default), not
// a limit on the ranks this process starts: they take the CPUs of its
// cpuset instead, which a launcher's allocation (Slurm's cgroup) does
// limit.
func DefaultCPUs(ranks int) []int {
	cpus, err := sys.AllowedCPUs()
	if err == nil && len(cpus) < ranks && underLauncher() {
		cpus, err = sys.CpusetCPUs("/")
	}
	if err != nil || len(cpus) < ranks {
		return nil
	}
	return cpus[:ranks]
}

// underLauncher reports whether mpirun, srun or another launcher started
// this process.
func underLauncher() bool {
	_, err := launchenv.FromEnv(os.LookupEnv)
	return err == nil
}

// DefaultStall is how long a benchmark rank may go without finishing a
// repetition before the watchdog takes its stacks and kills the run.
const DefaultStall = 2 * time.Minute

// Run measures spec between two fresh rank processes (Spec.Ranks of them
// for a multi-rank pattern). A rank that completes
// no repetition for stall (0: DefaultStall) is reported as a
// *launch.StallError with its stacks.
//
// An error of a run whose ctx is done says which step the ranks were in
// (the step of the one behind) and how long they had run; a stall's
// stacks come without the ranks' step lines.
func Run(ctx context.Context, spec Spec, stall time.Duration, hooks launch.Hooks, opts ...RunOption) (Result, error) {
	var o runOptions
	for _, opt := range opts {
		opt(&o)
	}
	if stall <= 0 {
		stall = DefaultStall
	}
	if err := spec.Normalize(); err != nil {
		return Result{}, err
	}
	ranks := spec.RankCount()
	tr := newTracker(ctx, o.progress, ranks)
	tr.onChange, tr.meter = o.onChange, o.meter
	tr.plan(spec)
	if spec.UsesGPU() {
		tr.setParent("checking the GPUs")
	}
	if err := checkGPUs(&spec); err != nil {
		return Result{}, tr.explain(err)
	}
	var (
		seg int
		err error
	)
	if len(spec.Alternates) > 0 {
		var bounds []int
		if bounds, err = alternateRegions(ranks, spec.Alternates); err == nil {
			seg = bounds[len(bounds)-1]
		}
	} else {
		d, _ := transports.Lookup(spec.Transport)
		seg, err = d.SharedBytes(ranks, spec.Options)
	}
	if err != nil {
		return Result{}, err
	}
	params, err := json.Marshal(spec)
	if err != nil {
		return Result{}, err
	}
	tr.setParent("starting rank processes")
	out, err := launch.Run(ctx, launch.Job{Kind: jobKind, Size: ranks, SegmentBytes: seg,
		Backend: spec.Backend, CPUs: spec.CPUs, Params: params, Stall: stall, Nodes: spec.Nodes}, tr.hooks(hooks))
	tr.finish()
	if err != nil {
		return Result{}, tr.explain(err)
	}
	res := Result{Label: "gotune " + spec.Transport, Provenance: hostinfo.Collect("/"), Spec: spec}
	outs := make([]rankOutput, ranks)
	times := make([][]rankTimes, ranks)
	for r := range outs {
		if err := json.Unmarshal(out[r], &outs[r]); err != nil {
			return Result{}, fmt.Errorf("decode rank %d results: %w", r, err)
		}
		if outs[r].Rank != nil {
			res.Provenance.Ranks = append(res.Provenance.Ranks, *outs[r].Rank)
		}
		times[r] = outs[r].Times
	}
	// A single-copy transport that gave single copy up measured
	// copy-in/copy-out from then on: every point says so.
	var gave []string
	for r := range outs {
		for _, why := range outs[r].GaveUp {
			gave = append(gave, fmt.Sprintf("rank %d gave single copy up with %s (copy-in/copy-out measured from then on)", r, why))
		}
	}
	if len(spec.Alternates) > 0 {
		res.Label = "gotune " + alternateNames(spec.Alternates)
		res.Alternates = outs[0].Alternates
		if len(res.Alternates) != len(spec.Alternates) {
			return Result{}, fmt.Errorf("rank 0 returned %d alternates' points for %d", len(res.Alternates), len(spec.Alternates))
		}
		for k := range res.Alternates {
			warnAll(res.Alternates[k], gave)
		}
		tr.measuredAll(len(spec.Sizes))
		return res, nil
	}
	if spec.Pattern.MultiRank() {
		if res.Points, err = multiPoints(spec, times); err != nil {
			return Result{}, err
		}
		if spec.Pattern.Collective() {
			res.Metric = collMetric(spec.Pattern)
		}
		tr.measuredAll(len(res.Points))
		warnAll(res.Points, gave)
		return res, nil
	}
	res.Points = outs[0].Points
	tr.measuredAll(len(res.Points))
	for i, ws := range outs[1].Warnings {
		if i >= len(res.Points) {
			break
		}
		for _, w := range ws { // both ranks summarise: keep one of each statistics warning
			if !slices.Contains(res.Points[i].Warnings, w) {
				res.Points[i].Warnings = append(res.Points[i].Warnings, w)
			}
		}
	}
	warnAll(res.Points, gave)
	return res, nil
}

// warnAll adds warnings to every point.
func warnAll(points []Point, warnings []string) {
	for i := range points {
		points[i].Warnings = append(points[i].Warnings, warnings...)
	}
}
