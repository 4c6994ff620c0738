package stack

import (
	"context"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/anchor"
)

// MPICH tunes MPICH's CH4 shared-memory path (the POSIX iqueue, Debian's
// 4.0 build) through MPIR_CVAR_ variables, which is how MPICH reads its
// control variables: an env file sourced before mpiexec.
type MPICH struct {
	// Params replaces the built-in space when set (tests weigh less).
	Params []Param
	// Hazards bounds the hazard runs (zero: anchor's defaults).
	Hazards anchor.CheckOptions
	binary  string // anchor.c built with mpicc.mpich by Prepare
}

// Name is the profile's name for the stack.
func (*MPICH) Name() string { return "mpich" }

// Prepare builds the reference benchmark with MPICH's compiler wrapper.
func (m *MPICH) Prepare(ctx context.Context, dir string) error {
	bin, err := anchor.Build(ctx, m.stack("build"), filepath.Join(dir, "mpich"))
	if err != nil {
		return err
	}
	m.binary = bin
	return nil
}

// Space: the iqueue's cell size carries every message (small ones in one
// cell, large ones cell by cell), then its depth, then how long a waiting
// rank spins before it yields.
func (m *MPICH) Space() []Param {
	if m.Params != nil {
		return m.Params
	}
	return []Param{
		{Name: "ch4_shm_posix_iqueue_cell_size", Values: []string{"69632", "16384", "32768", "139264"}, Pattern: bench.Bandwidth, Sizes: ladder(4<<10, 16<<20)},
		{Name: "ch4_shm_posix_iqueue_num_cells", Values: []string{"64", "32", "128"}, Pattern: bench.Bandwidth, Sizes: ladder(4<<10, 16<<20)},
		{Name: "polls_before_yield", Values: []string{"1000", "0", "10000"}, Pattern: bench.Latency, Sizes: []int{8, 512, 4096}},
	}
}

// stack is MPICH as the adapter runs it.
func (m *MPICH) stack(label string) anchor.Stack { return anchor.MPICH("mpich " + label) }

// loaded is the stack with params as MPIR_CVAR_ variables, as sourcing
// the tuned mpich.env sets them.
func (m *MPICH) loaded(label string, params map[string]string) anchor.Stack {
	st := m.stack(label)
	for _, k := range slices.Sorted(maps.Keys(params)) {
		st.Env = append(st.Env, "MPIR_CVAR_"+strings.ToUpper(k)+"="+params[k])
	}
	return st
}

// Contender measures with params loaded.
func (m *MPICH) Contender(_, label string, params map[string]string) anchor.Contender {
	return anchor.Contender{Label: "mpich " + label, Run: func(ctx context.Context, spec bench.Spec) (bench.Result, error) {
		return anchor.Run(ctx, m.loaded(label, params), m.binary, spec)
	}}
}

// Check runs the stack hazards with params loaded.
func (m *MPICH) Check(ctx context.Context, _ string, params map[string]string) error {
	return anchor.Check(ctx, m.loaded("check", params), m.binary, checkSizes, m.Hazards)
}
