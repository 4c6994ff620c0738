package stack

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/anchor"
)

// OpenMPI tunes Open MPI's shared-memory path (ob1 over vader, 4.1's names)
// through a params file loaded with OMPI_MCA_mca_base_param_files.
type OpenMPI struct {
	// Params replaces the built-in space when set (tests weigh less).
	Params []Param
	// Hazards bounds the hazard runs (zero: anchor's defaults).
	Hazards anchor.CheckOptions
	binary  string // anchor.c built with mpicc.openmpi by Prepare
}

// Name is the profile's name for the stack.
func (*OpenMPI) Name() string { return "openmpi" }

// Prepare builds the reference benchmark with Open MPI's compiler wrapper.
func (o *OpenMPI) Prepare(ctx context.Context, dir string) error {
	bin, err := anchor.Build(ctx, o.stack("build"), filepath.Join(dir, "openmpi"))
	if err != nil {
		return err
	}
	o.binary = bin
	return nil
}

// Space: single copy first (it decides what large messages do), then the
// limits that shape copy-in/copy-out around it, then the fast boxes.
func (o *OpenMPI) Space() []Param {
	if o.Params != nil {
		return o.Params
	}
	large := ladder(4<<10, 16<<20)
	return []Param{
		{Name: "btl_vader_single_copy_mechanism", Values: []string{"cma", "none"}, Pattern: bench.Bandwidth, Sizes: large},
		{Name: "btl_vader_max_send_size", Values: []string{"32768", "65536", "131072"}, Pattern: bench.Bandwidth, Sizes: ladder(32<<10, 16<<20)},
		{Name: "btl_vader_eager_limit", Values: []string{"4096", "8192", "16384"}, Pattern: bench.Bandwidth, Sizes: ladder(1<<10, 64<<10)},
		{Name: "btl_vader_rndv_eager_limit", Values: []string{"32768", "65536", "131072"}, Pattern: bench.Bandwidth, Sizes: ladder(32<<10, 1<<20)},
		{Name: "btl_vader_fbox_threshold", Values: []string{"16", "4", "64"}, Pattern: bench.Latency, Sizes: []int{8, 64, 512, 4096}},
	}
}

// stack is Open MPI as the adapter runs it: params written as an Open MPI
// params file (name = value) under dir and named by
// OMPI_MCA_mca_base_param_files, as a user installs the tuned file.
func (o *OpenMPI) stack(label string) anchor.Stack { return anchor.OpenMPI("openmpi " + label) }

func (o *OpenMPI) loaded(dir, label string, params map[string]string) (anchor.Stack, error) {
	st := o.stack(label)
	if len(params) == 0 {
		return st, nil
	}
	content, err := fileLines("openmpi", params)
	if err != nil {
		return st, err
	}
	file, err := writeParamsFile(dir, "openmpi", content)
	if err != nil {
		return st, err
	}
	st.Env = append(st.Env, "OMPI_MCA_mca_base_param_files="+file)
	return st, nil
}

// Contender measures with params loaded.
func (o *OpenMPI) Contender(dir, label string, params map[string]string) anchor.Contender {
	return anchor.Contender{Label: "openmpi " + label, Run: func(ctx context.Context, spec bench.Spec) (bench.Result, error) {
		st, err := o.loaded(dir, label, params)
		if err != nil {
			return bench.Result{}, err
		}
		return anchor.Run(ctx, st, o.binary, spec)
	}}
}

// Check runs the stack hazards with params loaded.
func (o *OpenMPI) Check(ctx context.Context, dir string, params map[string]string) error {
	st, err := o.loaded(dir, "check", params)
	if err != nil {
		return err
	}
	return anchor.Check(ctx, st, o.binary, checkSizes, o.Hazards)
}

// checkSizes cover every message class of the stacks tuned here: eager,
// copy-in/copy-out, and single copy or its pipeline.
var checkSizes = []int{8, 4 << 10, 64 << 10, 1 << 20}

// writeParamsFile writes content under dir, named by its content so that a
// contender's file never changes under a run.
func writeParamsFile(dir, stack string, content []byte) (string, error) {
	path := filepath.Join(dir, fmt.Sprintf("%s-%x.conf", stack, contentHash(content)))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o644); err != nil {
		return "", fmt.Errorf("write %s params file: %w", stack, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write %s params file: %w", stack, err)
	}
	return path, nil
}

// contentHash names a params file by what it holds.
func contentHash(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// ladder is the powers of two from lo to hi.
func ladder(lo, hi int) []int {
	var out []int
	for n := lo; n <= hi; n *= 2 {
		out = append(out, n)
	}
	return out
}
