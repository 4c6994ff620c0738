package htmlreport

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/gotune/gotune/transports"
)

// plotFont is the font of every plot's text: Liberation Sans, which
// gonum.org/v1/plot ships and report.html embeds (fontFace).
var plotFont = font.Font{Typeface: "Liberation", Variant: "Sans"}

// Figure size (points) of the plots.
const (
	figWidth  = 7.2 * vg.Inch
	figHeight = 4.2 * vg.Inch
)

// xy is one point of a line with its confidence interval [lo, hi]
// (lo = hi = y when there is none).
type xy struct{ x, y, lo, hi float64 }

// line is one series of a chart.
type line struct {
	label string
	pts   []xy
	bold  bool // the chosen candidate
}

// vmark is a decision drawn as a vertical line at x (a size).
type vmark struct {
	x     float64
	label string
}

// hmark is a horizontal line at y (a memory bound, a ratio of 1).
type hmark struct {
	y     float64
	label string
}

// region shades the x range [from, to) with a label: a transport's range.
type region struct {
	from, to float64
	label    string
}

// chart is one plot before drawing.
type chart struct {
	title, xlabel, ylabel string
	sizeX                 bool // x is a message size in bytes: log2 axis, ticks as 1K, 1M
	pow2X                 bool // log x axis ticked at powers of two, as plain numbers
	sizeY                 bool // log y axis of bytes, ticked at powers of two as 1K, 1M
	logX, logY            bool
	lines                 []line
	vmarks                []vmark
	hmarks                []hmark
	regions               []region
}

// palette is the lines' colours (Okabe-Ito, distinguishable in colour
// blindness), then repeated darker.
var palette = []color.RGBA{
	{0, 114, 178, 255}, {213, 94, 0, 255}, {0, 158, 115, 255}, {204, 121, 167, 255},
	{230, 159, 0, 255}, {86, 180, 233, 255}, {120, 120, 120, 255}, {240, 228, 66, 255},
}

func colorOf(i int) color.RGBA {
	c := palette[i%len(palette)]
	if i >= len(palette) {
		c.R, c.G, c.B = c.R*2/3, c.G*2/3, c.B*2/3
	}
	return c
}

// svg draws c as an SVG document.
func (c chart) svg() ([]byte, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.Title.TextStyle.Font = font.From(plotFont, 13)
	p.X.Label.Text, p.Y.Label.Text = c.xlabel, c.ylabel
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		ax.Label.TextStyle.Font = font.From(plotFont, 11)
		ax.Tick.Label.Font = font.From(plotFont, 9)
	}
	p.Legend.TextStyle.Font = font.From(plotFont, 9)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.YOffs = -2
	p.Add(plotter.NewGrid())

	ymin, ymax := math.Inf(1), math.Inf(-1)
	xmin, xmax := math.Inf(1), math.Inf(-1)
	okY := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && (!(c.logY || c.sizeY) || v > 0) }
	okX := func(v float64) bool {
		return !math.IsNaN(v) && !math.IsInf(v, 0) && (!(c.logX || c.sizeX || c.pow2X) || v > 0)
	}
	for _, l := range c.lines {
		for _, q := range l.pts {
			if !okX(q.x) || !okY(q.y) {
				continue
			}
			xmin, xmax = min(xmin, q.x), max(xmax, q.x)
			for _, v := range []float64{q.y, q.lo, q.hi} {
				if okY(v) {
					ymin, ymax = min(ymin, v), max(ymax, v)
				}
			}
		}
	}
	for _, h := range c.hmarks {
		if okY(h.y) {
			ymin, ymax = min(ymin, h.y), max(ymax, h.y)
		}
	}
	for _, m := range c.vmarks {
		if okX(m.x) {
			xmin, xmax = min(xmin, m.x), max(xmax, m.x)
		}
	}
	if math.IsInf(ymin, 0) || math.IsInf(xmin, 0) {
		return nil, fmt.Errorf("plot %q: no point to draw", c.title)
	}
	if ymin == ymax {
		ymin, ymax = ymin*0.9, ymax*1.1
		if ymin == 0 {
			ymin, ymax = -1, 1
		}
	}
	if xmin == xmax {
		xmin, xmax = xmin/2, xmax*2
	}
	// Head room for the legend and the marks' labels.
	if c.logY || c.sizeY {
		ymax *= math.Pow(ymax/ymin, 0.25)
	} else {
		ymax += (ymax - ymin) * 0.25
	}
	if c.sizeX || c.logX || c.pow2X {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = logTicks{}
	}
	if c.sizeX {
		p.X.Tick.Marker = sizeTicks{format: sizeLabel}
	}
	if c.pow2X {
		p.X.Tick.Marker = sizeTicks{format: func(v int) string { return fmt.Sprint(v) }}
	}
	if c.logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = logTicks{}
	} else {
		p.Y.Tick.Marker = linearTicks{}
	}
	if c.sizeY {
		p.Y.Tick.Marker = sizeTicks{format: sizeLabel}
	}
	p.X.Min, p.X.Max, p.Y.Min, p.Y.Max = xmin, xmax, ymin, ymax

	for i, r := range c.regions {
		from, to := max(r.from, xmin), min(r.to, xmax)
		if from >= to {
			continue
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: from, Y: ymin}, {X: to, Y: ymin}, {X: to, Y: ymax}, {X: from, Y: ymax}})
		if err != nil {
			return nil, fmt.Errorf("plot %q: region: %w", c.title, err)
		}
		shade := uint8(0xf4)
		if i%2 == 1 {
			shade = 0xe8
		}
		poly.Color = color.RGBA{shade, shade, shade, 255}
		poly.LineStyle.Width = 0
		p.Add(poly)
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: from, Y: ymin}}, Labels: []string{" " + r.label}})
		if err != nil {
			return nil, err
		}
		lb.TextStyle[0].Font = font.From(plotFont, 9)
		lb.TextStyle[0].Color = color.Gray{90}
		lb.Offset = vg.Point{X: 14, Y: 3}
		p.Add(lb)
	}
	for i, l := range c.lines {
		col := colorOf(i)
		var pts, band plotter.XYs
		var upper plotter.XYs
		for _, q := range l.pts {
			if !okX(q.x) || !okY(q.y) {
				continue
			}
			pts = append(pts, plotter.XY{X: q.x, Y: q.y})
			lo, hi := q.lo, q.hi
			if !okY(lo) {
				lo = q.y
			}
			if !okY(hi) {
				hi = q.y
			}
			band = append(band, plotter.XY{X: q.x, Y: lo})
			upper = append(upper, plotter.XY{X: q.x, Y: hi})
		}
		if len(pts) == 0 {
			continue
		}
		slices.Reverse(upper)
		band = append(band, upper...)
		if poly, err := plotter.NewPolygon(band); err == nil && len(pts) > 1 {
			poly.Color = color.RGBA{col.R, col.G, col.B, 0x38}
			poly.LineStyle.Width = 0
			p.Add(poly)
		}
		if eb, err := plotter.NewYErrorBars(errBars(l.pts, okX, okY)); err == nil {
			eb.Color = col
			eb.Width = vg.Points(0.6)
			eb.CapWidth = vg.Points(4)
			p.Add(eb)
		}
		ln, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("plot %q: %s: %w", c.title, l.label, err)
		}
		ln.Color, sc.Color = col, col
		ln.Width = vg.Points(1.2)
		sc.Radius = vg.Points(1.8)
		if l.bold {
			ln.Width = vg.Points(2.6)
			sc.Radius = vg.Points(2.6)
		}
		p.Add(ln, sc)
		label := l.label
		if l.bold {
			label += " (chosen)"
		}
		p.Legend.Add(label, ln, sc)
	}
	for _, h := range c.hmarks {
		if !okY(h.y) {
			continue
		}
		if err := addRule(p, plotter.XYs{{X: xmin, Y: h.y}, {X: xmax, Y: h.y}}, h.label, vg.Point{X: 3, Y: 3}, false); err != nil {
			return nil, err
		}
	}
	for _, m := range c.vmarks {
		if !okX(m.x) {
			continue
		}
		if err := addRule(p, plotter.XYs{{X: m.x, Y: ymin}, {X: m.x, Y: ymax}}, m.label, vg.Point{X: 11, Y: 16}, true); err != nil {
			return nil, err
		}
	}

	canvas := vgsvg.New(figWidth, figHeight)
	p.Draw(draw.New(canvas))
	var b bytes.Buffer
	if _, err := canvas.WriteTo(&b); err != nil {
		return nil, fmt.Errorf("plot %q: %w", c.title, err)
	}
	return b.Bytes(), nil
}

// addRule draws a dashed decision line along pts with its label offset by
// off from the line's first point: written upwards beside a vertical line
// (up), along a horizontal one.
func addRule(p *plot.Plot, pts plotter.XYs, label string, off vg.Point, up bool) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = color.RGBA{200, 30, 30, 255}
	l.Width = vg.Points(1)
	l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	p.Add(l)
	if label == "" {
		return nil
	}
	lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{pts[0]}, Labels: []string{label}})
	if err != nil {
		return err
	}
	lb.TextStyle[0].Font = font.From(plotFont, 9)
	lb.TextStyle[0].Color = color.RGBA{170, 20, 20, 255}
	if up {
		lb.TextStyle[0].Rotation = math.Pi / 2
	}
	lb.Offset = off
	p.Add(lb)
	return nil
}

// sizeTicks marks a log2 axis at powers of two, at most about eight of
// them labelled by format.
type sizeTicks struct{ format func(int) string }

// sizeLabel writes a size as 1K, 1M (bytes below 1K as plain numbers).
func sizeLabel(v int) string { return transports.FormatSize(v) }

func (t sizeTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	a, b := int(math.Floor(math.Log2(lo))), int(math.Ceil(math.Log2(hi)))
	step := max(1, (b-a+7)/8)
	var ticks []plot.Tick
	for e := a; e <= b; e++ {
		v := math.Exp2(float64(e))
		if v < lo || v > hi {
			continue
		}
		label := ""
		if (e-a)%step == 0 {
			label = t.format(int(v))
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
	}
	return ticks
}

// logTicks marks a log axis at 1, 2 and 5 times the powers of ten, or,
// over less than a factor of ten, at plot.DefaultTicks' round values.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	if lo <= 0 || hi <= lo {
		return nil
	}
	if hi/lo < 10 {
		return linearTicks{}.Ticks(lo, hi)
	}
	labelled := []float64{1, 2, 5}
	if hi/lo > 1e4 {
		labelled = []float64{1}
	}
	var ticks []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if slices.Contains(labelled, m) {
				t.Label = tickLabel(v)
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// tickLabel writes a value compactly: 0.5, 20000, 2.5M, 3G.
func tickLabel(v float64) string {
	switch {
	case v >= 1e9:
		return strconv.FormatFloat(v/1e9, 'g', 4, 64) + "G"
	case v >= 1e6:
		return strconv.FormatFloat(v/1e6, 'g', 4, 64) + "M"
	default:
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
}

// yErrs is a line's points with their intervals, for plotter.YErrorBars.
type yErrs []xy

func (e yErrs) Len() int                    { return len(e) }
func (e yErrs) XY(i int) (float64, float64) { return e[i].x, e[i].y }
func (e yErrs) YError(i int) (float64, float64) {
	return e[i].y - e[i].lo, e[i].hi - e[i].y
}

// errBars keeps the points that can be drawn, their intervals clipped to
// what the axis can show.
func errBars(pts []xy, okX, okY func(float64) bool) yErrs {
	var out yErrs
	for _, q := range pts {
		if !okX(q.x) || !okY(q.y) {
			continue
		}
		if !okY(q.lo) || q.lo > q.y {
			q.lo = q.y
		}
		if !okY(q.hi) || q.hi < q.y {
			q.hi = q.y
		}
		out = append(out, q)
	}
	return out
}

// linearTicks are plot.DefaultTicks' round values, labelled with the
// digits that tell them apart.
type linearTicks struct{}

func (linearTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	var major []float64
	for _, t := range ticks {
		if !t.IsMinor() {
			major = append(major, t.Value)
		}
	}
	decimals := 0
	if len(major) > 1 {
		step := major[1] - major[0]
		decimals = max(0, int(math.Ceil(-math.Log10(step)+1e-9)))
	}
	for i := range ticks {
		if ticks[i].IsMinor() {
			continue
		}
		v := ticks[i].Value
		if math.Abs(v) >= 1e6 {
			ticks[i].Label = tickLabel(v)
		} else {
			ticks[i].Label = strconv.FormatFloat(v, 'f', decimals, 64)
		}
	}
	return ticks
}
