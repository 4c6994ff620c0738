package htmlreport

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"gonum.org/v1/plot/font"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/atomicfile"
	"github.com/gotune/gotune/internal/bytesize"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/tuner/sweep"
)

// File is the report's name in its directory.
const File = "report.html"

//go:embed page.html.tmpl
var pageText string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"size":  func(n int) string { return transports.FormatSize(n) },
	"bytes": humanBytes,
	"score": func(v, best float64) string {
		if best <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f", v/best)
	},
	"sizes": func(ns []int) string {
		var s []string
		for _, n := range ns {
			s = append(s, transports.FormatSize(n))
		}
		return strings.Join(s, ", ")
	},
	"opts": func(o transports.Options) string {
		var s []string
		for _, k := range slices.Sorted(maps.Keys(o)) {
			s = append(s, k+"="+o[k])
		}
		return strings.Join(s, " ")
	},
	"sortedKeys": func(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) },
	"ranks":      func(m map[int]string) []int { return slices.Sorted(maps.Keys(m)) },
	"svg":        func(b []byte) template.HTML { return template.HTML(inlineSVG(b)) },
	"f1":         func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"median":     func(m map[string]float64, k string) string { return fmt.Sprintf("%.0f", m[k]) },
	"join":       strings.Join,
	"gpuMatrix":  gpuMatrix,
	"mbps": func(n int) string {
		if n%1000 == 0 {
			return fmt.Sprintf("%d Gb/s", n/1000)
		}
		return fmt.Sprintf("%d Mb/s", n)
	},
	"lower": strings.ToLower,
}).Parse(pageText))

// humanBytes is a byte count for people; "unknown" where none was recorded.
func humanBytes(n int64) string {
	if n <= 0 {
		return "unknown"
	}
	return bytesize.Human(n)
}

// inlineSVG is an SVG document as an element of an HTML page: without
// its XML declaration.
func inlineSVG(b []byte) string {
	s := string(b)
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	return s
}

// fontFace is the @font-face rule of the plots' font, the font inline:
// the page shows the plots as drawn, with nothing to fetch.
func fontFace() (template.CSS, error) {
	f := font.DefaultCache.Lookup(plotFont, 10)
	if f.Face == nil {
		return "", fmt.Errorf("report: font %s %s not found", plotFont.Typeface, plotFont.Variant)
	}
	var b bytes.Buffer
	if _, err := f.Face.WriteSourceTo(nil, &b); err != nil {
		return "", fmt.Errorf("report: font: %w", err)
	}
	return template.CSS(fmt.Sprintf("@font-face{font-family:\"Liberation Sans\";src:url(data:font/ttf;base64,%s) format(\"truetype\");}",
		base64.StdEncoding.EncodeToString(b.Bytes()))), nil
}

// pageData is what the template draws.
type pageData struct {
	Title     string
	Generated string
	FontFace  template.CSS
	Runs      []runView
	Compare   *compareView
}

// runView is one run's sections.
type runView struct {
	*Run
	Anchor    string
	Outcome   *sweep.Outcome
	Safety    *sweep.Safety
	Curves    []Figure // the overview: verification, transports, eager
	Footprint *Figure
	Stages    []stageView
	Hangs     []hang
	Others    []sweep.ProbeRecord // stored verdicts not in the safety phase's
	Transport []string            // the transport stage's candidates, as columns
	Summary   string              // the run's own summary file, as written
	Notes     []string
}

// stageView is one stage: its decision and the plots not shown above.
type stageView struct {
	Name     string
	Decision *sweep.StageDecision
	Best     float64
	Figures  []Figure
	InCurves bool
}

// hang is a trial the watchdog caught or a stall.
type hang struct {
	Stage, Candidate string
	Pattern          bench.Pattern
	Round            int
	Failed           string
	Stacks           map[int]string
}

// overviewStages are drawn first, under Curves: what the profile routes
// by (the GPU path stages under each load).
var overviewStages = []string{"verify", "gpu-path", "gpu-pinned", "transport", "internode-transport", "eager"}

// inOverview says whether stage is drawn under Curves: one of
// overviewStages that measured curves (a stage of one size stays with
// its table).
func inOverview(run *Run, stage string, patterns []bench.Pattern) bool {
	if !slices.Contains(overviewStages, stageBase(stage)) {
		return false
	}
	for _, p := range patterns {
		for _, s := range stageCurves(run.Trials, stage, p) {
			if len(s.pts) > 1 {
				return true
			}
		}
	}
	return false
}

// build draws a run's figures and tables.
func build(run *Run, anchor string) (runView, error) {
	v := runView{Run: run, Anchor: anchor}
	if run.Result != nil {
		v.Outcome, v.Safety = &run.Result.Outcome, &run.Result.Safety
		v.Notes = run.Result.Notes
	}
	stages, patterns := stagesOf(run.Trials)
	decisions := map[string]*sweep.StageDecision{}
	if v.Outcome != nil {
		for i := range v.Outcome.Stages {
			decisions[v.Outcome.Stages[i].Stage] = &v.Outcome.Stages[i]
		}
	}
	// Stages decided without trials of their own (a GPU stage's overall
	// pick across loads) come after their loads.
	if v.Outcome != nil {
		for _, d := range v.Outcome.Stages {
			if !slices.Contains(stages, d.Stage) {
				at := len(stages)
				for i, s := range stages {
					if stageBase(s) == d.Stage {
						at = i + 1
					}
				}
				stages = slices.Insert(stages, at, d.Stage)
			}
		}
	}
	for _, base := range overviewStages {
		for _, s := range stages {
			if stageBase(s) != base || !inOverview(run, s, patterns[s]) {
				continue
			}
			figs, err := stageFigures(run, s, patterns[s])
			if err != nil {
				return v, err
			}
			v.Curves = append(v.Curves, figs...)
			if s == "verify" {
				r, err := ratioFigure(run)
				if err != nil {
					return v, err
				}
				if r != nil {
					v.Curves = append(v.Curves, *r)
				}
			}
		}
	}
	for _, s := range stages {
		sv := stageView{Name: s, Decision: decisions[s], InCurves: inOverview(run, s, patterns[s])}
		if sv.Decision != nil {
			for _, sc := range sv.Decision.Scores {
				sv.Best = max(sv.Best, sc.Value)
			}
		}
		if !sv.InCurves {
			figs, err := stageFigures(run, s, patterns[s])
			if err != nil {
				return v, err
			}
			sv.Figures = figs
		}
		v.Stages = append(v.Stages, sv)
	}
	fp, err := footprintFigure(run)
	if err != nil {
		return v, err
	}
	v.Footprint = fp
	for _, t := range run.Trials {
		if t.Failed != "" {
			v.Hangs = append(v.Hangs, hang{Stage: t.Stage, Candidate: t.Candidate, Pattern: t.Pattern, Round: t.Round, Failed: t.Failed, Stacks: t.Stacks})
		}
	}
	if v.Outcome != nil {
		for _, c := range v.Outcome.Transport {
			for _, name := range slices.Sorted(maps.Keys(c.Medians)) {
				if !slices.Contains(v.Transport, name) {
					v.Transport = append(v.Transport, name)
				}
			}
		}
	}
	inSafety := map[string]bool{}
	if v.Safety != nil {
		for _, r := range append(slices.Clone(v.Safety.Detectors), v.Safety.Verdicts...) {
			inSafety[verdictKey(r)] = true
		}
	}
	for _, r := range run.Verdicts {
		if !inSafety[verdictKey(r)] {
			v.Others = append(v.Others, r)
		}
	}
	for _, name := range []string{sweep.SummaryFile, sweep.SummaryFile + ".txt"} {
		if b, err := os.ReadFile(filepath.Join(run.Dir, name)); err == nil {
			v.Summary = string(b)
			break
		}
	}
	return v, nil
}

func verdictKey(r sweep.ProbeRecord) string {
	return fmt.Sprintf("%s/%v/%s", r.Probe, r.Unsafe, r.Config)
}

// figures lists every figure of a run view, in page order.
func (v runView) figures() []Figure {
	figs := slices.Clone(v.Curves)
	if v.Footprint != nil {
		figs = append(figs, *v.Footprint)
	}
	for _, s := range v.Stages {
		figs = append(figs, s.Figures...)
	}
	return figs
}

// Write draws the run directories dirs into one report: out/report.html
// and every plot as out/<id>.svg. With one run, out is usually the run
// directory itself. It returns the report's path.
func Write(ctx context.Context, out string, dirs ...string) (string, error) {
	if len(dirs) == 0 {
		return "", fmt.Errorf("report: no run directory")
	}
	data := pageData{Generated: time.Now().UTC().Format(time.RFC3339)}
	var ids []string
	for i, dir := range dirs {
		run, err := Load(ctx, dir)
		if err != nil {
			return "", err
		}
		anchor := "run"
		if len(dirs) > 1 {
			anchor = fmt.Sprintf("run%d", i+1)
		}
		v, err := build(run, anchor)
		if err != nil {
			return "", fmt.Errorf("report: %s: %w", dir, err)
		}
		if len(dirs) > 1 { // distinct file names per run
			prefix := anchor + "-"
			for _, f := range []*[]Figure{&v.Curves} {
				for j := range *f {
					(*f)[j].ID = prefix + (*f)[j].ID
				}
			}
			if v.Footprint != nil {
				v.Footprint.ID = prefix + v.Footprint.ID
			}
			for j := range v.Stages {
				for k := range v.Stages[j].Figures {
					v.Stages[j].Figures[k].ID = prefix + v.Stages[j].Figures[k].ID
				}
			}
		}
		data.Runs = append(data.Runs, v)
		for _, f := range v.figures() {
			ids = append(ids, f.ID)
		}
	}
	if dup := duplicate(ids); dup != "" {
		return "", fmt.Errorf("report: two plots named %s", dup)
	}
	data.Title = "gotune report: " + data.Runs[0].Meta.RunID
	if len(dirs) > 1 {
		data.Title = fmt.Sprintf("gotune report: %d runs", len(dirs))
	}
	var figs []Figure
	for _, v := range data.Runs {
		figs = append(figs, v.figures()...)
	}
	return writePage(out, data, figs)
}

// writePage renders data to out/report.html and writes figs beside it.
func writePage(out string, data pageData, figs []Figure) (string, error) {
	ff, err := fontFace()
	if err != nil {
		return "", err
	}
	data.FontFace = ff
	var b bytes.Buffer
	if err := page.Execute(&b, data); err != nil {
		return "", fmt.Errorf("report: render: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	for _, f := range figs {
		if err := writeFile(filepath.Join(out, f.ID+".svg"), f.SVG); err != nil {
			return "", err
		}
	}
	path := filepath.Join(out, File)
	if err := writeFile(path, b.Bytes()); err != nil {
		return "", err
	}
	return path, nil
}

func duplicate(ids []string) string {
	s := slices.Clone(ids)
	sort.Strings(s)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return s[i]
		}
	}
	return ""
}

// writeFile writes path whole or not at all.
func writeFile(path string, data []byte) error {
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}

// gpuMatrix is the GPU connection matrix as nvidia-smi topo -m prints it:
// a header row and column of GPU names, X on the diagonal, each pair's path
// elsewhere (its P2P read status added where it is not OK); nil with fewer
// than two GPUs.
func gpuMatrix(g *hostinfo.GPUs) [][]string {
	n := len(g.Devices)
	if n < 2 {
		return nil
	}
	rows := make([][]string, n+1)
	rows[0] = make([]string, n+1)
	for i := range n {
		rows[0][i+1] = fmt.Sprintf("GPU%d", i)
		rows[i+1] = make([]string, n+1)
		rows[i+1][0] = rows[0][i+1]
		rows[i+1][i+1] = "X"
	}
	for _, l := range g.Links {
		a, b := l.GPUs[0], l.GPUs[1]
		if a < 0 || b < 0 || a >= n || b >= n {
			continue
		}
		cell := l.Path
		if l.P2P != "" && l.P2P != "OK" {
			cell += " (" + l.P2P + ")"
		}
		rows[a+1][b+1], rows[b+1][a+1] = cell, cell
	}
	return rows
}
