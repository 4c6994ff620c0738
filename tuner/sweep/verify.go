package sweep

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/gotune/gotune/profile"
)

// VerifyTarget is the profile a verification run (gotune verify)
// measures, as meta.json records it: where it was and what it hashed to.
type VerifyTarget struct {
	Profile string `json:"profile"`
	Hash    string `json:"hash"`
}

// Verify measures a profile through the runtime selector beside each
// single transport with its defaults, interleaved, over the plan's
// verification sizes and rounds: the sweep's own verification, as a run
// of its own with as many rounds as asked. This is how a checked-in
// profile is re-checked on a node, and how enough rounds are gathered to
// tell a few per cent apart on a noisy one (the sweep's five rounds
// cannot). The run directory holds meta.json, measurements.jsonl (append
// only), measurements.bench and summary; a killed run continues with
// cfg.Resume, and a profile that changed since is refused.
func Verify(ctx context.Context, cfg Config, profilePath string) (Result, error) {
	if cfg.Resume == "" {
		abs, err := filepath.Abs(profilePath)
		if err != nil {
			return Result{}, fmt.Errorf("verify %s: %w", profilePath, err)
		}
		p, err := profile.Load(abs)
		if err != nil {
			return Result{}, err
		}
		if cfg.Plan.VerifySizes.Empty() || cfg.Plan.VerifyRounds < 1 {
			return Result{}, fmt.Errorf("verify %s: the plan has no verification sizes or rounds", profilePath)
		}
		cfg.Verify = &VerifyTarget{Profile: abs, Hash: p.Hash}
	} else if profilePath != "" {
		return Result{}, fmt.Errorf("verify --resume continues the run's own profile; drop the PROFILE argument")
	}
	r, err := Open(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer r.Close()
	target := r.meta.Verify
	if target == nil {
		return Result{Dir: r.dir}, fmt.Errorf("verify --resume %s: a sweep's run directory, not a verification", r.dir)
	}
	p, err := profile.Load(target.Profile)
	if err != nil {
		return Result{Dir: r.dir}, fmt.Errorf("verify --resume %s: %w", r.dir, err)
	}
	if p.Hash != target.Hash {
		return Result{Dir: r.dir}, fmt.Errorf("verify --resume %s: profile %s changed since the run began (hash %s, now %s); start a new verification",
			r.dir, target.Profile, target.Hash, p.Hash)
	}
	r.budget = time.Duration(math.MaxInt64) // every round asked for is measured: none is optional
	if err := r.verify(target.Profile, target.Hash); err != nil {
		return Result{Dir: r.dir}, err
	}
	res := Result{Dir: r.dir, ProfilePath: target.Profile, Measured: r.measured, Reused: r.reused, Notes: r.notes}
	if err := r.writeVerifyDerived(res); err != nil {
		return res, err
	}
	res.Summarized = true
	return res, nil
}

// writeVerifyDerived writes a verification run's Go benchmark view and
// summary: the verify table alone.
func (r *Runner) writeVerifyDerived(res Result) error {
	if err := r.writeBench(); err != nil {
		return err
	}
	var w strings.Builder
	prov := r.meta.Provenance
	fmt.Fprintf(&w, "gotune verify %s of %s (%s) on %s: %s, %d cores, kernel %s, gotune %s\n",
		r.meta.RunID, r.meta.Verify.Profile, r.meta.Verify.Hash, prov.Host, prov.CPUModel, prov.Cores, prov.Kernel, prov.Gotune)
	fmt.Fprintf(&w, "trials: %d stored (%d measured by this process, %d reused)\n\n", len(r.trials), res.Measured, res.Reused)
	r.verifySummary(&w)
	for _, n := range res.Notes {
		fmt.Fprintf(&w, "note: %s\n", n)
	}
	return writeFileAtomic(filepath.Join(r.dir, SummaryFile), []byte(w.String()))
}
