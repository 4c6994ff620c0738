package stack

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/internal/bytesize"
	"github.com/gotune/gotune/profile/native"
	"github.com/gotune/gotune/tuner/search"
)

// Param is one parameter of a stack and how it is weighed.
type Param struct {
	// Name is the stack's own name, lower-case and without the stack's
	// prefix, as the profile stores it (btl_vader_eager_limit).
	Name string
	// Values are the candidates; Values[0] is what the stack does without
	// a file, so the default stands unless another value wins.
	Values  []string
	Pattern bench.Pattern
	Sizes   []int
	// With are the settings a value needs besides itself, measured and
	// written with it (Open MPI's pml ucx needs pml_ucx_tls opened up).
	With map[string]map[string]string
	// Unless names values chosen before that make this parameter moot
	// (btl_vader_* under pml ucx): it is then not weighed.
	Unless map[string]string
}

// moot reports whether chosen makes p moot.
func (p Param) moot(chosen map[string]string) bool {
	for k, v := range p.Unless {
		if chosen[k] == v {
			return true
		}
	}
	return false
}

// set writes value v of p, with what it needs, into params.
func (p Param) set(params map[string]string, v string) {
	params[p.Name] = v
	maps.Copy(params, p.With[v])
}

// Adapter measures one stack.
type Adapter interface {
	// Name is the stack's name in profiles: openmpi, mpich, ucx, mimalloc.
	Name() string
	// Prepare builds what measuring needs under dir; an error matching
	// sys.ErrNotSupported when the stack is absent.
	Prepare(ctx context.Context, dir string) error
	// Space lists the parameters in the order they are decided.
	Space() []Param
	// Contender measures through the stack with params written as its
	// native file under dir and loaded as a file.
	Contender(dir, label string, params map[string]string) mpistack.Contender
	// Check runs the stack hazards (head-to-head windows and a many-to-one
	// flood, payloads validated, under a deadline) with params loaded:
	// nil, or an error matching mpistack.ErrHang, ErrCorrupt or ErrCrash.
	Check(ctx context.Context, dir string, params map[string]string) error
}

// Loader is an Adapter whose tuned values any benchmark built against its
// MPI library can run under (OSU's, say): Loaded is the launcher
// configuration labelled label, with params loaded as a user loads the
// native file. Open MPI's needs Prepare first (it reads the default files).
type Loader interface {
	Adapter
	Loaded(dir, label string, params map[string]string) (mpistack.Stack, error)
}

// Config says how hard Tune tries.
type Config struct {
	Dir    string // scratch: the benchmark binary and the candidate files
	Rounds int    // interleaved rounds per parameter
	Settle int    // bytes of the discarded point opening every run (0: none)
	Iters  int    // iterations per size and run (0: OSU's counts); tests keep it small
	// ConfirmSizes replaces the confirmation's bandwidth ladder (nil:
	// ConfirmSizes, 4 KiB-16 MiB).
	ConfirmSizes []int
	Progress     io.Writer
	// Memo keeps what Tune measured (nil: nothing kept), so that a tuning
	// killed part way resumes from the steps it had not finished.
	Memo Memo
}

// Memo keeps a tuning's measurements where a resumed run finds them: Tune
// recalls a step (one parameter's values, a confirmation) before measuring
// it and keeps what it measured, under a key naming everything the step
// measures (stack, pattern, sizes, rounds, iterations, each contender's
// settings).
type Memo interface {
	Recall(key string) ([]bench.Result, bool)
	Keep(key string, results []bench.Result) error
}

// run is one contender of a step: its label and the settings it loads.
type run struct {
	label  string
	params map[string]string
}

// Choice is the decision on one parameter.
type Choice struct {
	Param  Param
	Chosen string
	// Scores are each value's geometric-mean ratio against the default
	// over the sizes (round-paired; > 1 is better), in Values order.
	Scores []float64
	// Verdicts are each value's paired verdicts against the default, by
	// size, in Values order (the default's own: nil).
	Verdicts [][]search.Comparison
	Results  []bench.Result
	// Again are the sizes the confirmation measured for a second set of
	// rounds, where the first found the file losing (none elsewhere).
	Again []int
}

// Evidence says in one line what the chosen value rests on.
func (c Choice) Evidence(rounds int) string {
	i := slices.Index(c.Param.Values, c.Chosen)
	sizes := c.Param.Sizes
	span := fmt.Sprintf("%s %s-%s", c.Param.Pattern, bytesize.Format(sizes[0]), bytesize.Format(sizes[len(sizes)-1]))
	if i == 0 {
		var best []string
		for j, s := range c.Scores[1:] {
			best = append(best, fmt.Sprintf("%s %.2fx", c.Param.Values[j+1], s))
		}
		return fmt.Sprintf("default kept: %s, %d interleaved rounds; the others against it: %s", span, rounds, strings.Join(best, ", "))
	}
	won := 0
	for _, v := range c.Verdicts[i] {
		if v.Outcome == search.BWins {
			won++
		}
	}
	return fmt.Sprintf("%s geomean %.2fx over the default %s (%d interleaved rounds; better, settled, at %d of %d sizes, worse at none)",
		span, c.Scores[i], c.Param.Values[0], rounds, won, len(sizes))
}

// Result is what Tune decided for a stack.
type Result struct {
	Stack   string
	Version string
	Params  map[string]string // only the values that differ from the defaults
	Choices []Choice
	// Confirm weighs the file against the defaults (nil when every
	// default stood): bandwidth (or the adapter's patterns) over
	// ConfirmSizes, then latency at 8 bytes,
	// as a user would see the file's effect; the last confirmation when
	// values were dropped. The file stands only if it loses settled at no
	// size, not in geomean, and 8-byte latency no more than search.Noise.
	Confirm []Choice
	// Gains says what the file that stands gains (gains), for its header.
	Gains string
	// Note says which chosen values were dropped after the confirmation,
	// and why ("" when all stand).
	Note string
}

// Confirmer is an Adapter whose file is confirmed on a pattern of its own
// rather than bandwidth (an allocator's on the allocation churn, where its
// settings act).
type Confirmer interface {
	ConfirmPattern() bench.Pattern
}

// PatternsConfirmer is an Adapter whose file is confirmed on several
// patterns, every one of which it must not lose (NCCL's: bandwidth for
// its point-to-point values, all_reduce for its collectives').
type PatternsConfirmer interface {
	ConfirmPatterns() []bench.Pattern
}

// confirmPatterns are the patterns a's file is confirmed on, the first
// also the one a file is narrowed on when it loses 8-byte latency.
func confirmPatterns(a Adapter) []bench.Pattern {
	switch c := a.(type) {
	case PatternsConfirmer:
		return c.ConfirmPatterns()
	case Confirmer:
		return []bench.Pattern{c.ConfirmPattern()}
	}
	return []bench.Pattern{bench.Bandwidth}
}

// ConfirmSizes is the bandwidth ladder of the confirmation.
var ConfirmSizes = ladder(4<<10, 16<<20)

// Tune decides a's parameters one at a time, each on top of the values
// already chosen.
func Tune(ctx context.Context, a Adapter, cfg Config) (Result, error) {
	if err := a.Prepare(ctx, cfg.Dir); err != nil {
		return Result{}, fmt.Errorf("tune %s: %w", a.Name(), err)
	}
	res := Result{Stack: a.Name(), Params: map[string]string{}}
	for _, p := range a.Space() {
		if p.moot(res.Params) {
			continue
		}
		var runs []run
		for _, v := range p.Values {
			params := maps.Clone(res.Params)
			if v != p.Values[0] {
				p.set(params, v)
			}
			runs = append(runs, run{p.Name + "=" + v, params})
		}
		results, err := cfg.measure(ctx, a, "weigh "+p.Name, runs, p.Pattern, p.Sizes)
		if err != nil {
			return res, fmt.Errorf("tune %s: %s: %w", a.Name(), p.Name, err)
		}
		if res.Version == "" && len(results) > 0 {
			res.Version = results[0].Provenance.Libraries[a.Name()]
		}
		c := choose(p, results)
		res.Choices = append(res.Choices, c)
		if c.Chosen != p.Values[0] {
			p.set(res.Params, c.Chosen)
		}
	}
	if len(res.Params) == 0 {
		return res, nil
	}
	// The file as users load it, against the defaults at every size of the
	// ladder it claims: it must lose settled at no size, nor in geomean,
	// nor 8-byte latency beyond the noise. A file that does is narrowed,
	// one value at a time (the one whose absence scores best): the value
	// gives way to its parameter's runner-up where one also won its stage,
	// else it is dropped, until the file passes or nothing is left. Why a
	// runner-up: a parameter's best value can cost what a milder one does
	// not (an eager limit of 16 KiB costing 8-byte latency that 8 KiB
	// leaves alone).
	kept := departures(res.Choices)
	tried := map[int][]string{}
	var notes []string
	for len(kept) > 0 {
		params := paramsOf(res.Choices, kept)
		confirm, err := confirmFile(ctx, a, cfg, params)
		if err != nil {
			return res, err
		}
		res.Confirm = confirm
		why, lostOn := fileLoses(confirm)
		if why == "" {
			res.Params = params
			res.Gains = gains(confirm)
			res.Note = strings.Join(notes, "; ")
			return res, nil
		}
		i := 0
		if len(kept) > 1 {
			if i, err = worstOf(ctx, a, cfg, lostOn, res.Choices, kept); err != nil {
				return res, err
			}
			why = "with it the file " + why
		}
		d := kept[i]
		c := &res.Choices[d.choice]
		tried[d.choice] = append(tried[d.choice], d.value)
		if next := c.runnerUp(tried[d.choice]); next != "" {
			notes = append(notes, fmt.Sprintf("narrowed %s to %s (%s)", d.line(res.Choices), next, why))
			kept[i].value, c.Chosen = next, next
			continue
		}
		notes = append(notes, fmt.Sprintf("dropped %s (%s)", d.line(res.Choices), why))
		kept = slices.Delete(kept, i, i+1)
	}
	res.Note = strings.Join(notes, "; ") + ": defaults kept"
	res.Params = map[string]string{}
	return res, nil
}

// departure is a value the file departs from the defaults with: its
// parameter's index among the choices, and the value.
type departure struct {
	choice int
	value  string
}

// line is d's settings as k=v.
func (d departure) line(choices []Choice) string {
	return ParamsLine(paramsOf(choices, []departure{d}))
}

// departures are the values of choices that depart from the defaults, in
// the order they were chosen.
func departures(choices []Choice) []departure {
	var out []departure
	for i, c := range choices {
		if c.Chosen != c.Param.Values[0] {
			out = append(out, departure{i, c.Chosen})
		}
	}
	return out
}

// paramsOf merges the settings of values, each with what it needs.
func paramsOf(choices []Choice, values []departure) map[string]string {
	params := map[string]string{}
	for _, d := range values {
		choices[d.choice].Param.set(params, d.value)
	}
	return params
}

// runnerUp is the best value of c, other than the default and those
// tried, scored above the default by more than the noise and better
// settled at some size; "" when there is none. Unlike choose it forgives
// a size the value lost at in its stage: the confirmation it goes to
// measures every size again, with more rounds where one loses, and one
// size in a stage of a few fresh pairs is what host noise strikes (Open
// MPI's eager limit 8192, 1.21x over 7 sizes, "lost" 13.8% at one of
// them on the H200 host; docs/performance.md).
func (c Choice) runnerUp(tried []string) string {
	best, value := 1+search.Noise, ""
	for i := 1; i < len(c.Param.Values); i++ {
		if v := c.Param.Values[i]; !slices.Contains(tried, v) && c.won(i) && c.Scores[i] > best {
			best, value = c.Scores[i], v
		}
	}
	return value
}

// stands says whether value i beat the default, settled, at some size
// and lost to it at none: with a score above the noise, what a value
// needs to be chosen.
func (c Choice) stands(i int) bool {
	lost := slices.ContainsFunc(c.Verdicts[i], func(v search.Comparison) bool { return v.Outcome == search.AWins })
	return c.won(i) && !lost
}

// won says whether value i beat the default, settled, at some size.
func (c Choice) won(i int) bool {
	return slices.ContainsFunc(c.Verdicts[i], func(v search.Comparison) bool { return v.Outcome == search.BWins })
}

// ParamsLine is params as k=v, sorted, space-separated.
func ParamsLine(params map[string]string) string {
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		kv = append(kv, k+"="+params[k])
	}
	return strings.Join(kv, " ")
}

// confirmSizes is the confirmation's ladder: the config's, or ConfirmSizes.
func (cfg Config) confirmSizes() []int {
	if cfg.ConfirmSizes != nil {
		return cfg.ConfirmSizes
	}
	return ConfirmSizes
}

// measure runs the contenders of runs through a side by side in cfg.Rounds
// interleaved rounds over sizes of pattern, one repetition a round; or
// recalls them from cfg.Memo, where an earlier run of the step left them.
// step names what the measurement is for: two steps that measure alike
// (a confirmation and its second set of rounds) are kept apart.
func (cfg Config) measure(ctx context.Context, a Adapter, step string, runs []run, pattern bench.Pattern, sizes []int) ([]bench.Result, error) {
	key := cfg.stepKey(a.Name(), step, runs, pattern, sizes)
	if cfg.Memo != nil {
		if results, ok := cfg.Memo.Recall(key); ok && len(results) == len(runs) {
			return results, nil
		}
	}
	cs := make([]mpistack.Contender, len(runs))
	for i, r := range runs {
		cs[i] = a.Contender(cfg.Dir, r.label, r.params)
	}
	spec := bench.Spec{Pattern: pattern, Sizes: sizes, Reps: 1, Iters: cfg.Iters}
	results, err := mpistack.Interleave(ctx, cs, spec, cfg.Rounds, cfg.Settle, 0, mpistack.Lines(cfg.Progress))
	if err != nil || cfg.Memo == nil {
		return results, err
	}
	if err := cfg.Memo.Keep(key, results); err != nil {
		return nil, fmt.Errorf("keep %s's measurements: %w", a.Name(), err)
	}
	return results, nil
}

// stepKey names one step's measurements: what a step measures and how, so
// that a changed plan or space measures anew.
func (cfg Config) stepKey(stack, step string, runs []run, pattern bench.Pattern, sizes []int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s|%s|%s|%v|rounds %d|settle %d|iters %d", stack, step, pattern, sizes, cfg.Rounds, cfg.Settle, cfg.Iters)
	for _, r := range runs {
		fmt.Fprintf(h, "|%s: %s", r.label, ParamsLine(r.params))
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:16])
}

// confirmFile weighs the file of params against the defaults: bandwidth
// (or the adapter's own pattern) over the confirmation ladder, and 8-byte
// latency. Where the file loses (at a size, settled; or in latency beyond
// the noise), those sizes are measured for as many rounds again and judged
// on all of them: every round of a stack is a fresh pair of processes, and
// on some nodes pairs differ by more than a value gains, so one unlucky
// pair must not strike a value on its own.
func confirmFile(ctx context.Context, a Adapter, cfg Config, params map[string]string) ([]Choice, error) {
	runs := []run{{"defaults", nil}, {"tuned", params}}
	type step struct {
		p       Param
		byScore bool // a loss beyond the noise counts, settled or not
	}
	var steps []step
	for _, pat := range confirmPatterns(a) {
		steps = append(steps, step{Param{Name: "tuned file", Values: []string{"defaults", "tuned"}, Pattern: pat, Sizes: cfg.confirmSizes()}, false})
	}
	steps = append(steps, step{Param{Name: "tuned file", Values: []string{"defaults", "tuned"}, Pattern: bench.Latency, Sizes: []int{8}}, true})
	var out []Choice
	for _, step := range steps {
		p := step.p
		results, err := cfg.measure(ctx, a, "confirm", runs, p.Pattern, p.Sizes)
		if err != nil {
			return nil, fmt.Errorf("tune %s: confirm %s: %w", a.Name(), p.Pattern, err)
		}
		c := choose(p, results)
		if at := c.lostAt(step.byScore); len(at) > 0 {
			again, err := cfg.measure(ctx, a, "confirm again", runs, p.Pattern, at)
			if err != nil {
				return nil, fmt.Errorf("tune %s: confirm %s again at %d sizes: %w", a.Name(), p.Pattern, len(at), err)
			}
			c = choose(p, pooled(results, again))
			c.Again = at
		}
		out = append(out, c)
	}
	return out, nil
}

// lostAt lists the sizes where the first value other than the default
// loses to it: settled, or (byScore) wherever its score is below the
// default's by more than the noise.
func (c Choice) lostAt(byScore bool) []int {
	if byScore && c.Scores[1] < 1-search.Noise {
		return c.Param.Sizes
	}
	var at []int
	for i, v := range c.Verdicts[1] {
		if v.Outcome == search.AWins {
			at = append(at, c.Param.Sizes[i])
		}
	}
	return at
}

// pooled is first with the rounds of again added at again's sizes; every
// contender gains the same rounds, so the rounds stay paired by index.
func pooled(first, again []bench.Result) []bench.Result {
	out := make([]bench.Result, len(first))
	for i, r := range first {
		out[i] = r
		out[i].Points = slices.Clone(r.Points)
		for j, pt := range out[i].Points {
			for _, more := range again[i].Points {
				if more.Size == pt.Size {
					pt.Samples = slices.Concat(pt.Samples, more.Samples)
					out[i].Points[j] = pt
				}
			}
		}
	}
	return out
}

// fileLoses says how a confirmed file loses ("" if it does not) and on
// which pattern: at a size, settled by more than search.Noise; in
// geomean; or in 8-byte latency beyond the noise, settled or not (a user
// installs it for every job). confirm is confirmFile's: the patterns',
// then latency's.
func fileLoses(confirm []Choice) (string, bench.Pattern) {
	bws, lat := confirm[:len(confirm)-1], confirm[len(confirm)-1]
	for _, bw := range bws {
		var at []string
		for i, v := range bw.Verdicts[1] {
			if v.Outcome == search.AWins {
				at = append(at, fmt.Sprintf("%s %+.1f%%", bytesize.Format(bw.Param.Sizes[i]), 100*v.Gain))
			}
		}
		of := ""
		if len(bws) > 1 {
			of = " of " + string(bw.Param.Pattern)
		}
		switch {
		case len(at) > 0:
			return "lost at " + strings.Join(at, ", ") + of, bw.Param.Pattern
		case bw.Scores[1] < 1:
			return fmt.Sprintf("scored %.3fx the defaults' %s in geomean", bw.Scores[1], bw.Param.Pattern), bw.Param.Pattern
		}
	}
	best := bws[0]
	for _, bw := range bws[1:] {
		if bw.Scores[1] > best.Scores[1] {
			best = bw
		}
	}
	if best.Scores[1] < MinFileGain {
		return fmt.Sprintf("gained %.3fx the defaults' %s in geomean, below the %.2fx a file must gain", best.Scores[1], best.Param.Pattern, MinFileGain), best.Param.Pattern
	}
	if lat.Scores[1] < 1-search.Noise {
		return fmt.Sprintf("scored %.3fx the defaults' 8-byte latency (%s)", lat.Scores[1], lat.Verdicts[1][0]), bws[0].Param.Pattern
	}
	return "", ""
}

// MinFileGain is the geomean over its ladder a file must score against
// the defaults, on one of the patterns it is confirmed on (and 1 on the
// others), to be written. Why: a
// file is installed for every job on the node, and a few per cent in
// geomean is within what the reference benchmark and OSU disagree by (a
// file the reference benchmark confirmed at 1.07x measured 1.036x through
// OSU on the host that wrote it; docs/performance.md).
const MinFileGain = 1.05

// gains says what a confirmed file gains: per pattern its geomean over
// the ladder and the sizes where it is faster, settled; then its 8-byte
// latency.
func gains(confirm []Choice) string {
	bws, lat := confirm[:len(confirm)-1], confirm[len(confirm)-1]
	var parts []string
	for _, bw := range bws {
		var at []int
		for i, v := range bw.Verdicts[1] {
			if v.Outcome == search.BWins {
				at = append(at, bw.Param.Sizes[i])
			}
		}
		sizes := bw.Param.Sizes
		faster := "none"
		if len(at) > 0 {
			faster = sizeRanges(at, sizes)
		}
		parts = append(parts, fmt.Sprintf("%s %.2fx the defaults in geomean over %s-%s, faster (settled) at %s, slower at none",
			bw.Param.Pattern, bw.Scores[1], bytesize.Format(sizes[0]), bytesize.Format(sizes[len(sizes)-1]), faster))
	}
	return fmt.Sprintf("%s; 8-byte latency %.2fx", strings.Join(parts, "; "), lat.Scores[1])
}

// sizeRanges writes the sizes of at as runs of consecutive ladder sizes
// ("64K-1M, 8M").
func sizeRanges(at, ladder []int) string {
	var runs []string
	for i := 0; i < len(at); {
		j := i
		for j+1 < len(at) && slices.Index(ladder, at[j+1]) == slices.Index(ladder, at[j])+1 {
			j++
		}
		run := bytesize.Format(at[i])
		if j > i {
			run += "-" + bytesize.Format(at[j])
		}
		runs = append(runs, run)
		i = j + 1
	}
	return strings.Join(runs, ", ")
}

// worstOf weighs, side by side with the defaults, on the pattern the file
// lost, the file without each of kept's values in turn, and returns the index of the value whose
// absence scores best (a file that loses no size first).
func worstOf(ctx context.Context, a Adapter, cfg Config, pattern bench.Pattern, choices []Choice, kept []departure) (int, error) {
	runs := []run{{"defaults", nil}}
	for i, d := range kept {
		without := slices.Concat(kept[:i], kept[i+1:])
		runs = append(runs, run{"without " + d.line(choices), paramsOf(choices, without)})
	}
	results, err := cfg.measure(ctx, a, "narrow", runs, pattern, cfg.confirmSizes())
	if err != nil {
		return 0, fmt.Errorf("tune %s: narrow the file: %w", a.Name(), err)
	}
	best, bestScore, bestLoses := 0, 0.0, true
	for i := range kept {
		score, verdicts, _ := against(results[0], results[i+1], pattern.HigherIsBetter())
		loses := slices.ContainsFunc(verdicts, func(v search.Comparison) bool { return v.Outcome == search.AWins })
		if (bestLoses && !loses) || (loses == bestLoses && score > bestScore) {
			best, bestScore, bestLoses = i, score, loses
		}
	}
	return best, nil
}

// choose keeps the default unless a value scores above it by more than
// search.Noise, beats it (settled, paired over the rounds) at some size and
// loses at none; among those, the best scorer. A score within the noise of
// nothing settled is no reason to write a value into a file.
func choose(p Param, results []bench.Result) Choice {
	c := Choice{Param: p, Chosen: p.Values[0], Results: results, Scores: make([]float64, len(results)), Verdicts: make([][]search.Comparison, len(results))}
	higher := p.Pattern.HigherIsBetter()
	c.Scores[0] = 1
	best := 1 + search.Noise
	for i := 1; i < len(results); i++ {
		score, verdicts, _ := against(results[0], results[i], higher)
		c.Scores[i], c.Verdicts[i] = score, verdicts
		if c.stands(i) && score > best {
			best, c.Chosen = score, p.Values[i]
		}
	}
	return c
}

// against compares b with the reference a size by size: the geometric mean
// of the per-size medians of round-paired ratios (oriented so > 1 is
// better), each size's verdict (paired over the rounds, the noise pooled
// over the sizes: search.Paired), and whether a wins at some size.
func against(a, b bench.Result, higher bool) (score float64, verdicts []search.Comparison, lost bool) {
	var sets search.Priors
	logSum := 0.0
	for i, pa := range a.Points {
		if i >= len(b.Points) || b.Points[i].Size != pa.Size {
			return 0, nil, true // not measured alike: no basis to depart from the default
		}
		d := search.LogRatios(pa.Samples, b.Points[i].Samples, higher)
		if len(d) == 0 {
			return 0, nil, true
		}
		sets = append(sets, search.SizedRounds{Size: pa.Size, D: d})
		logSum += search.Median(d)
	}
	if len(sets) == 0 {
		return 0, nil, true
	}
	for _, s := range sets {
		v := search.Paired(s.D, sets.At(s.Size))
		verdicts = append(verdicts, v)
		if v.Outcome == search.AWins {
			lost = true
		}
	}
	return math.Exp(logSum / float64(len(sets))), verdicts, lost
}

// fileLines is params as the value lines of stack's native file, one a
// line, as profile/native renders them for users.
func fileLines(stack string, params map[string]string) ([]byte, error) {
	lines, err := native.Lines(stack, params)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	return []byte(b.String()), nil
}

// envLines is params as NAME=value environment lines under stack's names
// (for the stacks whose file is an environment file: MPICH, mimalloc).
func envLines(stack string, params map[string]string) []string {
	var env []string
	for _, k := range slices.Sorted(maps.Keys(params)) {
		name, _ := native.Var(stack, k) // callers pass their own, known stack
		env = append(env, name+"="+params[k])
	}
	return env
}
