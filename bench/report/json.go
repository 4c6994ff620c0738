package report

import (
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
		if err := enc.Encode(runLine{"run", r.Label, r.Provenance, r.Spec}); err != nil {
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
