package htmlreport

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/sm"
	"github.com/gotune/gotune/tuner/sweep"
)

// Figure is one plot of a report: report.html holds it inline and ID.svg
// beside it holds it as a file.
type Figure struct {
	ID      string // file name stem, unique in the report
	Title   string
	Caption string // what the plot shows and what is drawn on it
	SVG     []byte
}

// series is one candidate's points of one pattern: per size its pooled
// samples' median and interval (bench.Summarize, as gotune bench reports).
type series struct {
	label string
	unit  string
	pts   []xy
}

// stageCurves gathers a stage's finished trials of pattern into one
// series per candidate (GPU trials: per candidate and buffer pair), in the
// order the candidates first ran.
func stageCurves(trials []sweep.Trial, stage string, pattern bench.Pattern) []series {
	samples := map[string]map[int][]float64{}
	units := map[string]string{}
	var order []string
	for _, t := range trials {
		if t.Stage != stage || t.Pattern != pattern || t.Failed != "" {
			continue
		}
		label := t.Candidate
		if t.GPU != nil && t.GPU.Mem != "" {
			label += " [" + t.GPU.Mem + "]"
		}
		if samples[label] == nil {
			samples[label] = map[int][]float64{}
			order = append(order, label)
		}
		for _, p := range t.Points {
			if len(p.Samples) > 0 {
				samples[label][p.Size] = append(samples[label][p.Size], p.Samples...)
				units[label] = p.Unit
			}
		}
	}
	var out []series
	for _, label := range order {
		s := series{label: label, unit: units[label]}
		sizes := make([]int, 0, len(samples[label]))
		for n := range samples[label] {
			sizes = append(sizes, n)
		}
		slices.Sort(sizes)
		for _, n := range sizes {
			p := bench.Summarize(n, s.unit, samples[label][n], nil)
			s.pts = append(s.pts, xy{x: float64(n), y: p.Median, lo: p.CILow, hi: p.CIHigh})
		}
		if len(s.pts) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// stagesOf lists the stages of trials in the order they first ran, and
// each one's patterns in the order they first ran.
func stagesOf(trials []sweep.Trial) (stages []string, patterns map[string][]bench.Pattern) {
	patterns = map[string][]bench.Pattern{}
	for _, t := range trials {
		if !slices.Contains(stages, t.Stage) {
			stages = append(stages, t.Stage)
		}
		if !slices.Contains(patterns[t.Stage], t.Pattern) {
			patterns[t.Stage] = append(patterns[t.Stage], t.Pattern)
		}
	}
	return stages, patterns
}

// axisLabel names a unit's axis.
func axisLabel(pattern bench.Pattern, unit string) string {
	switch unit {
	case "us":
		return "time (µs), lower is better"
	case "MB/s":
		return "bandwidth (MB/s), higher is better"
	case "msg/s":
		return "message rate (msg/s), higher is better"
	}
	return fmt.Sprintf("%s (%s)", pattern, unit)
}

// stageBase is a stage's name without its GPU load ("gpu-path/none").
func stageBase(stage string) string { b, _, _ := strings.Cut(stage, "/"); return b }

// decisionMarks are the decisions drawn on a stage's plots: where each
// was made (the eager limit where it was weighed and wherever it bounds
// what was measured, the transports' ranges on the transport stages).
func decisionMarks(stage string, out *sweep.Outcome) (marks []vmark, regions []region, notes []string) {
	if out == nil {
		return nil, nil, nil
	}
	eager := vmark{x: float64(out.SM.Eager), label: "decided eager limit " + transports.FormatSize(out.SM.Eager)}
	switch stageBase(stage) {
	case "eager", "depth", "confirm":
		marks = append(marks, eager)
	case "fragment":
		marks = append(marks, vmark{x: float64(out.SM.Frag), label: fmt.Sprintf("decided fragment %s x %d", transports.FormatSize(out.SM.Frag), out.SM.Slots)})
	case "transport", "verify":
		marks = append(marks, eager)
		for i, rg := range out.Ranges {
			to := math.Inf(1)
			if i+1 < len(out.Ranges) {
				to = float64(out.Ranges[i+1].Min)
			}
			regions = append(regions, region{from: float64(max(rg.Min, 1)), to: to, label: rg.Transport + " " + rg.Protocol})
			if i > 0 && rg.Transport != out.Ranges[i-1].Transport {
				marks = append(marks, vmark{x: float64(rg.Min), label: "→ " + rg.Transport + " from " + transports.FormatSize(rg.Min)})
			}
		}
	case "internode-eager", "internode-protocol", "internode-queue", "internode-transport":
		if ip := out.Internode; ip != nil {
			marks = append(marks, vmark{x: float64(ip.Eager), label: fmt.Sprintf("inter-node eager limit %s (%s)", transports.FormatSize(ip.Eager), ip.Transport)})
		}
	case "gpu-path":
		if g := out.GPU; g != nil {
			if g.Threshold > 0 {
				marks = append(marks, vmark{x: float64(g.Threshold), label: "CUDA IPC from " + transports.FormatSize(g.Threshold)})
			} else {
				notes = append(notes, fmt.Sprintf("decided: CUDA IPC at every size (threshold 0), staging %s below it", g.Staging))
			}
		}
	case "gpu-pinned":
		if g := out.GPU; g != nil && g.PinnedThreshold > 0 {
			marks = append(marks, vmark{x: float64(g.PinnedThreshold), label: "pinned pushed from " + transports.FormatSize(g.PinnedThreshold)})
		}
	}
	return marks, regions, notes
}

// chosenIn returns the candidate a stage chose ("" if none or unknown).
func chosenIn(stage string, out *sweep.Outcome) string {
	if out == nil {
		return ""
	}
	for _, d := range out.Stages {
		if d.Stage == stage {
			return d.Chosen
		}
	}
	return ""
}

var idUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// figureID makes a file name stem of parts.
func figureID(parts ...string) string {
	return strings.Trim(idUnsafe.ReplaceAllString(strings.ToLower(strings.Join(parts, "-")), "-"), "-")
}

// stageFigures draws every pattern of a stage: one line per candidate,
// the chosen one bold, and the stage's decisions.
func stageFigures(run *Run, stage string, patterns []bench.Pattern) ([]Figure, error) {
	var out *sweep.Outcome
	if run.Result != nil {
		out = &run.Result.Outcome
	}
	chosen := chosenIn(stage, out)
	marks, regions, notes := decisionMarks(stage, out)
	var figs []Figure
	for _, pat := range patterns {
		curves := stageCurves(run.Trials, stage, pat)
		if len(curves) == 0 {
			continue
		}
		c := chart{title: fmt.Sprintf("%s: %s", stage, pat), xlabel: "message size (bytes)", ylabel: axisLabel(pat, curves[0].unit),
			sizeX: true, logY: true, vmarks: marks, regions: regions}
		for _, s := range curves {
			cand, _, _ := strings.Cut(s.label, " [")
			c.lines = append(c.lines, line{label: s.label, pts: s.pts, bold: chosen != "" && cand == chosen})
		}
		svg, err := c.svg()
		if err != nil {
			return nil, err
		}
		caption := fmt.Sprintf("Median of the pooled repetitions at each size, band: its %s interval.", confidenceText)
		if chosen != "" {
			caption += " Bold: the chosen candidate, " + chosen + "."
		}
		for _, m := range marks {
			caption += " Dashed: " + m.label + "."
		}
		if len(regions) > 0 {
			caption += " Shaded: the profile's size ranges."
		}
		for _, n := range notes {
			caption += " " + n + "."
		}
		figs = append(figs, Figure{ID: figureID("stage", stage, string(pat)), Title: c.title, Caption: caption, SVG: svg})
	}
	return figs, nil
}

// confidenceText names the band's level.
var confidenceText = fmt.Sprintf("%.0f%%", 100*bench.Confidence)

// ratioFigure draws auto against each single transport of the verify
// stage, size by size, round-paired as the summary's paired column (> 1:
// auto is faster).
func ratioFigure(run *Run) (*Figure, error) {
	ratios := sweep.VerifyRatios(run.Trials)
	if len(ratios) == 0 {
		return nil, nil
	}
	c := chart{title: "verify: auto against each single transport", xlabel: "message size (bytes)",
		ylabel: "auto / transport, round-paired (> 1: auto faster)", sizeX: true,
		hmarks: []hmark{{y: 1, label: "equal"}}}
	for _, name := range slices.Sorted(maps.Keys(ratios)) {
		l := line{label: "auto / " + name}
		for _, r := range ratios[name] {
			l.pts = append(l.pts, xy{x: float64(r.Size), y: r.Paired, lo: r.Lowest, hi: r.High})
		}
		c.lines = append(c.lines, l)
	}
	svg, err := c.svg()
	if err != nil {
		return nil, err
	}
	return &Figure{ID: "verify-ratio", Title: c.title, Caption: "Median of the verification rounds' ratios, each round's auto median over the transport's in the same round (at a mended size, the new profile's rounds); band: the rounds' lowest and highest ratio. The paired tests are in the run's summary, at the end of the page.", SVG: svg}, nil
}

// footprintFigure draws the FIFO depth stage's candidates as the channel
// memory they take against ranks per node, with the node's affordable
// share and its core count.
func footprintFigure(run *Run) (*Figure, error) {
	type geom struct{ depth, cell, frag, slots int }
	var cands []string
	geoms := map[string]geom{}
	for _, t := range run.Trials {
		if t.Stage != "depth" || geoms[t.Candidate] != (geom{}) {
			continue
		}
		var g geom
		var err error
		for _, f := range []struct {
			key string
			to  *int
		}{{sm.KeyDepth, &g.depth}, {sm.KeyCell, &g.cell}, {sm.KeyFrag, &g.frag}, {sm.KeyFrags, &g.slots}} {
			if *f.to, err = transports.ParseSize(t.Options[f.key]); err != nil {
				return nil, fmt.Errorf("depth candidate %s: option %s: %w", t.Candidate, f.key, err)
			}
		}
		geoms[t.Candidate] = g
		cands = append(cands, t.Candidate)
	}
	if len(cands) == 0 {
		return nil, nil
	}
	prov := run.Meta.Provenance
	top := 256
	for top < 2*prov.Cores {
		top *= 2
	}
	chosenDepth := 0
	var final *sweep.SMParams
	if run.Result != nil {
		final = &run.Result.Outcome.SM
		chosenDepth = final.Depth
	}
	c := chart{title: "FIFO depth: channel memory per node against ranks per node", xlabel: "ranks per node",
		ylabel: "shared memory of the channels (bytes)", logX: true, pow2X: true, logY: true, sizeY: true}
	for _, name := range cands {
		g := geoms[name]
		if final != nil { // the decided geometry with this depth
			g.cell, g.frag, g.slots = final.Cell, final.Frag, final.Slots
		}
		l := line{label: fmt.Sprintf("%s (%s a pair)", name, humanBytes(sweep.PairBytes(g.depth, g.cell))), bold: g.depth == chosenDepth}
		for n := 2; n <= top; n *= 2 {
			v := float64(sweep.NodeBytes(g.depth, g.cell, g.frag, g.slots, n))
			l.pts = append(l.pts, xy{x: float64(n), y: v, lo: v, hi: v})
		}
		c.lines = append(c.lines, l)
	}
	caption := "Every ordered pair of ranks on a node has its own cell FIFO; every rank one fragment ring for all its peers."
	if final != nil {
		caption += fmt.Sprintf(" Each depth candidate with the decided cell (%d B) and fragments (%s x %d).", final.Cell, transports.FormatSize(final.Frag), final.Slots)
	}
	if prov.MemBytes > 0 {
		c.hmarks = append(c.hmarks, hmark{y: float64(prov.MemBytes / sweep.MemoryShare), label: fmt.Sprintf("1/%d of this node's memory", sweep.MemoryShare)})
		caption += fmt.Sprintf(" Dashed across: 1/%d of the node's memory, what a geometry may take with one rank per core to count as affordable.", sweep.MemoryShare)
	}
	if prov.Cores > 1 {
		c.vmarks = append(c.vmarks, vmark{x: float64(prov.Cores), label: fmt.Sprintf("%d cores", prov.Cores)})
		caption += " Dashed up: one rank per core."
	}
	if chosenDepth > 0 {
		caption += fmt.Sprintf(" Bold: the decided depth, %d.", chosenDepth)
	}
	svg, err := c.svg()
	if err != nil {
		return nil, err
	}
	return &Figure{ID: "depth-footprint", Title: c.title, Caption: caption, SVG: svg}, nil
}
