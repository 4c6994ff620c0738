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
	// Against is the second profile measured beside this one instead of
	// the single transports (gotune verify --against); nil: none.
	Against *VerifyTarget `json:"against,omitempty"`
}

// againstCandidate is the name of the second profile's trials.
const againstCandidate = "against"

// loadTarget loads the profile at path as a verification target.
func loadTarget(path string) (*VerifyTarget, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", path, err)
	}
	p, err := profile.Load(abs)
	if err != nil {
		return nil, err
	}
	return &VerifyTarget{Profile: abs, Hash: p.Hash}, nil
}

// changed is an error when the profile of t no longer hashes as recorded.
func (t *VerifyTarget) changed(dir string) error {
	p, err := profile.Load(t.Profile)
	if err != nil {
		return fmt.Errorf("verify --resume %s: %w", dir, err)
	}
	if p.Hash != t.Hash {
		return fmt.Errorf("verify --resume %s: profile %s changed since the run began (hash %s, now %s); start a new verification",
			dir, t.Profile, t.Hash, p.Hash)
	}
	return nil
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
func Verify(ctx context.Context, cfg Config, profilePath, againstPath string) (Result, error) {
	if cfg.Resume == "" {
		target, err := loadTarget(profilePath)
		if err != nil {
			return Result{}, err
		}
		if againstPath != "" {
			if target.Against, err = loadTarget(againstPath); err != nil {
				return Result{}, err
			}
		}
		if cfg.Plan.VerifySizes.Empty() || cfg.Plan.VerifyRounds < 1 {
			return Result{}, fmt.Errorf("verify %s: the plan has no verification sizes or rounds", profilePath)
		}
		cfg.Verify = target
	} else if profilePath != "" || againstPath != "" {
		return Result{}, fmt.Errorf("verify --resume continues the run's own profiles; drop the PROFILE argument and --against")
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
	for _, t := range []*VerifyTarget{target, target.Against} {
		if t == nil {
			continue
		}
		if err := t.changed(r.dir); err != nil {
			return Result{Dir: r.dir}, err
		}
	}
	r.budget = time.Duration(math.MaxInt64) // every round asked for is measured: none is optional
	if _, err := r.verify(target.Profile, target.Hash, r.plan.VerifySizes.Sizes(), 1, 1, 0); err != nil {
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
	if t := r.meta.Verify.Against; t != nil {
		fmt.Fprintf(&w, "against: %s (%s), measured as the column %q\n\n", t.Profile, t.Hash, againstCandidate)
	}
	r.verifySummary(&w)
	for _, n := range res.Notes {
		fmt.Fprintf(&w, "note: %s\n", n)
	}
	return writeFileAtomic(filepath.Join(r.dir, SummaryFile), []byte(w.String()))
}
