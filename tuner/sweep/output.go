package sweep

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cudaipc"
	"github.com/gotune/gotune/transports/gpumem"
	"github.com/gotune/gotune/transports/sm"
	"github.com/gotune/gotune/tuner/search"
	"github.com/gotune/gotune/tuner/stack"
)

// writeDerived rewrites the files derived from the store: the Go benchmark
// format view of every trial and the summary.
func (r *Runner) writeDerived(res Result) error {
	if err := r.writeBench(); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(r.dir, SummaryFile), []byte(r.summary(res)))
}

// writeBench rewrites the Go benchmark format view of every trial.
func (r *Runner) writeBench() error {
	var b bytes.Buffer
	if err := benchView(&b, r.trials, r.meta.Provenance); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(r.dir, BenchFile), b.Bytes())
}

// summary is the human account of a run: every stage's candidates, the
// transport per size, the emitted decisions, the probes, the check of the
// profile against the single transports, and what was cut short.
func (r *Runner) summary(res Result) string {
	var w strings.Builder
	prov := r.meta.Provenance
	fmt.Fprintf(&w, "gotune sweep %s (plan %s) on %s: %s, %d cores, kernel %s, gotune %s\n",
		r.meta.RunID, r.plan.Name, prov.Host, prov.CPUModel, prov.Cores, prov.Kernel, prov.Gotune)
	fmt.Fprintf(&w, "trials: %d stored (%d measured by this process, %d reused)\n\n", len(r.trials), res.Measured, res.Reused)
	out := res.Outcome
	for _, d := range out.Stages {
		var pats []string
		for _, p := range d.Patterns {
			if p.MultiRank() {
				pats = append(pats, fmt.Sprintf("%s at %d ranks", p, r.geometryRanks()))
				continue
			}
			pats = append(pats, string(p))
		}
		rule := fmt.Sprintf("cheapest within %.0f%% of best and beaten at no point wins", 100*search.Noise)
		if d.Reference != "" {
			rule = fmt.Sprintf("cheapest within %.0f%% of %s and beaten by it at no point wins", 100*search.Noise, d.Reference)
		}
		fmt.Fprintf(&w, "## %s (%s over %s; score: geomean over points of the median of round-normalised values, latency inverted, relative to the best; %s)\n",
			d.Stage, strings.Join(pats, "+"), sizeList(d.Sizes), rule)
		best := 0.0
		for _, s := range d.Scores {
			best = max(best, s.Value)
		}
		for _, s := range d.Scores {
			mark := " "
			if s.Chosen {
				mark = "*"
			}
			val := s.Dropped
			if val == "" {
				val = fmt.Sprintf("%.3f", s.Value/best)
			}
			if s.LosesAt != "" {
				val += "  loses at " + s.LosesAt
			} else if len(s.Trails) > 0 {
				val += "  trails, unsettled, at " + sizeList(s.Trails)
			}
			fmt.Fprintf(&w, " %s %-22s %s\n", mark, s.Candidate, val)
		}
		w.WriteString("\n")
	}
	if len(out.Transport) > 0 {
		fmt.Fprintf(&w, "## transport (bw, MB/s medians of the rounds; test: paired per-round ratios, noise pooled over nearby sizes, %.0f%% interval; equal within %.0f%%)\n", 100*(1-search.LookAlpha), 100*search.Noise)
		var names []string
		for _, c := range out.Candidates {
			names = append(names, c.name)
		}
		fmt.Fprintf(&w, " %8s", "size")
		for _, n := range names {
			fmt.Fprintf(&w, " %10s", n)
		}
		fmt.Fprintf(&w, "  %-9s %s\n", "winner", "test")
		for _, v := range out.Transport {
			fmt.Fprintf(&w, " %8s", transports.FormatSize(v.Size))
			for _, n := range names {
				if m, ok := v.Medians[n]; ok {
					fmt.Fprintf(&w, " %10.0f", m)
				} else {
					fmt.Fprintf(&w, " %10s", "-")
				}
			}
			settled := ""
			switch {
			case v.Mended && v.Leaned:
				settled = " (mended: the verification's rounds, the winner leaning ahead of auto at the last look)"
			case v.Mended:
				settled = " (mended: the verification's rounds, the winner against auto)"
			case v.Leaned:
				settled = " (a comparison leaned at the last look)"
			case !v.Settled:
				settled = " (a comparison unsettled: " + v.Winner + " kept)"
			}
			fmt.Fprintf(&w, "  %-9s %v%s\n", v.Winner, v.Versus, settled)
		}
		w.WriteString("\n")
	}
	fmt.Fprintf(&w, "## decisions (intranode, host_host)\n")
	for i, rg := range out.Ranges {
		hi := "∞"
		if i+1 < len(out.Ranges) {
			hi = transports.FormatSize(out.Ranges[i+1].Min - 1)
		}
		mode := ""
		if rg.Mode != "" {
			mode = " (" + rg.Mode + ")"
		}
		fmt.Fprintf(&w, " %8s – %-8s %-4s %s%s\n", transports.FormatSize(rg.Min), hi, rg.Transport, rg.Protocol, mode)
	}
	park := ""
	if out.SM.Park != "" {
		park = ", park " + out.SM.Park
	}
	fmt.Fprintf(&w, " eager limit %s, cell %d B, FIFO depth %d, fragments %s x %d, progress %s%s\n",
		transports.FormatSize(out.SM.Eager), out.SM.Cell, out.SM.Depth, transports.FormatSize(out.SM.Frag), out.SM.Slots, out.SM.Progress, park)
	fmt.Fprintf(&w, " footprint: %s\n", out.Footprint)
	fmt.Fprintf(&w, " allocator: cache %s, purge %s, THP %s\n\n", transports.FormatSize(int(out.Alloc.Cache)), out.Alloc.Purge, onOff(out.Alloc.THP))
	if ip := out.Internode; ip != nil {
		fmt.Fprintf(&w, "## decisions (internode, host_host: %s)\n", strings.Join(r.meta.Nodes, " and "))
		fmt.Fprintf(&w, " %s\n footprint: %s\n\n", internodeSummary(ip), internodeFootprint(*ip))
	}
	if g := out.GPU; g != nil {
		fmt.Fprintf(&w, "## GPU (cudaipc on GPUs %s)\n", g.GPUs)
		fmt.Fprintf(&w, " device messages: staged (%s) below %s, CUDA IPC from there\n", g.Staging, transports.FormatSize(g.Threshold))
		fmt.Fprintf(&w, " pinned host sends pushed into device receives from %s\n", transports.FormatSize(g.PinnedThreshold))
		if g.Copy != "" {
			fmt.Fprintf(&w, " single copies between device buffers by %s\n", map[string]string{"ce": "the copy engines", "sm": "a copy kernel on the SMs"}[g.Copy])
		}
		if g.Completion != "" {
			fmt.Fprintf(&w, " a single copy's end reaches both ranks by %s\n", map[string]string{"event": "an IPC event per copy", "flag": "a flag stored once per progress pass", "sync": "FIN after the copier's stream synchronizes"}[g.Completion])
		}
		if g.Relay > 0 {
			fmt.Fprintf(&w, " device-to-device copies up to %s by the relay block\n", transports.FormatSize(g.Relay))
		}
		if g.Cache > 0 {
			fmt.Fprintf(&w, " IPC mappings kept per peer: %d (weighed with %d buffers in turn)\n", g.Cache, r.plan.GPU.IPCBuffers)
		}
		for _, s := range g.Stalled {
			fmt.Fprintf(&w, " avoided: %s\n", s)
		}
		if len(g.StagingVerdicts) > 0 {
			fmt.Fprintf(&w, " staging modes (probe H4 on every mode:)\n")
			for _, v := range g.StagingVerdicts {
				fmt.Fprintf(&w, "   %s: %s: %s\n", v.Options[cudaipc.KeyStaging], v.Outcome, v.Detail)
			}
		}
		fmt.Fprintf(&w, " GPU allocator: %s (probe H2 on every mode:)\n", g.Alloc)
		for _, v := range g.AllocVerdicts {
			fmt.Fprintf(&w, "   %s: %s: %s\n", v.Options[gpumem.OptionKey], v.Outcome, v.Detail)
		}
		fmt.Fprintln(&w)
	}

	for _, st := range out.Stacks {
		fmt.Fprintf(&w, "## stack %s %s (measured through itself, %d interleaved rounds a parameter; score: geomean of round-paired ratios against the default, > 1 better; * chosen)\n", st.Stack, st.Version, r.plan.StackRounds)
		for _, l := range st.Lines {
			fmt.Fprintf(&w, " %s\n", l)
		}
		fmt.Fprintf(&w, " file: %s\n hazards (h2h and flood, validated): %s\n\n", cmp.Or(stack.ParamsLine(st.Params), "the defaults (nothing to set)"), st.Check)
	}

	fmt.Fprintf(&w, "## safety (probe deadline %v)\n", r.plan.ProbeDeadline)
	for _, d := range res.Safety.Detectors {
		fmt.Fprintf(&w, " %-3s unsafe: %s (%.1fs) %s\n", d.Probe, d.Outcome, d.Seconds, d.Detail)
	}
	for _, v := range res.Safety.Verdicts {
		fmt.Fprintf(&w, " %-3s safe on %s: %s (%.1fs) %s\n", v.Probe, v.Config, v.Outcome, v.Seconds, v.Detail)
	}
	for _, p := range res.Safety.Problems {
		fmt.Fprintf(&w, " PROBLEM: %s\n", p)
	}
	for _, p := range res.Safety.Warnings {
		fmt.Fprintf(&w, " note: %s\n", p)
	}
	w.WriteString("\n")
	if res.ProfilePath != "" {
		fmt.Fprintf(&w, "profile: %s\n\n", res.ProfilePath)
	} else {
		fmt.Fprintf(&w, "profile: NOT EMITTED (a probe failed; see safety)\n\n")
	}
	r.verifySummary(&w)
	for _, n := range res.Notes {
		fmt.Fprintf(&w, "note: %s\n", n)
	}
	return w.String()
}

// verifySummary compares auto with the single transports over the
// verification trials (verifyEvidence): per size and as geometric means,
// both as a ratio of medians taken over all rounds and as the median of
// per-round ratios (round-paired: robust to this machine's slow spells,
// which last seconds and can cover one candidate's trial of a round but
// not the next round), with the paired test of the best single transport
// against auto.
// referenceNote says what the verification's single transports ran with
// (referenceOptions), from their trials' options.
func (r *Runner) referenceNote() string {
	for _, t := range r.trials {
		if t.Stage != stageVerify || t.Candidate == "auto" || t.Candidate == againstCandidate {
			continue
		}
		var with []string
		if frag, err := strconv.Atoi(t.Options[sm.KeyFrag]); err == nil {
			with = append(with, fmt.Sprintf("the fragment ring %sx%s the node affords at %d ranks", transports.FormatSize(frag), t.Options[sm.KeyFrags], r.ranksPerNode()))
		}
		if t.Options[sm.KeyProgress] == "thread" {
			with = append(with, "the progress thread the safety phase requires")
		}
		if len(with) > 0 {
			return "their defaults, with " + strings.Join(with, " and ")
		}
		break
	}
	return "their defaults"
}

func (r *Runner) verifySummary(w *strings.Builder) {
	ev := r.verifyEvidence()
	if len(ev.sizes) == 0 || len(ev.singles) == 0 {
		return
	}
	rounds := map[int]bool{}
	for _, n := range ev.sizes {
		for round := range ev.auto[n] {
			rounds[round] = true
		}
	}
	fmt.Fprintf(w, "## verify: auto (profile %s) beside each single transport (%s), bw, %d interleaved rounds\n", strings.Join(ev.hashes, ", then "), r.referenceNote(), len(rounds))
	fmt.Fprintf(w, "## (MB/s, median of the rounds' medians, over the rounds auto ran in at the size: a mended size's are its new profile's;\n")
	fmt.Fprintf(w, "##  auto/best: ratio of those medians; paired: median of the rounds' auto/best ratios;\n")
	if len(ev.pooled) == 0 {
		fmt.Fprintf(w, "##  test: the best single transport against auto, paired per round, noise pooled over nearby sizes)\n")
	} else {
		fmt.Fprintf(w, "##  test: the best single transport against auto, paired per round, noise pooled over nearby sizes;\n")
		fmt.Fprintf(w, "##  up to the built-in eager limit every single transport runs sm's eager path: best there is their per-round geomean)\n")
	}
	fmt.Fprintf(w, " %8s %10s", "size", "auto")
	for _, s := range ev.names {
		fmt.Fprintf(w, " %10s", s)
	}
	fmt.Fprintf(w, " %10s %8s  %s\n", "auto/best", "paired", "test vs best")
	alike := r.sentAlike()
	geo, geoPaired, nPaired := map[string]float64{}, map[string]float64{}, map[string]int{}
	geoBestPerSize, geoBestPaired, paired := 0.0, 0.0, 0
	geoApart, apart := 0.0, 0 // paired, at the sizes the two profiles send differently
	for _, n := range ev.sizes {
		am := medianOf(ev.auto[n])
		fmt.Fprintf(w, " %8s %10.0f", transports.FormatSize(n), am)
		for _, s := range ev.names {
			m := medianOf(onRounds(ev.singles[s][n], ev.auto[n]))
			fmt.Fprintf(w, " %10.0f", m)
			geo[s] += logRatio(am, m)
			if pr, ok := pairedRatio(ev.auto[n], ev.singles[s][n]); ok {
				geoPaired[s] += math.Log(pr)
				nPaired[s]++
			}
		}
		bestName := ev.best(n)
		best := medianOf(onRounds(ev.series(bestName, n), ev.auto[n]))
		geoBestPerSize += logRatio(am, best)
		pairedCol := "-"
		pr, prOK := pairedRatio(ev.auto[n], ev.series(bestName, n))
		if prOK {
			geoBestPaired += math.Log(pr)
			paired++
			pairedCol = fmt.Sprintf("%.3f", pr)
		}
		mark, faded := "", ""
		if i := slices.IndexFunc(r.faded, func(f fadedLoss) bool { return f.Size == n }); i >= 0 {
			faded = fmt.Sprintf(" (did not settle again over its %d fresh rounds: %v)", confirmRounds, r.faded[i].Fresh)
		}
		switch {
		case bestName == pooledSingles:
			mark = " (best: the singles pooled)"
		case alike != nil && alike(n):
			mark = " (sent alike by both profiles: the rounds' noise)"
		case alike != nil && prOK:
			geoApart += math.Log(pr)
			apart++
		}
		fmt.Fprintf(w, " %10.3f %8s  %v%s%s\n", am/best, pairedCol, ev.compare(n, bestName), mark, faded)
	}
	for _, s := range ev.names {
		fmt.Fprintf(w, " geomean auto/%s: %.3f (paired %.3f)\n", s, expMean(geo[s], len(ev.sizes)), expMean(geoPaired[s], nPaired[s]))
	}
	fmt.Fprintf(w, " geomean auto/best-per-size: %.3f (paired %.3f over %d sizes)\n", expMean(geoBestPerSize, len(ev.sizes)), expMean(geoBestPaired, paired), paired)
	switch {
	case alike != nil && apart == 0:
		fmt.Fprintf(w, " the two profiles send every size alike\n")
	case alike != nil:
		fmt.Fprintf(w, " geomean auto/against where the profiles send differently: paired %.3f over %d sizes\n", expMean(geoApart, apart), apart)
	}
	fmt.Fprintln(w)
}

// sentAlike says, for a verification of one profile against another, at
// which sizes both send a host message between ranks of a node alike
// (profile.SendsAlike); nil for any other run, or when either profile no
// longer loads.
func (r *Runner) sentAlike() func(n int) bool {
	t := r.meta.Verify
	if t == nil || t.Against == nil {
		return nil
	}
	a, errA := profile.Load(t.Profile)
	b, errB := profile.Load(t.Against.Profile)
	if errA != nil || errB != nil {
		return nil
	}
	return func(n int) bool { return a.SendsAlike(b, profile.Intranode, profile.HostHost, n) }
}

// medianOf is the median of a round → value map's values.
// onRounds is series at the rounds of ref alone: medians compared over
// the same rounds (this machine's slow spells move every candidate of a
// round alike).
func onRounds(series, ref map[int]float64) map[int]float64 {
	out := make(map[int]float64, len(ref))
	for round := range ref {
		if v, ok := series[round]; ok {
			out[round] = v
		}
	}
	return out
}

func medianOf(rounds map[int]float64) float64 {
	return search.Median(slices.Collect(maps.Values(rounds)))
}

func sizeList(sizes []int) string {
	var s []string
	for _, n := range sizes {
		s = append(s, transports.FormatSize(n))
	}
	return strings.Join(s, ",")
}
