package output

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/hostinfo"
)

// runLine opens a result in the JSON lines format.
type runLine struct {
	Type       string              `json:"type"` // "run"
	Label      string              `json:"label"`
	Metric     string              `json:"metric,omitempty"`
	Provenance hostinfo.Provenance `json:"provenance"`
	Spec       bench.Spec          `json:"spec"`
}

// pointLine is one point of the result opened last, with the point's
// fields inlined.
type pointLine struct {
	Type      string        `json:"type"` // "point"
	Label     string        `json:"label"`
	Transport string        `json:"transport"`
	Pattern   bench.Pattern `json:"pattern"`
	bench.Point
}

// writeJSON writes JSON lines: per result a "run" object, then a "point"
// object per size. Every line is a JSON value of its own.
func writeJSON(w io.Writer, results []bench.Result) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // keep "<", ">" and "&" in labels and warnings readable
	for _, r := range results {
		if err := enc.Encode(runLine{"run", r.Label, r.Metric, r.Provenance, r.Spec}); err != nil {
			return fmt.Errorf("result %q: %w", r.Label, err)
		}
		for _, p := range r.Points {
			if err := enc.Encode(pointLine{"point", r.Label, r.Spec.Transport, r.Spec.Pattern, p}); err != nil {
				return fmt.Errorf("result %q, size %d: %w", r.Label, p.Size, err)
			}
		}
	}
	return nil
}

// maxJSONLine bounds one line of ReadJSON's input: a point with many
// samples and warnings stays far below it.
const maxJSONLine = 16 << 20

// ReadJSON reads results in the JSON lines format writeJSON writes: a
// "run" line opens a result, and each "point" line after it adds a point
// to that result. Blank lines are skipped. name is the input's name for
// errors, which give the line. Fields it does not know are ignored, so a
// newer gotune's files still read.
func ReadJSON(name string, r io.Reader) ([]bench.Result, error) {
	var results []bench.Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxJSONLine)
	line := 0
	for sc.Scan() {
		line++
		text := bytes.TrimSpace(sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var kind struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(text, &kind); err != nil {
			return nil, fmt.Errorf("%s:%d: not a gotune JSON line: %w", name, line, err)
		}
		switch kind.Type {
		case "run":
			var run runLine
			if err := json.Unmarshal(text, &run); err != nil {
				return nil, fmt.Errorf("%s:%d: run: %w", name, line, err)
			}
			results = append(results, bench.Result{Label: run.Label, Metric: run.Metric, Provenance: run.Provenance, Spec: run.Spec})
		case "point":
			if len(results) == 0 {
				return nil, fmt.Errorf("%s:%d: a point before any run line", name, line)
			}
			var p pointLine
			if err := json.Unmarshal(text, &p); err != nil {
				return nil, fmt.Errorf("%s:%d: point: %w", name, line, err)
			}
			open := &results[len(results)-1]
			if p.Label != open.Label {
				return nil, fmt.Errorf("%s:%d: point of %q inside run %q", name, line, p.Label, open.Label)
			}
			open.Points = append(open.Points, p.Point)
		default:
			return nil, fmt.Errorf("%s:%d: line type %q (want run or point)", name, line, kind.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	if len(results) == 0 {
		return nil, fmt.Errorf("%s: no results", name)
	}
	return results, nil
}
