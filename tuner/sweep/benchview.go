package sweep

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/output"
	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/tuner/store"
)

// benchView writes the Go benchmark format view of the trials that
// produced points, measured on prov; nothing when none did.
func benchView(w io.Writer, trials []Trial, prov hostinfo.Provenance) error {
	var results []bench.Result
	for _, t := range trials {
		if t.Failed != "" || len(t.Points) == 0 {
			continue
		}
		spec := bench.Spec{Transport: t.Transport, Options: t.Options, Pattern: t.Pattern, Sizes: t.Sizes}
		results = append(results, bench.Result{Label: t.Stage + " " + t.Candidate, Provenance: prov, Spec: spec, Points: t.Points})
	}
	if len(results) == 0 {
		return nil
	}
	if err := output.Write(w, "bench", results); err != nil {
		return fmt.Errorf("write %s: %w", BenchFile, err)
	}
	return nil
}

// WriteBench writes the Go benchmark format view of the trials stored in
// the run directory dir (a sweep's or a verification's, its store plain
// or compressed) to w, in the order they were stored: the BenchFile the
// run wrote, made from meta.json and the store alone. It writes nothing
// into dir, so it also serves run directories checked in without one.
func WriteBench(dir string, w io.Writer) error {
	metaPath := filepath.Join(dir, MetaFile)
	b, err := os.ReadFile(metaPath)
	if err != nil {
		return fmt.Errorf("bench view of %s: %w", dir, err)
	}
	var meta Meta
	if err := json.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("bench view: %s: %w", metaPath, err)
	}
	storePath := filepath.Join(dir, MeasurementsFile)
	recs, err := store.Read(storePath)
	if err != nil {
		return fmt.Errorf("bench view of %s: %w", dir, err)
	}
	var trials []Trial
	for _, rec := range recs {
		if rec.Kind != "trial" {
			continue
		}
		var t Trial
		if err := json.Unmarshal(rec.Data, &t); err != nil {
			return fmt.Errorf("bench view: %s: record %s: %w", storePath, rec.Key, err)
		}
		trials = append(trials, t)
	}
	return benchView(w, trials, meta.Provenance)
}
