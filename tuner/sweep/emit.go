package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/auto"
	"github.com/gotune/gotune/transports/sm"
)

// buildProfile turns the decisions and the passed probes into a profile.
func (r *Runner) buildProfile(out Outcome, s Safety) *profile.Profile {
	prov := r.meta.Provenance
	libs := map[string]string{"go": prov.GoVersion, "kernel": prov.Kernel}
	for k, v := range prov.Libraries {
		libs[k] = v
	}
	var ranges []profile.Range
	for _, rg := range out.Ranges {
		ranges = append(ranges, profile.Range{Min: rg.Min, Transport: rg.Transport, Protocol: rg.Protocol, Mode: rg.Mode})
	}
	progress := out.SM.Progress
	if progress == "" {
		progress = "poll"
	}
	version := hostinfo.GotuneVersion()
	if r.replayOnly && prov.Gotune != "" {
		// A replay re-emits the run's profile: under the run's version
		// the same decisions hash alike, so the stored verification
		// (keyed by the profile's hash) and its mends replay too.
		version = prov.Gotune
	}
	p := &profile.Profile{
		Version: profile.FormatVersion,
		Gotune:  version,
		Created: r.meta.Started.UTC().Format(time.RFC3339), // the run's: same decisions, same hash
		Scope:   profile.Scope{Hosts: []string{prov.Host}, CPUModel: prov.CPUModel, Cores: prov.Cores},
		Fingerprint: profile.Fingerprint{Host: prov.Host, CPUModel: prov.CPUModel, Cores: prov.Cores,
			NUMANodes: prov.NUMANodes, Kernel: prov.Kernel},
		Libraries: libs,
		Evidence: profile.Evidence{Run: r.meta.RunID, Measurements: MeasurementsFile,
			Records: len(r.trials), Plan: r.plan.Name},
		Decisions: map[string]map[string]profile.Decision{profile.Intranode: {profile.HostHost: {
			Ranges: ranges, EagerLimit: out.SM.Eager, FragSize: out.SM.Frag, FragSlots: out.SM.Slots,
			FIFODepth: out.SM.Depth, FIFODepthRanks: out.SM.DepthRanks, CellSize: out.SM.Cell, Copy: "auto", Progress: progress, Park: out.SM.Park,
			Footprint: out.Footprint,
		}}},
		Allocator: profile.Allocator{CacheBytes: out.Alloc.Cache, Purge: out.Alloc.Purge, THP: out.Alloc.THP},
	}
	p.Stacks = profileStacks(out.Stacks)
	if ip := out.Internode; ip != nil {
		p.Scope.Hosts = r.meta.Nodes // the profile routes between them
		p.Decisions[profile.Internode] = map[string]profile.Decision{profile.HostHost: {
			Ranges: []profile.Range{{Min: 0, Transport: ip.Transport, Protocol: "eager"},
				{Min: ip.Eager + 1, Transport: ip.Transport, Protocol: "rendezvous"}},
			EagerLimit: ip.Eager, Options: unprefixed(ip.Transport, ip.Options), Footprint: internodeFootprint(*ip),
		}}
	}
	if g := out.GPU; g != nil {
		p.GPU = &profile.GPU{GPUs: g.GPUs, IPCThreshold: g.Threshold, Staging: g.Staging,
			PinnedThreshold: g.PinnedThreshold, Copy: g.Copy, Completion: g.Completion, Relay: g.Relay, IPCCache: g.Cache, Allocator: g.Alloc, Avoided: g.Stalled}
	}
	for _, v := range s.Verdicts {
		p.Safety = append(p.Safety, profile.Verdict{Probe: v.Probe, Config: v.Config, Outcome: v.Outcome, Detail: v.Detail})
	}
	return p
}

// maxMends is how often the sweep may re-decide ranges that its
// verification found losing and verify them again before it emits.
const maxMends = 2

// emitVerified writes the profile of out, verifies it, and closes the
// loop: where a single transport beats the profile at a size, settled
// (verifyLosses) or leaning ahead at the last look (verifyLeans), the
// size's route goes to that transport, the safety
// phase runs on the new routes, and the sizes whose route changed are
// verified again, up to maxMends times. Losses it cannot mend are named
// in the summary's notes and in the profile (evidence.known_losses).
func (r *Runner) emitVerified(path string, out *Outcome, s *Safety) error {
	sizes, first, required := r.plan.VerifySizes.Sizes(), 1, 1
	confirmed := false
	for mend := 0; ; mend++ {
		p := r.buildProfile(*out, *s)
		if err := r.writeProfile(path, p); err != nil {
			return err
		}
		abs, _ := filepath.Abs(path) // path is the run directory's own, which exists: Abs cannot fail
		next, err := r.verify(abs, p.Hash, sizes, first, required, verifyTrailRounds)
		if err != nil {
			return err
		}
		cs := r.verifyComparisons()
		losses := settledLosses(cs)
		changed, leans := []int(nil), []verifyLoss(nil)
		if mend < maxMends {
			leans = leaningLosses(cs, out.SM)
			changed = mendRanges(out, append(slices.Clone(losses), leans...), r.plan.VerifySizes.Sizes())
		}
		if len(losses) == 0 && len(changed) == 0 {
			return nil // a lean that no route mends is not a loss
		}
		if len(changed) == 0 && !confirmed {
			// A loss no route mends is recorded only once fresh rounds
			// settle it again on their own: the verification looked at
			// the trailing sizes after every added round, and so many
			// looks at many sizes settle a chance lead now and then (on
			// the development VM, a single transport "won" settled where
			// auto sends exactly as it does); on a host whose process
			// pairs stream in two modes for their life, a few rounds can
			// draw every slow pair for auto and every fast one for its
			// rival (docs/performance.md, the 2 x H200 host's pair modes).
			confirmed = true
			from := next
			if next, err = r.verify(abs, p.Hash, lossSizes(losses), next, confirmRounds, 0); err != nil {
				return err
			}
			var held []verifyLoss
			held, r.faded = r.replicated(losses, from)
			for _, f := range r.faded {
				r.notes = append(r.notes, fmt.Sprintf("verify: %s did not settle again over %d fresh rounds (%v): not a loss", f, confirmRounds, f.Fresh))
			}
			// What no longer decides a loss may still trail by more than
			// the noise: it gets the trailing sizes' rounds too.
			if trailing := r.stillTrailing(r.faded); len(trailing) > 0 {
				if next, err = r.verify(abs, p.Hash, trailing, next, 1, verifyTrailRounds); err != nil {
					return err
				}
			}
			if losses = held; len(losses) == 0 {
				return nil
			}
		}
		if len(changed) == 0 {
			for _, l := range losses {
				p.Evidence.KnownLosses = append(p.Evidence.KnownLosses, l.String())
			}
			r.notes = append(r.notes, fmt.Sprintf("verify: the profile loses to a single transport at %d size(s) it could not mend: %s (recorded in the profile as known_losses)",
				len(losses), strings.Join(p.Evidence.KnownLosses, "; ")))
			return r.writeProfile(path, p)
		}
		var lost []string
		for _, l := range losses {
			lost = append(lost, transports.FormatSize(l.Size)+" to "+l.Winner)
		}
		for _, l := range leans {
			if slices.Contains(changed, l.Size) {
				lost = append(lost, transports.FormatSize(l.Size)+" to "+l.Winner+" (leaning, unsettled)")
			}
		}
		again := againSizes(changed, losses, leans)
		r.notes = append(r.notes, fmt.Sprintf("verify: the profile lost at %s; the route there goes to the faster transport and %s are verified again",
			strings.Join(lost, ", "), sizeList(again)))
		r.setRoutes(out.Ranges)
		safe, err := r.safety(out)
		if err != nil {
			return err
		}
		if *s = safe; len(s.Problems) > 0 {
			return fmt.Errorf("the mended routes failed the safety phase: %v", s.Problems)
		}
		sizes, first, required = again, next, mendRounds
	}
}

// againSizes are the sizes a mend verifies again: those whose route it
// changed, and the losses and leans it left on their route (the winner
// sends as auto does there), which would otherwise keep the rounds of the
// profile before and never be confirmed, since another size's mend goes
// on instead of confirming.
func againSizes(changed []int, losses, leans []verifyLoss) []int {
	out := slices.Concat(changed, lossSizes(losses), lossSizes(leans))
	slices.Sort(out)
	return slices.Compact(out)
}

// lossSizes are the sizes of losses, in order.
func lossSizes(losses []verifyLoss) []int {
	out := make([]int, len(losses))
	for i, l := range losses {
		out[i] = l.Size
	}
	return out
}

// confirmRounds is how many fresh rounds an unmended loss must settle
// again in (emitVerified), whatever the budget: twice a mend's, since
// these rounds alone decide.
const confirmRounds = 2 * mendRounds

// mendRounds is how many rounds the verification of mended sizes takes
// whatever the budget: the mend stands on them, and one round (all that
// a spent budget left two sweeps on the 32-core host) tests nothing.
const mendRounds = 3

// writeProfile writes p and the native files rendered from it.
func (r *Runner) writeProfile(path string, p *profile.Profile) error {
	if err := profile.Write(path, p); err != nil {
		return err
	}
	return r.writeNative(p)
}

// setRoutes records the decided ranges for the verdict digests.
func (r *Runner) setRoutes(ranges []Range) {
	var rs []string
	for _, rg := range ranges {
		r := fmt.Sprintf("%d:%s:%s", rg.Min, rg.Transport, rg.Protocol)
		if rg.Mode != "" {
			r += ":" + rg.Mode
		}
		rs = append(rs, r)
	}
	r.routes = transports.Options{"profile.ranges": strings.Join(rs, ",")}
}

// referenceOptions is what the verification's single transports run with
// besides their own options (nil: nothing): where the built-in ring does
// not fit the node at the ranks per node the profile serves, the ring the
// node affords (affordableBuiltin), so that the profile faces what the
// node could run instead of it; and the profile's progress mode where it
// is the thread. The sweep takes the
// thread where H8 caught polling progress starving a rendezvous, a safety
// decision: a single transport that could hang here is no alternative to
// the profile, and measuring it would charge the thread's cost to the
// profile's routes.
func (r *Runner) referenceOptions(p *profile.Profile) transports.Options {
	var o transports.Options
	if ring, d := affordableBuiltin(r.fits), defaultSM(); ring.Frag != d.Frag || ring.Slots != d.Slots {
		o = transports.Options{sm.KeyFrag: itoa(ring.Frag), sm.KeyFrags: itoa(ring.Slots)}
	}
	if d, ok := p.Decisions[profile.Intranode][profile.HostHost]; ok && d.Progress == "thread" {
		o = o.With(transports.Options{sm.KeyProgress: "thread"})
	}
	return o
}

// verify measures the emitted profile through the runtime selector beside
// each single transport, interleaved, over sizes, for the plan's
// verification rounds numbered from first (the first required of them
// measured whatever the budget, the others while it lasts);
// then, for up to trail more rounds, at the sizes where the profile
// trails the best single transport by more than the noise without a
// settled test (verifyTrails): on a noisy node a few rounds leave a
// ratio several per cent off where every candidate runs the same path.
// It returns the next round number free.
func (r *Runner) verify(path, hash string, sizes []int, first, required, trail int) (next int, err error) {
	next = first
	if len(sizes) == 0 {
		return next, nil
	}
	if _, err := transports.Lookup("auto"); err != nil {
		r.notes = append(r.notes, "verify: no auto transport in this build")
		return next, nil
	}
	p, err := profile.Load(path)
	if err != nil {
		return next, fmt.Errorf("verify: %w", err)
	}
	autoOpts := auto.LaunchOptions(path, p)
	delete(autoOpts, auto.KeyProfile) // the path goes in the trial's extra (below), outside its key
	cands := []candidate{{name: "auto", transport: "auto", opts: autoOpts}}
	if t := r.meta.Verify; t != nil && t.Against != nil {
		cands = append(cands, candidate{name: againstCandidate, transport: "auto", opts: transports.Options{auto.KeyHash: t.Against.Hash}})
	} else {
		ref := r.referenceOptions(p)
		for _, name := range r.plan.Transports {
			tc := transportCandidates[name]
			opts := tc.opts
			if ref != nil {
				opts = ref.With(tc.opts)
			}
			cands = append(cands, candidate{name: name, transport: tc.driver, opts: opts})
		}
	}
	cands, err = r.presentOnly(cands)
	if err != nil {
		return next, err
	}
	r.meterPlan(stageVerify, r.plan.VerifyRounds*len(cands))
	planned := max(r.plan.VerifyRounds, required)
	for round := first; round < first+planned+trail; round++ {
		roundSizes := sizes
		if round >= first+planned {
			if roundSizes = r.verifyTrails(sizes); len(roundSizes) == 0 {
				break
			}
			r.meterPlan(stageVerify, len(cands))
		}
		next = round + 1
		var trials []Trial
		for _, c := range candidateOrder(cands, round) {
			// The profile's path and hash are part of the auto candidate's
			// options: a resumed sweep that re-emits an identical profile
			// reuses these trials, a changed one measures anew.
			t := Trial{Stage: stageVerify, Candidate: c.name, Transport: c.transport, Options: c.opts,
				Pattern: bench.Bandwidth, Sizes: roundSizes, Round: round}
			switch c.name {
			case "auto":
				t.extra = transports.Options{auto.KeyProfile: path}
			case againstCandidate:
				t.extra = transports.Options{auto.KeyProfile: r.meta.Verify.Against.Profile}
			}
			if key := t.key(); r.replayOnly && !r.store.Has(key) && !r.store.Has(budgetStopKey(key)) {
				// tune re-emitted a profile other than the one verified
				// (another gotune version, or decisions that changed): its
				// decisions stand on the stored stages; it is not verified.
				r.notes = append(r.notes, fmt.Sprintf("verify: the stored verification measured another profile than this one (%s); measure it with gotune verify %s", hash, path))
				return next, nil
			}
			trials = append(trials, t)
		}
		done, err := r.runTogether(trials, verifyOptional(round, first, required) || r.replayOnly)
		for _, d := range done {
			if d.Candidate == "auto" && !slices.Contains(r.verified, hash) {
				r.verified = append(r.verified, hash)
			}
			if d.Candidate == "auto" && d.Failed != "" {
				return next, fmt.Errorf("the emitted profile failed in verification: %s", d.Failed)
			}
		}
		if errors.Is(err, ErrBudget) {
			return next, nil
		}
		if err != nil {
			return next, err
		}
	}
	return next, nil
}

// verifyOptional says whether verification round round, of rounds
// numbered from first, may give way to the budget: all but the first
// required ones.
func verifyOptional(round, first, required int) bool { return round >= first+max(required, 1) }

// verifyTrailRounds is how many rounds the sweep's verification may add
// at the sizes where the profile trails (verify).
const verifyTrailRounds = 12

// Result is what a sweep (or tune) produced.
type Result struct {
	Dir         string
	Outcome     Outcome
	Safety      Safety
	ProfilePath string // "" when no profile could be emitted
	Measured    int
	Reused      int
	Notes       []string
	Summarized  bool // the run directory's summary is this result's
}

// Run performs a whole sweep: measure and decide, probe, emit, verify, and
// write the derived files.
func Run(ctx context.Context, cfg Config) (Result, error) {
	r, err := Open(ctx, cfg)
	if err != nil {
		return Result{}, err
	}
	defer r.Close()
	if err := r.notVerification(); err != nil {
		return Result{}, err
	}
	return r.finish(true)
}

// Tune re-decides a run directory from its stored measurements and
// verdicts without measuring anything; it rewrites summary and profile.
func Tune(ctx context.Context, dir string, progressTo io.Writer) (Result, error) {
	r, err := Open(ctx, Config{Resume: dir, Progress: progressTo})
	if err != nil {
		return Result{}, err
	}
	defer r.Close()
	if err := r.notVerification(); err != nil {
		return Result{}, err
	}
	r.budget = -1 // nothing optional runs; a missing required trial is an error
	r.replayOnly = true
	return r.finish(false)
}

// notVerification refuses to run a sweep's stages in a verification's
// run directory.
func (r *Runner) notVerification() error {
	if r.meta.Verify != nil {
		return fmt.Errorf("%s is a verification of %s, not a sweep: continue it with gotune verify --resume %s", r.dir, r.meta.Verify.Profile, r.dir)
	}
	return nil
}

func (r *Runner) finish(measure bool) (Result, error) {
	res := Result{Dir: r.dir}
	out, err := r.decide()
	if err != nil {
		return res, err
	}
	if out.Stacks, err = r.stackStages(); err != nil {
		return res, err
	}
	res.Outcome = out
	r.setRoutes(out.Ranges)
	s, err := r.safety(&out)
	if err != nil {
		return res, err
	}
	res.Outcome, res.Safety = out, s
	path := filepath.Join(r.dir, ProfileFile)
	if len(s.Problems) == 0 {
		if err := r.emitVerified(path, &out, &s); err != nil {
			os.Remove(path)
			s.Problems = append(s.Problems, err.Error())
		} else if _, err := os.Stat(path); err == nil {
			res.ProfilePath = path
		}
		res.Outcome, res.Safety = out, s
	} else {
		os.Remove(path) // never leave an unsafe profile behind
	}
	res.Measured, res.Reused, res.Notes = r.measured, r.reused, r.notes
	if err := r.writeDerived(res); err != nil {
		return res, err
	}
	res.Summarized = true
	if len(s.Problems) > 0 {
		return res, fmt.Errorf("no profile emitted: %v", s.Problems)
	}
	return res, nil
}
