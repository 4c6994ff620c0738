package stack

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
)

// OpenMPI tunes Open MPI's shared-memory path (ob1 over vader, 4.1's names)
// through a params file loaded with OMPI_MCA_mca_base_param_files.
type OpenMPI struct {
	// Params replaces the built-in space when set (tests weigh less).
	Params []Param
	// Hazards bounds the hazard runs (zero: anchor's defaults).
	Hazards mpistack.CheckOptions
	binary  string // anchor.c built with mpicc.openmpi by Prepare
	pmlUCX  bool   // this Open MPI has the ucx pml (Prepare asks ompi_info)
	// files is Open MPI's default mca_base_param_files (the user's and
	// the system's), read after the tuned file: naming a file replaces the
	// list, and Debian's system file holds settings a job needs (pml = ^ucx).
	files string
}

// Name is the profile's name for the stack.
func (*OpenMPI) Name() string { return "openmpi" }

// Prepare builds the reference benchmark with Open MPI's compiler wrapper.
func (o *OpenMPI) Prepare(ctx context.Context, dir string) error {
	bin, err := mpistack.Build(ctx, o.stack("build"), filepath.Join(dir, "openmpi"))
	if err != nil {
		return err
	}
	o.binary = bin
	if o.files, o.pmlUCX, err = ompiInfo(ctx); err != nil {
		return err
	}
	// The space is ob1's over vader: where Open MPI picks another pml by
	// itself (ucx on a node with an HCA it supports), none of it applies.
	pml, err := mpistack.SelectedPML(ctx, o.stack("defaults"), bin)
	if err != nil {
		return err
	}
	if pml != "ob1" {
		return fmt.Errorf("open mpi selects pml %s here without a file; gotune tunes ob1 over vader (and weighs pml ucx against it) only where ob1 is the default", pml)
	}
	return nil
}

// ompiInfo reads what Prepare needs from one ompi_info --all --parsable,
// run without a params file of the caller's: the built-in
// mca_base_param_files, and whether the ucx pml is built in.
func ompiInfo(ctx context.Context) (files string, pmlUCX bool, err error) {
	cmd := exec.CommandContext(ctx, "ompi_info", "--all", "--parsable")
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "OMPI_MCA_mca_base_param_files=") })
	out, err := cmd.Output()
	if err != nil {
		return "", false, fmt.Errorf("open mpi's default params files: ompi_info: %w", err)
	}
	const key = "mca:mca:base:param:mca_base_param_files:value:"
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			files = v
		}
		pmlUCX = pmlUCX || strings.HasPrefix(line, "mca:pml:ucx:version:")
	}
	if files == "" {
		return "", false, fmt.Errorf("open mpi's default params files: ompi_info lists no mca_base_param_files")
	}
	return files, pmlUCX, nil
}

// Space: the pml first where UCX's is built in (under it the vader knobs
// are moot), then single copy (it decides what large messages do), the
// limits that shape copy-in/copy-out around it, and the fast boxes.
func (o *OpenMPI) Space() []Param {
	if o.Params != nil {
		return o.Params
	}
	large := ladder(4<<10, 16<<20)
	var space []Param
	if o.pmlUCX {
		// pml ucx selects itself only for the HCAs its defaults name
		// (mlx*); on a node without them it must be told any device.
		space = append(space, Param{Name: "pml", Values: []string{"ob1", "ucx"}, Pattern: bench.Bandwidth, Sizes: large,
			With: map[string]map[string]string{"ucx": {"pml_ucx_tls": "any", "pml_ucx_devices": "any"}}})
	}
	underUCX := map[string]string{"pml": "ucx"}
	return append(space,
		Param{Name: "btl_vader_single_copy_mechanism", Values: []string{"cma", "none"}, Pattern: bench.Bandwidth, Sizes: large, Unless: underUCX},
		Param{Name: "btl_vader_max_send_size", Values: []string{"32768", "65536", "131072"}, Pattern: bench.Bandwidth, Sizes: ladder(32<<10, 16<<20), Unless: underUCX},
		Param{Name: "btl_vader_eager_limit", Values: []string{"4096", "8192", "16384"}, Pattern: bench.Bandwidth, Sizes: ladder(1<<10, 64<<10), Unless: underUCX},
		Param{Name: "btl_vader_rndv_eager_limit", Values: []string{"32768", "65536", "131072"}, Pattern: bench.Bandwidth, Sizes: ladder(32<<10, 1<<20), Unless: underUCX},
		Param{Name: "btl_vader_fbox_threshold", Values: []string{"16", "4", "64"}, Pattern: bench.Latency, Sizes: []int{8, 64, 512, 4096}, Unless: underUCX},
	)
}

// stack is Open MPI as the adapter runs it: params written as an Open MPI
// params file (name = value) under dir and named by
// OMPI_MCA_mca_base_param_files, as a user installs the tuned file.
func (o *OpenMPI) stack(label string) mpistack.Stack { return mpistack.OpenMPIFile("openmpi " + label) }

// Loaded is Open MPI's launcher configuration labelled label, params
// written as a file under dir and named ahead of the default files.
func (o *OpenMPI) Loaded(dir, label string, params map[string]string) (mpistack.Stack, error) {
	st := mpistack.OpenMPIFile(label)
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
	st.Env = append(st.Env, "OMPI_MCA_mca_base_param_files="+file+","+o.files)
	return st, nil
}

// Contender measures with params loaded.
func (o *OpenMPI) Contender(dir, label string, params map[string]string) mpistack.Contender {
	return mpistack.Contender{Label: "openmpi " + label, Run: func(ctx context.Context, spec bench.Spec) (bench.Result, error) {
		st, err := o.Loaded(dir, "openmpi "+label, params)
		if err != nil {
			return bench.Result{}, err
		}
		return mpistack.Run(ctx, st, o.binary, spec)
	}}
}

// Check runs the stack hazards with params loaded.
func (o *OpenMPI) Check(ctx context.Context, dir string, params map[string]string) error {
	st, err := o.Loaded(dir, "openmpi check", params)
	if err != nil {
		return err
	}
	return mpistack.Check(ctx, st, o.binary, checkSizes, o.Hazards)
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
