package sweep

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/profile/native"
	"github.com/gotune/gotune/tuner/stack"
	"github.com/gotune/gotune/tuner/store"
)

// NativeDir is where a run writes the stacks' native config files.
const NativeDir = "native"

// adapters are the stacks `gotune sweep --stack` tunes (tests replace one).
var adapters = func() map[string]func() stack.Adapter {
	m := map[string]func() stack.Adapter{}
	for _, name := range stack.Names() {
		m[name] = func() stack.Adapter {
			a, _ := stack.New(name) // a name from stack.Names
			return a
		}
	}
	return m
}()

// StackNames lists the stacks a plan may name.
func StackNames() []string { return slices.Sorted(maps.Keys(adapters)) }

// StackOutcome is what the sweep decided for one stack, as stored: a
// stack's tuning is measured once per run directory and replayed by tune
// and resume.
type StackOutcome struct {
	Stack    string            `json:"stack"`
	Version  string            `json:"version"`
	Params   map[string]string `json:"params"`   // the values the file sets (the rest: the stack's defaults)
	Evidence map[string]string `json:"evidence"` // per value in Params
	Lines    []string          `json:"lines"`    // the summary's account of every parameter weighed
	// Gains says what the confirmed file gains (stack.Result.Gains).
	Gains string `json:"gains,omitempty"`
	// Check is the stack hazards' verdict on Params: "passed", or why
	// the values were dropped (the file then keeps the stack's defaults).
	Check string `json:"check"`
}

// stackKey is the store key of a stack's outcome.
func stackKey(name string) string { return "stack:" + name }

// stackStages tunes (or replays) every stack the plan names; the time it
// takes is added to the budget.
func (r *Runner) stackStages() ([]StackOutcome, error) {
	var outs []StackOutcome
	for _, name := range r.plan.Stacks {
		if rec, ok := r.store.Get(stackKey(name)); ok {
			var o StackOutcome
			if err := json.Unmarshal(rec.Data, &o); err != nil {
				return outs, fmt.Errorf("stack %s: stored outcome: %w", name, err)
			}
			outs = append(outs, o)
			continue
		}
		if r.replayOnly {
			return outs, fmt.Errorf("stack %s: no stored outcome in %s to replay: tune it with gotune sweep --resume %s", name, r.dir, r.dir)
		}
		began := time.Now()
		o, err := r.tuneStack(name)
		if err != nil {
			return outs, err
		}
		// The plan's budget is gotune's own stages'; a stack's time is
		// its own, so the verification after it keeps its rounds.
		r.budget += time.Since(began)
		data, _ := json.Marshal(o) // plain data always encodes
		if err := r.store.Append(store.Record{Key: stackKey(name), Kind: "stack", Time: time.Now().UTC(), Data: data}); err != nil {
			return outs, err
		}
		outs = append(outs, o)
	}
	return outs, nil
}

// tuneStack measures one stack's parameters through itself, then runs the
// stack hazards on the chosen values; values that fail them are dropped.
func (r *Runner) tuneStack(name string) (StackOutcome, error) {
	dir, err := launch.TempDir("stack") // named for this process: the next launch removes it if the sweep is killed
	if err != nil {
		return StackOutcome{}, fmt.Errorf("stack %s: %w", name, err)
	}
	defer os.RemoveAll(dir)
	a := adapters[name]()
	fmt.Fprintf(r.progress, "stack %s: tuned through itself, %d interleaved rounds a parameter\n", name, r.plan.StackRounds) // its space is known after Prepare
	res, err := stack.Tune(r.ctx, a, stack.Config{Dir: dir, Rounds: r.plan.StackRounds, Settle: int(r.plan.Settle), Iters: r.plan.StackIters, Progress: r.progress, Memo: storeMemo{r.store}})
	if err != nil {
		return StackOutcome{}, err
	}
	o := StackOutcome{Stack: name, Version: res.Version, Params: res.Params, Evidence: map[string]string{}, Gains: res.Gains, Check: "passed"}
	for _, c := range res.Choices {
		if _, ok := res.Params[c.Param.Name]; ok {
			o.Evidence[c.Param.Name] = c.Evidence(r.plan.StackRounds)
		}
		o.Lines = append(o.Lines, choiceLine(c))
	}
	for _, c := range res.Confirm {
		// The confirmation's rule is not a parameter's: the file stands
		// unless it loses (Tune's Note says what was dropped), so * marks that.
		c.Chosen = "tuned"
		if len(res.Params) == 0 {
			c.Chosen = "defaults"
		}
		o.Lines = append(o.Lines, choiceLine(c))
	}
	if res.Note != "" {
		o.Lines = append(o.Lines, "note: "+res.Note)
	}
	for k := range o.Evidence {
		if _, ok := res.Params[k]; !ok {
			delete(o.Evidence, k) // a value the confirmation dropped
		}
	}
	if res.Gains != "" {
		o.Lines = append(o.Lines, "confirmed: "+res.Gains)
	}
	if len(o.Params) > 0 {
		if err := a.Check(r.ctx, dir, o.Params); err != nil {
			if !errors.Is(err, mpistack.ErrHang) && !errors.Is(err, mpistack.ErrCorrupt) && !errors.Is(err, mpistack.ErrCrash) {
				return o, fmt.Errorf("stack %s: hazard check: %w", name, err) // no verdict on the values
			}
			o.Check = fmt.Sprintf("stack hazards failed with %v: %v; defaults kept", stack.ParamsLine(o.Params), err)
			o.Params, o.Evidence, o.Gains = map[string]string{}, map[string]string{}, ""
			r.quarantineStack(name, res.Params, err)
		}
	}
	return o, nil
}

// storeMemo keeps a stack tuning's steps in the run's store, so that a
// sweep killed while it tunes a stack resumes at the step it was in.
type storeMemo struct{ s *store.Store }

// stackStepKey is the store key of one step of a stack's tuning.
func stackStepKey(key string) string { return "stack-step:" + key }

func (m storeMemo) Recall(key string) ([]bench.Result, bool) {
	rec, ok := m.s.Get(stackStepKey(key))
	if !ok {
		return nil, false
	}
	var results []bench.Result
	if err := json.Unmarshal(rec.Data, &results); err != nil {
		return nil, false // not this build's record: measure the step anew
	}
	return results, true
}

func (m storeMemo) Keep(key string, results []bench.Result) error {
	data, err := json.Marshal(results)
	if err != nil {
		return err
	}
	return m.s.Append(store.Record{Key: stackStepKey(key), Kind: "stack-step", Time: time.Now().UTC(), Data: data})
}

// choiceLine is one parameter's account: every value's score against the
// default and the value chosen.
func choiceLine(c stack.Choice) string {
	var vs []string
	for i, v := range c.Param.Values {
		mark := " "
		if v == c.Chosen {
			mark = "*"
		}
		vs = append(vs, fmt.Sprintf("%s%s %.3f", mark, v, c.Scores[i]))
	}
	line := fmt.Sprintf("%s (%s over %d sizes): %s", c.Param.Name, c.Param.Pattern, len(c.Param.Sizes), strings.Join(vs, "  "))
	if len(c.Again) > 0 {
		line += fmt.Sprintf(" (lost at %s in the first rounds: measured again, judged on all)", sizeList(c.Again))
	}
	return line
}

// quarantineStack records a stack configuration that failed the stack
// hazards in the host's quarantine, as a failed probe verdict is.
func (r *Runner) quarantineStack(name string, params map[string]string, cause error) {
	rec := ProbeRecord{Probe: "stack-" + name, Config: digest(params), Options: params, Versions: r.versions(),
		Outcome: "hazard detected", Detail: cause.Error()}
	data, _ := json.Marshal(rec) // plain data always encodes
	key := "verdict:stack-" + name + ":" + rec.Config
	if r.quarantine != nil && !r.quarantine.Has(key) {
		if err := r.quarantine.Append(store.Record{Key: key, Kind: "verdict", Time: time.Now().UTC(), Data: data}); err != nil {
			r.notes = append(r.notes, fmt.Sprintf("stack %s: quarantine: %v", name, err))
		}
	}
}

// profileStacks are the outcomes as the profile's stacks section.
func profileStacks(outs []StackOutcome) map[string]profile.Stack {
	if len(outs) == 0 {
		return nil
	}
	m := map[string]profile.Stack{}
	for _, o := range outs {
		m[o.Stack] = profile.Stack{Version: o.Version, Params: o.Params, Evidence: o.Evidence, Confirmed: o.Gains}
	}
	return m
}

// writeNative renders the native file of every stack in p (and MVAPICH2's
// where it derives) under the run's native/ directory.
func (r *Runner) writeNative(p *profile.Profile) error {
	if stacks := native.Available(p); len(stacks) > 0 {
		_, err := native.Write(filepath.Join(r.dir, NativeDir), stacks, p)
		return err
	}
	return nil
}
