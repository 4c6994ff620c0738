package htmlreport

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gotune/gotune/tuner/store"
	"github.com/gotune/gotune/tuner/sweep"
)

// Run is one run directory as the report draws it.
type Run struct {
	Dir      string
	Meta     sweep.Meta
	Trials   []sweep.Trial       // every stored trial, in the order stored
	Verdicts []sweep.ProbeRecord // every stored probe verdict, in the order stored
	// Result is the run re-decided from its store (sweep.Tune); nil for a
	// verification's run directory, or when it could not be re-decided
	// (Problem says why).
	Result  *sweep.Result
	Problem string
}

// Load reads the run directory dir: meta.json, its store (plain or
// compressed) and, by replaying the sweep's decisions on a copy of them,
// what it decided. Nothing in dir is written.
func Load(ctx context.Context, dir string) (*Run, error) {
	run, err := readRun(dir)
	if err != nil || run.Meta.Verify != nil {
		return run, err
	}
	res, err := replay(ctx, dir)
	switch {
	case err == nil || res.Summarized: // a run that emitted no profile still decided
		res.Dir, res.ProfilePath = dir, ""
		if _, serr := os.Stat(filepath.Join(dir, sweep.ProfileFile)); serr == nil {
			res.ProfilePath = filepath.Join(dir, sweep.ProfileFile)
		}
		run.Result = &res
		if err != nil {
			run.Problem = err.Error()
		}
	default:
		run.Problem = fmt.Sprintf("the decisions could not be replayed from the store: %v", err)
	}
	return run, nil
}

// readRun reads dir's meta.json and store.
func readRun(dir string) (*Run, error) {
	metaPath := filepath.Join(dir, sweep.MetaFile)
	b, err := os.ReadFile(metaPath)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	run := &Run{Dir: dir}
	if err := json.Unmarshal(b, &run.Meta); err != nil {
		return nil, fmt.Errorf("report: %s: %w", metaPath, err)
	}
	storePath := filepath.Join(dir, sweep.MeasurementsFile)
	recs, err := store.Read(storePath)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	for _, rec := range recs {
		switch rec.Kind {
		case "trial":
			var t sweep.Trial
			if err := json.Unmarshal(rec.Data, &t); err != nil {
				return nil, fmt.Errorf("report: %s: record %s: %w", storePath, rec.Key, err)
			}
			run.Trials = append(run.Trials, t)
		case "verdict":
			var v sweep.ProbeRecord
			if err := json.Unmarshal(rec.Data, &v); err != nil {
				return nil, fmt.Errorf("report: %s: record %s: %w", storePath, rec.Key, err)
			}
			run.Verdicts = append(run.Verdicts, v)
		}
	}
	return run, nil
}

// replay re-decides dir with sweep.Tune in a copy of its meta.json and
// store, so that dir's own derived files are left as they are.
func replay(ctx context.Context, dir string) (sweep.Result, error) {
	tmp, err := os.MkdirTemp("", "gotune-report-")
	if err != nil {
		return sweep.Result{}, fmt.Errorf("replay: %w", err)
	}
	defer os.RemoveAll(tmp)
	cp := filepath.Join(tmp, "run")
	if err := os.Mkdir(cp, 0o755); err != nil {
		return sweep.Result{}, fmt.Errorf("replay: %w", err)
	}
	for _, name := range []string{sweep.MetaFile, sweep.MeasurementsFile, sweep.MeasurementsFile + store.CompressedSuffix} {
		if err := copyFile(filepath.Join(dir, name), filepath.Join(cp, name)); err != nil && !os.IsNotExist(err) {
			return sweep.Result{}, fmt.Errorf("replay: %w", err)
		}
	}
	return sweep.Tune(ctx, cp, nil)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
