package sweep

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/gpu"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/tuner/store"
)

// Trial is one run of one candidate: a record in measurements.jsonl.
type Trial struct {
	Stage     string             `json:"stage"`
	Candidate string             `json:"candidate"`
	Transport string             `json:"transport"`
	Options   transports.Options `json:"options,omitempty"`
	Pattern   bench.Pattern      `json:"pattern"`
	Sizes     []int              `json:"sizes"`
	Round     int                `json:"round"`
	// GPU is set for the GPU stages' trials: buffers, devices and load.
	GPU *TrialGPU `json:"gpu,omitempty"`
	// Nodes is 2 for the inter-node stages' trials: the pair spans nodes.
	Nodes int `json:"nodes,omitempty"`
	// Ranks is the rank count of a multi-rank pattern's trial (mbw_mr,
	// alltoall), placed one per core by bench.PlaceRanks; 0: a pair.
	Ranks  int           `json:"ranks,omitempty"`
	Points []bench.Point `json:"points,omitempty"`
	// Failed says why the candidate produced no points: a hang the
	// watchdog caught (the candidate is then dropped, never emitted).
	Failed string `json:"failed,omitempty"`
	// Stacks is the head of what each stalled rank printed when the
	// watchdog caught a hang (stackExcerpt), by rank.
	Stacks map[int]string `json:"stacks,omitempty"`
	// Seconds is how long the trial took, for budget estimates.
	Seconds float64 `json:"seconds"`
	// Together says the trial ran side by side with the other candidates
	// of its round in one pair of ranks (runTogether); Seconds is then
	// its share of that run.
	Together bool `json:"together,omitempty"`
	// extra options reach the ranks but not the key (a profile's path:
	// the run directory may move; its hash is in Options).
	extra transports.Options
}

// TrialGPU is where a GPU trial's buffers live and what runs beside it.
type TrialGPU struct {
	Mem       string        `json:"mem"`  // bench --mem: SRC,DST
	GPUs      string        `json:"gpus"` // bench --gpus
	Load      float64       `json:"load,omitempty"`
	LoadBound time.Duration `json:"load_bound,omitempty"`
	Buffers   int           `json:"buffers,omitempty"` // bench --buffers
}

// key identifies a trial independently of its outcome. (Host trials'
// keys are what they were before GPU trials existed: GPU is omitted.)
func (t Trial) key() string {
	b, _ := json.Marshal(struct { // plain data always encodes
		Stage, Candidate, Transport string
		Options                     transports.Options
		Pattern                     bench.Pattern
		Sizes                       []int
		Round                       int
		GPU                         *TrialGPU `json:",omitempty"`
		Nodes                       int       `json:",omitempty"`
		Ranks                       int       `json:",omitempty"`
	}{t.Stage, t.Candidate, t.Transport, t.Options, t.Pattern, t.Sizes, t.Round, t.GPU, t.Nodes, t.Ranks})
	sum := sha256.Sum256(b)
	return "trial:" + hex.EncodeToString(sum[:12])
}

// Meta is meta.json: what a run is, written once when it starts.
type Meta struct {
	RunID      string              `json:"run_id"`
	Command    string              `json:"command"`
	Started    time.Time           `json:"started"`
	Provenance hostinfo.Provenance `json:"provenance"`
	Plan       Plan                `json:"plan"`
	// Verify is set for a verification run (gotune verify), not a sweep.
	Verify *VerifyTarget `json:"verify,omitempty"`
	// Nodes names the nodes the run's ranks span (launcher rank 0's
	// first); empty on one node.
	Nodes []string `json:"nodes,omitempty"`
}

// Files of a run directory.
const (
	MetaFile         = "meta.json"
	MeasurementsFile = "measurements.jsonl"
	BenchFile        = "measurements.bench"
	SummaryFile      = "summary"
	ProfileFile      = "profile.yaml"
	QuarantineFile   = "quarantine.jsonl" // in the host directory, shared by runs
)

// Config is how to run a sweep.
type Config struct {
	Plan     Plan
	Out      string // root of results: the run goes to Out/<host>/<run-id>/
	Resume   string // an existing run directory to continue instead
	Budget   time.Duration
	Progress io.Writer // one line per trial; nil: discard
	Meter    Meter     // told of stages' planned trials and of each trial; nil: none
	Command  string    // the command line, for meta.json
	// Hooks run in every trial's rank job (tests use them to kill ranks).
	Hooks launch.Hooks
	// Verify makes the run a verification of this profile (Verify sets it).
	Verify *VerifyTarget
	// Nodes names the nodes of a run under an external launcher
	// (launch.Cluster.Nodes); with two or more the inter-node stages run.
	Nodes []string
}

// Runner is a sweep in progress.
type Runner struct {
	dir, hostDir string
	meta         Meta
	plan         Plan
	store        *store.Store
	quarantine   *store.Store
	progress     io.Writer
	meter        Meter
	hooks        launch.Hooks
	ctx          context.Context
	start        time.Time
	budget       time.Duration
	trials       []Trial // every trial of this run, stored or new, in order
	measured     int     // trials measured by this process
	reused       int     // trials found in the store
	overBudget   bool
	stakeStops   []string // stages whose extra rounds their stake did not buy
	notes        []string // for the summary: budget cuts, dropped candidates
	replayOnly   bool     // tune: use stored trials only
	geometry     *int     // geometryRanks, once known
	// routes are the decided size ranges, as options, for verdict digests.
	routes transports.Options
	// probeRuns are the probe runs of this process, by probe, variant,
	// versions, rank count and options (probeOnce).
	probeRuns map[string]ProbeRecord
	// verified are the hashes of the profiles this run measured auto with
	// in the verification (stored or new), in order.
	verified []string
	// faded are the settled losses no route mended that their fresh
	// rounds did not settle again (emitVerified).
	faded []fadedLoss
}

// ErrBudget stops optional work when the budget is spent.
var ErrBudget = errors.New("budget spent")

// Open prepares a run directory: a new one under cfg.Out, or cfg.Resume.
func Open(ctx context.Context, cfg Config) (*Runner, error) {
	r := &Runner{ctx: ctx, progress: cfg.Progress, meter: cfg.Meter, hooks: cfg.Hooks, start: time.Now()}
	if r.progress == nil {
		r.progress = io.Discard
	}
	if cfg.Resume != "" {
		r.dir = cfg.Resume
		b, err := os.ReadFile(filepath.Join(r.dir, MetaFile))
		if err != nil {
			return nil, fmt.Errorf("resume %s: %w", r.dir, err)
		}
		if err := json.Unmarshal(b, &r.meta); err != nil {
			return nil, fmt.Errorf("resume: %s: %w", filepath.Join(r.dir, MetaFile), err)
		}
		if err := r.meta.Plan.Check(); err != nil {
			return nil, fmt.Errorf("resume: %s: plan: %w", filepath.Join(r.dir, MetaFile), err)
		}
	} else {
		prov := hostinfo.Collect("/")
		// The GPUs and their links are for the report's machine section;
		// a node without NVML has none to show.
		switch g, err := gpu.Machine(); {
		case err == nil:
			prov.GPUs = g
		case !errors.Is(err, gpu.ErrNotSupported) && r.progress != nil:
			fmt.Fprintf(r.progress, "machine: GPUs not described: %v\n", err)
		}
		host := prov.Host
		if host == "" {
			host = "unknown-host"
		}
		id := r.start.UTC().Format("20060102-150405")
		r.dir = filepath.Join(cfg.Out, host, id)
		if err := os.MkdirAll(filepath.Join(cfg.Out, host), 0o755); err != nil {
			return nil, fmt.Errorf("create run directory: %w", err)
		}
		for n := 2; ; n++ { // two sweeps in one second get distinct directories
			err := os.Mkdir(r.dir, 0o755)
			if err == nil {
				break
			}
			if !os.IsExist(err) {
				return nil, fmt.Errorf("create run directory: %w", err)
			}
			r.dir = filepath.Join(cfg.Out, host, fmt.Sprintf("%s.%d", id, n))
		}
		r.meta = Meta{RunID: filepath.Base(r.dir), Command: cfg.Command, Started: r.start.UTC().Truncate(time.Second),
			Provenance: prov, Plan: cfg.Plan, Verify: cfg.Verify}
		if len(cfg.Nodes) > 1 {
			r.meta.Nodes = cfg.Nodes
		}
		b, _ := json.MarshalIndent(r.meta, "", "  ") // plain data always encodes
		if err := writeFileAtomic(filepath.Join(r.dir, MetaFile), append(b, '\n')); err != nil {
			return nil, err
		}
	}
	r.plan = r.meta.Plan
	r.budget = cfg.Budget
	if r.budget <= 0 {
		r.budget = r.plan.Budget
	}
	r.hostDir = filepath.Dir(r.dir)
	var err error
	if r.store, err = store.Open(filepath.Join(r.dir, MeasurementsFile)); err != nil {
		return nil, err
	}
	// A resumed run continues the budget where the killed one left it:
	// the time its stored trials and verdicts took is spent.
	for _, rec := range r.store.Records() {
		var took struct {
			Seconds float64 `json:"seconds"`
		}
		if json.Unmarshal(rec.Data, &took) == nil {
			r.start = r.start.Add(-time.Duration(took.Seconds * float64(time.Second)))
		}
	}
	if len(r.store.Dropped) > 0 {
		fmt.Fprintf(r.progress, "resume: dropped a torn last record (%d bytes) of an interrupted write\n", len(r.store.Dropped))
	}
	if r.quarantine, err = store.Open(filepath.Join(r.hostDir, QuarantineFile)); err != nil {
		r.store.Close()
		return nil, err
	}
	return r, nil
}

// Close releases the stores.
func (r *Runner) Close() error {
	err := r.store.Close()
	if qerr := r.quarantine.Close(); err == nil {
		err = qerr
	}
	return err
}

// remaining is the measuring time left.
func (r *Runner) remaining() time.Duration { return r.budget - time.Since(r.start) }

// budgetStopKey is the record that says the trial keyed key was skipped
// for the budget.
func budgetStopKey(key string) string { return "budget-stop:" + strings.TrimPrefix(key, "trial:") }

// recordBudgetStop remembers that the trial keyed key was skipped for the
// budget, so that a resume or tune replays the cut exactly.
func (r *Runner) recordBudgetStop(key string) error {
	return r.store.Append(store.Record{Key: budgetStopKey(key), Kind: "budget-stop", Time: time.Now().UTC()})
}

// run measures t (or returns its stored record). Optional trials are
// skipped with ErrBudget when the budget, less the estimate of the required
// work after t's stage (requiredAfter), is spent.
func (r *Runner) run(t Trial, optional bool) (Trial, error) {
	key := t.key()
	if rec, ok := r.store.Get(key); ok {
		var stored Trial
		if err := json.Unmarshal(rec.Data, &stored); err != nil {
			return Trial{}, fmt.Errorf("%s: record %s: %w", filepath.Join(r.dir, MeasurementsFile), key, err)
		}
		r.reused++
		r.trials = append(r.trials, stored)
		r.meterDone(stored, true, "stored")
		return stored, nil
	}
	stopKey := budgetStopKey(key)
	if r.store.Has(stopKey) { // the run skipped it for budget: so does its replay
		r.overBudget = true
		return Trial{}, ErrBudget
	}
	if r.replayOnly && optional {
		// The stored run stopped short of what this build's rules would
		// measure (an older gotune): decide on what is stored, as at a
		// budget's end.
		if !r.overBudget {
			r.overBudget = true
			r.notes = append(r.notes, fmt.Sprintf("tune: the store has no %s %s round %d, which this build would measure; decided on the rounds stored", t.Stage, t.Candidate, t.Round))
		}
		return Trial{}, ErrBudget
	}
	if r.replayOnly {
		return Trial{}, fmt.Errorf("tune: %s has no stored trial %s %s round %d (was the sweep finished? resume it with --resume %s)",
			r.dir, t.Stage, t.Candidate, t.Round, r.dir)
	}
	if err := r.budgetFor(t, optional); err != nil {
		return Trial{}, err
	}
	spec := r.pairSpec(t)
	spec.Transport, spec.Options, spec.Nodes = t.Transport, t.Options.With(t.extra), t.Nodes
	if t.Ranks > 2 {
		spec.Ranks, spec.CPUs = t.Ranks, bench.PlaceRanks(t.Ranks)
	}
	if err := t.GPU.apply(&spec); err != nil {
		return Trial{}, fmt.Errorf("trial %s %s: %w", t.Stage, t.Candidate, err)
	}
	settle := int(r.plan.Settle)
	spec = bench.WithSettle(spec, settle)
	began := time.Now()
	res, err := bench.Run(r.ctx, spec, r.plan.Stall, r.hooks)
	var stall *launch.StallError
	switch {
	case errors.As(err, &stall):
		t.Failed, t.Stacks = "hang: "+stall.Error(), stackExcerpt(stall.Stacks)
	case err != nil && r.ctx.Err() == nil:
		// A rank died or failed: once more, then give up (resume later).
		fmt.Fprintf(r.progress, "  %s %s round %d failed (%v); retrying once\n", t.Stage, t.Candidate, t.Round, err)
		res, err = bench.Run(r.ctx, spec, r.plan.Stall, r.hooks)
		if errors.As(err, &stall) {
			t.Failed, t.Stacks, err = "hang: "+stall.Error(), stackExcerpt(stall.Stacks), nil
		}
		if err != nil && r.ctx.Err() == nil && !killedFromOutside(err) {
			// It fails the same way twice: the candidate cannot run here
			// (CMA refused, say). Drop it, on record, and go on.
			t.Failed, err = "error: "+err.Error(), nil
		}
		if err != nil {
			return Trial{}, fmt.Errorf("trial %s %s round %d: %w (resume with --resume %s)", t.Stage, t.Candidate, t.Round, err, r.dir)
		}
	case err != nil:
		return Trial{}, fmt.Errorf("trial %s %s round %d: %w (resume with --resume %s)", t.Stage, t.Candidate, t.Round, err, r.dir)
	}
	if t.Failed == "" {
		if err := bench.DropSettle(&res, settle, t.Sizes); err != nil {
			return Trial{}, fmt.Errorf("trial %s %s round %d: %w", t.Stage, t.Candidate, t.Round, err)
		}
	} else if settle > 0 && len(res.Points) > 0 {
		res.Points = res.Points[1:] // a failed trial's first point is the settling one
	}
	t.Points = res.Points
	if t.Failed == "" {
		t.Failed = stalled(t)
	}
	t.Seconds = time.Since(began).Seconds()
	if err := r.keep(t); err != nil {
		return Trial{}, err
	}
	return t, nil
}

// pairSpec is the plan's benchmark of t's pattern and sizes on a pair of
// ranks, its transport still to be set.
func (r *Runner) pairSpec(t Trial) bench.Spec {
	return bench.Spec{Pattern: t.Pattern, Sizes: t.Sizes, Reps: r.plan.Reps, Window: r.plan.window(t.Pattern),
		CPUs: bench.DefaultCPUs(2), Backend: r.plan.Segment, RepBytes: r.plan.repBytes(t.Pattern)}
}

// budgetFor is ErrBudget, recorded in the store, when an optional trial
// t would eat into the time the stages after its own require.
func (r *Runner) budgetFor(t Trial, optional bool) error {
	keep := r.requiredAfter(t.Stage)
	if t.Stage == stageVerify { // the reserve was kept for it
		keep = 0
	}
	if !optional || r.remaining() >= keep {
		return nil
	}
	if !r.overBudget {
		r.overBudget = true
		r.notes = append(r.notes, fmt.Sprintf("budget: optional rounds and bisection stopped at %s (%v left of %v)",
			t.Stage, r.remaining().Round(time.Second), r.budget))
	}
	if err := r.recordBudgetStop(t.key()); err != nil {
		return err
	}
	return ErrBudget
}

// keep appends a measured trial to the store and the run, and says so.
func (r *Runner) keep(t Trial) error {
	data, _ := json.Marshal(t) // plain data always encodes
	if err := r.store.Append(store.Record{Key: t.key(), Kind: "trial", Time: time.Now().UTC(), Data: data}); err != nil {
		return err
	}
	r.measured++
	r.trials = append(r.trials, t)
	status := fmt.Sprintf("%.2fs", t.Seconds)
	if t.Failed != "" {
		status = "DROPPED: " + t.Failed
	}
	fmt.Fprintf(r.progress, "[%s] %s\n", fmtElapsed(time.Since(r.start)), trialLine(t, status))
	r.meterDone(t, false, status)
	return nil
}

func fmtElapsed(d time.Duration) string {
	d = d.Round(time.Second)
	return fmt.Sprintf("%2d:%02d", int(d.Minutes()), int(d.Seconds())%60)
}

// writeFileAtomic writes a derived file so that readers never see half.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// candidateOrder is round's order of the candidates (bench.InterleaveOrder):
// over the rounds each runs first as often as the others and directly
// follows each of the others equally often.
func candidateOrder[T any](cands []T, round int) []T {
	var out []T
	for _, i := range bench.InterleaveOrder(len(cands), round) {
		out = append(out, cands[i])
	}
	return out
}

// killedFromOutside reports a rank killed by a signal nobody in the job
// sent (kill -9 by an operator, the OOM killer): not the candidate's
// fault, so the sweep stops to be resumed rather than dropping it.
func killedFromOutside(err error) bool {
	var k *launch.KilledError
	return errors.As(err, &k)
}
