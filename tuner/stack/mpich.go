package stack

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
)

// MPICH tunes MPICH's control variables that act on messages between
// ranks of one node, through MPIR_CVAR_ variables, which is how MPICH
// reads them: an env file sourced before mpiexec.
//
// Which ones act depends on the build. With a ch4:ucx device (Debian's
// 4.0.2) intranode messages go through UCX, not CH4's POSIX shared memory:
// an absurd iqueue cell size changes nothing, UCX_TLS=tcp makes 8-byte
// latency 10x (docs/stacks.md, Spaces); there only the progress
// loop's knob is weighed, and UCX's own file (gotune sweep --stack ucx)
// tunes the path.
type MPICH struct {
	// Params replaces the built-in space when set (tests weigh less).
	Params []Param
	// Hazards bounds the hazard runs (zero: anchor's defaults).
	Hazards mpistack.CheckOptions
	binary  string // anchor.c built with mpicc.mpich by Prepare
	device  string // MPICH's device, from mpichversion ("ch4:ucx")
}

// Name is the profile's name for the stack.
func (*MPICH) Name() string { return "mpich" }

// Prepare builds the reference benchmark with MPICH's compiler wrapper.
func (m *MPICH) Prepare(ctx context.Context, dir string) error {
	bin, err := mpistack.Build(ctx, m.stack("build"), filepath.Join(dir, "mpich"))
	if err != nil {
		return err
	}
	m.binary = bin
	m.device = mpichDevice(ctx)
	return nil
}

var mpichDeviceLine = regexp.MustCompile(`(?m)^MPICH Device:\s*(\S+)`)

// mpichDevice is the device mpichversion reports ("" when it cannot tell).
func mpichDevice(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "mpichversion").Output()
	if m := mpichDeviceLine.FindSubmatch(out); err == nil && m != nil {
		return string(m[1])
	}
	return ""
}

// Space: where CH4's POSIX shared memory carries intranode messages, the
// iqueue's cell size (small messages in one cell, large ones cell by cell)
// and its depth; then, for every device, how long a waiting rank spins
// before it yields.
func (m *MPICH) Space() []Param {
	if m.Params != nil {
		return m.Params
	}
	polls := Param{Name: "polls_before_yield", Values: []string{"1000", "0", "10000"}, Pattern: bench.Latency, Sizes: []int{8, 512, 4096}}
	if strings.HasSuffix(m.device, ":ucx") {
		return []Param{polls}
	}
	return []Param{
		{Name: "ch4_shm_posix_iqueue_cell_size", Values: []string{"69632", "16384", "32768", "139264"}, Pattern: bench.Bandwidth, Sizes: ladder(4<<10, 16<<20)},
		{Name: "ch4_shm_posix_iqueue_num_cells", Values: []string{"64", "32", "128"}, Pattern: bench.Bandwidth, Sizes: ladder(4<<10, 16<<20)},
		polls,
	}
}

// stack is MPICH as the adapter runs it.
func (m *MPICH) stack(label string) mpistack.Stack { return mpistack.MPICH("mpich " + label) }

// loaded is the stack with params as MPIR_CVAR_ variables, as sourcing
// the tuned mpich.env sets them.
func (m *MPICH) loaded(label string, params map[string]string) mpistack.Stack {
	st, _ := m.Loaded("", "mpich "+label, params)
	return st
}

// Loaded is MPICH's launcher configuration labelled label, params set as
// the MPIR_CVAR_ variables the tuned mpich.env exports.
func (m *MPICH) Loaded(_, label string, params map[string]string) (mpistack.Stack, error) {
	st := mpistack.MPICH(label)
	st.Env = append(st.Env, envLines("mpich", params)...)
	return st, nil
}

// Contender measures with params loaded.
func (m *MPICH) Contender(_, label string, params map[string]string) mpistack.Contender {
	return mpistack.Contender{Label: "mpich " + label, Run: func(ctx context.Context, spec bench.Spec) (bench.Result, error) {
		return mpistack.Run(ctx, m.loaded(label, params), m.binary, spec)
	}}
}

// Check runs the stack hazards with params loaded.
func (m *MPICH) Check(ctx context.Context, _ string, params map[string]string) error {
	return mpistack.Check(ctx, m.loaded("check", params), m.binary, checkSizes, m.Hazards)
}
