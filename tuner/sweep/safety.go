package sweep

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/hostmem"
	"github.com/gotune/gotune/tuner/probe"
	"github.com/gotune/gotune/tuner/store"
)

// ProbeRecord is a stored verdict: in the run's store (evidence) and in the
// host's quarantine store (so a verdict is never re-run needlessly).
type ProbeRecord struct {
	Probe    string             `json:"probe"`
	Unsafe   bool               `json:"unsafe"`
	Config   string             `json:"config"` // digest of Options
	Options  transports.Options `json:"options,omitempty"`
	Versions map[string]string  `json:"versions"` // gotune, kernel, go
	Outcome  string             `json:"outcome"`
	Detail   string             `json:"detail"`
	Seconds  float64            `json:"seconds"`
	// Measured is what a passing probe timed (H2: allocate+free per buffer).
	Measured map[string]float64 `json:"measured,omitempty"`
	// Stacks is the head of each stalled rank's stacks when the watchdog
	// caught the hang (stackExcerpt), by rank.
	Stacks map[int]string `json:"stacks,omitempty"`
	// SameRunAs names the configuration whose run this verdict is: the
	// probe ran on the same options (routes are not among them), so the
	// run was not repeated (probeOnce).
	SameRunAs string `json:"same_run_as,omitempty"`
}

// digest names a configuration: its sorted options.
func digest(o transports.Options) string {
	b, _ := json.Marshal(o) // a string map always encodes; encoding/json sorts its keys
	sum := sha256.Sum256(b)
	return "cfg:" + hex.EncodeToString(sum[:8])
}

func (r *Runner) versions() map[string]string {
	prov := r.meta.Provenance
	return map[string]string{"gotune": prov.Gotune, "kernel": prov.Kernel, "go": prov.GoVersion}
}

// probeOnce runs a probe variant on opts, or returns the verdict stored for
// the same probe, variant, configuration and versions.
func (r *Runner) probeOnce(p *probe.Probe, unsafe bool, opts transports.Options) (ProbeRecord, bool, error) {
	vers := r.versions()
	cfg := opts
	if !unsafe { // the profile's routes are part of what is vouched for
		cfg = opts.With(r.routes)
	}
	rec := ProbeRecord{Probe: p.ID, Unsafe: unsafe, Config: digest(cfg), Options: opts, Versions: vers}
	vb, _ := json.Marshal(vers) // a string map always encodes
	under := fmt.Sprintf("%x", sha256.Sum256(vb))
	ctx := r.ctx
	if n := r.ranksPerNode(); p.ScalesWithRanks && n > 3 {
		// its verdict is for this rank count (up to 3 ranks it runs alike)
		under += fmt.Sprintf(":ranks=%d", n)
		ctx = probe.WithRanks(ctx, n)
	}
	key := fmt.Sprintf("verdict:%s:%v:%s:%s", p.ID, unsafe, rec.Config, under)
	// A profile mended after its safety phase vouches for new routes on the
	// options already probed: the probe runs on the options alone, so a run
	// of them this process made or found stored is the run (H8's safe pass
	// alone takes 13 deadlines).
	run := fmt.Sprintf("%s:%v:%s:%s", p.ID, unsafe, digest(opts), under)
	for _, s := range []*store.Store{r.store, r.quarantine} {
		if stored, ok := s.Get(key); ok {
			var old ProbeRecord
			if err := json.Unmarshal(stored.Data, &old); err == nil && old.Outcome != probe.ProbeFailed.String() {
				rec = old
				if s == r.quarantine && !r.store.Has(key) {
					r.store.Append(stored) // evidence of this run too
				}
				r.rememberProbeRun(run, rec)
				return rec, true, nil
			}
		}
	}
	if r.replayOnly {
		rec.Outcome, rec.Detail = "not run", "tune runs no probes and this verdict is not stored"
		return rec, false, nil
	}
	if same, ok := r.probeRuns[run]; ok {
		// Its time was the other verdict's: 0 here, so that a resume does
		// not charge it to the budget twice.
		rec.Outcome, rec.Detail, rec.Measured, rec.Stacks = same.Outcome, same.Detail, same.Measured, same.Stacks
		rec.SameRunAs = cmp.Or(same.SameRunAs, same.Config)
	} else {
		v := probe.RunWith(ctx, p, unsafe, r.plan.ProbeDeadline, opts)
		rec.Outcome, rec.Detail, rec.Seconds, rec.Measured, rec.Stacks = v.Outcome.String(), v.Detail, v.Duration.Seconds(), v.Measured, stackExcerpt(v.Stacks)
		if r.ctx.Err() != nil {
			return rec, false, fmt.Errorf("probe %s: %w", p.ID, context.Cause(r.ctx))
		}
		if v.Outcome == probe.ProbeFailed {
			// Not a verdict on the configuration: keep it out of the stores,
			// so that a resume or a later run tries again.
			return rec, false, nil
		}
		r.rememberProbeRun(run, rec)
	}
	data, _ := json.Marshal(rec) // plain data always encodes
	record := store.Record{Key: key, Kind: "verdict", Time: time.Now().UTC(), Data: data}
	if err := r.store.Append(record); err != nil {
		return rec, false, err
	}
	if err := r.quarantine.Append(record); err != nil {
		return rec, false, err
	}
	variant := "safe"
	if unsafe {
		variant = "unsafe"
	}
	fmt.Fprintf(r.progress, "[%s] safety    %-3s %-6s %s (%.1fs)\n", fmtElapsed(time.Since(r.start)), p.ID, variant, rec.Outcome, rec.Seconds)
	return rec, false, nil
}

// rememberProbeRun keeps rec as the run of a probe, variant and options
// (probeOnce's run key) for the verdicts of this process after it.
func (r *Runner) rememberProbeRun(run string, rec ProbeRecord) {
	if r.probeRuns == nil {
		r.probeRuns = map[string]ProbeRecord{}
	}
	if _, ok := r.probeRuns[run]; !ok {
		r.probeRuns[run] = rec
	}
}

// Safety is the safety phase's result.
type Safety struct {
	Verdicts  []ProbeRecord // the safe forms on the emitted configuration
	Detectors []ProbeRecord // the unsafe forms: each must be caught
	Problems  []string      // why the configuration may not be emitted
	Warnings  []string
}

// safety probes the decided configuration: every unsafe variant must be
// caught (else the detector is not trusted) and every safe form must pass
// on the options the profile implies; any failure blocks emission. (The
// progress mode H8 demands was settled before measuring: progressMode.)
func (r *Runner) safety(out *Outcome) (Safety, error) {
	var s Safety
	for _, id := range r.plan.Probes {
		p, err := probe.Lookup(id)
		if err != nil {
			s.Warnings = append(s.Warnings, fmt.Sprintf("probe %s: not in this build (%v)", id, err))
			continue
		}
		det, _, err := r.probeOnce(p, true, nil)
		if err != nil {
			return s, err
		}
		s.Detectors = append(s.Detectors, det)
		if det.Outcome != probe.HazardDetected.String() {
			s.Problems = append(s.Problems, fmt.Sprintf("%s: the unsafe variant was not caught (%s: %s): the detector cannot be trusted", id, det.Outcome, det.Detail))
		}
		v, _, err := r.probeOnce(p, false, r.emittedOptions(*out))
		if err != nil {
			return s, err
		}
		if v.Outcome == probe.Passed.String() {
			s.Verdicts = append(s.Verdicts, v)
			continue
		}
		s.Problems = append(s.Problems, fmt.Sprintf("%s on %s: %s: %s", id, v.Config, v.Outcome, v.Detail))
	}
	return s, nil
}

// emittedOptions are the transport and allocator options the profile
// implies (what the probes run on).
func (r *Runner) emittedOptions(out Outcome) transports.Options {
	o := out.SM.options()
	o[hostmem.KeyPurge] = out.Alloc.Purge
	o[hostmem.KeyTHP] = onOff(out.Alloc.THP)
	o[hostmem.KeyCache] = fmt.Sprint(out.Alloc.Cache)
	return o.With(out.GPU.options())
}
