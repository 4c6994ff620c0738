package stack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/profile/native"
)

// UCX tunes UCX's intra-node path (UCP tag matching over shared memory and
// CMA, 1.13's names) through ucx_perftest, each candidate written as a
// ucx.conf in a directory of its own and loaded with UCX_CONFIG_DIR, as a
// user installs the tuned file.
type UCX struct {
	// Params replaces the built-in space when set (tests weigh less).
	Params []Param
	// Hazards bounds the hazard runs (zero: anchor's defaults).
	Hazards mpistack.CheckOptions
	// Perftest is the measuring tool (default "ucx_perftest", Debian's
	// ucx-utils).
	Perftest string
	mpich    string // anchor.c built with mpicc.mpich by Prepare, for the hazards
}

// Name is the profile's name for the stack.
func (*UCX) Name() string { return "ucx" }

// Prepare finds ucx_perftest and builds the reference benchmark with
// MPICH's compiler wrapper for the hazards (see Check). It refuses to
// measure where something of higher precedence than UCX_CONFIG_DIR's file
// sets a parameter of the space: every candidate would then run alike.
func (u *UCX) Prepare(ctx context.Context, dir string) error {
	tool := cmp.Or(u.Perftest, "ucx_perftest")
	if _, err := exec.LookPath(tool); err != nil {
		return fmt.Errorf("prepare ucx: %w", sys.NotSupported("ucx", tool+" not found in PATH (Debian: ucx-utils)", err))
	}
	if err := shadowed(u.Space(), os.LookupEnv, "ucx.conf"); err != nil {
		return fmt.Errorf("prepare ucx: %w", err)
	}
	bin, err := mpistack.Build(ctx, u.hazardStack("build"), filepath.Join(dir, "ucx-mpich"))
	if err != nil {
		return fmt.Errorf("prepare ucx: the hazards run through MPICH over UCX: %w", err)
	}
	u.mpich = bin
	return nil
}

// shadowed says which of space's parameters UCX would take from somewhere
// that beats $UCX_CONFIG_DIR/ucx.conf: the environment (UCX_MM_X also as
// UCX_POSIX_X and UCX_SYSV_X, which it sets) or a ucx.conf in the working
// directory (local, the file UCX reads last).
func shadowed(space []Param, lookup func(string) (string, bool), local string) error {
	var set []string
	for _, p := range space {
		names := []string{ucxVar(p.Name)}
		if rest, ok := strings.CutPrefix(p.Name, "mm_"); ok {
			names = append(names, ucxVar("posix_"+rest), ucxVar("sysv_"+rest))
		}
		for _, n := range names {
			if v, ok := lookup(n); ok {
				set = append(set, n+"="+v)
			}
		}
	}
	if len(set) > 0 {
		return fmt.Errorf("%s in the environment beat every ucx.conf, so the candidates would all run alike: unset them to tune UCX", strings.Join(set, " "))
	}
	if _, err := os.Stat(local); err == nil {
		abs, _ := filepath.Abs(local)
		return fmt.Errorf("%s is read after $UCX_CONFIG_DIR/ucx.conf and would override the candidates: run from another directory", abs)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("look for %s: %w", local, err)
	}
	return nil
}

// Space: the transports first (whether CMA's single copy is there decides
// what large messages do), then the rendezvous protocol and the thresholds
// that move messages between UCX's protocols, then the shared-memory FIFO.
// The first value of each is UCX 1.13.1's default (`ucx_info -c`); mm_fifo_size
// is UCX_MM_FIFO_SIZE, which sets UCX_POSIX_FIFO_SIZE and UCX_SYSV_FIFO_SIZE.
// Sizes step by 4 where a run starts two processes per size and the
// parameter acts over the whole range; by 2 around the thresholds.
func (u *UCX) Space() []Param {
	if u.Params != nil {
		return u.Params
	}
	return []Param{
		// tcp is in all but carries nothing intra-node while shared memory
		// reaches the peer; posix,self has no single copy (a control).
		{Name: "tls", Values: []string{"all", "sm,self", "posix,cma,self", "posix,self"}, Pattern: bench.Bandwidth, Sizes: quartets(4<<10, 16<<20)},
		{Name: "rndv_scheme", Values: []string{"auto", "get_zcopy", "put_zcopy"}, Pattern: bench.Bandwidth, Sizes: quartets(64<<10, 16<<20)},
		{Name: "rndv_thresh", Values: []string{"auto", "8K", "32K", "128K"}, Pattern: bench.Bandwidth, Sizes: ladder(4<<10, 512<<10)},
		{Name: "zcopy_thresh", Values: []string{"auto", "8K", "64K"}, Pattern: bench.Bandwidth, Sizes: ladder(4<<10, 256<<10)},
		// short (inline in the FIFO element) to bcopy: a latency matter.
		{Name: "bcopy_thresh", Values: []string{"auto", "0", "64"}, Pattern: bench.Latency, Sizes: []int{8, 64, 128, 512}},
		{Name: "mm_fifo_size", Values: []string{"64", "32", "256"}, Pattern: bench.Bandwidth, Sizes: ladder(4<<10, 256<<10)},
	}
}

// ucxVar is the environment and ucx.conf name of a parameter.
func ucxVar(param string) string {
	name, _ := native.Var("ucx", param) // ucx is a stack native knows
	return name
}

// configDir writes params as ucx.conf into a directory under dir named by
// the file's content (so a contender's file never changes under a run) and
// returns the environment that loads it. The defaults get an empty file, so
// that every contender is loaded alike. UCX 1.13 reads the file yet warns,
// on stdout, that UCX_CONFIG_DIR is an unused variable (it is no config
// field), which would break the parsing of ucx_perftest's and the ranks'
// output: UCX_WARN_UNUSED_ENV_VARS=n silences that warning only.
func configDir(dir string, params map[string]string) ([]string, error) {
	content, err := fileLines("ucx", params)
	if err != nil {
		return nil, err
	}
	cd := filepath.Join(dir, fmt.Sprintf("ucx-%x", contentHash(content)))
	file := filepath.Join(cd, "ucx.conf")
	env := []string{"UCX_CONFIG_DIR=" + cd, "UCX_WARN_UNUSED_ENV_VARS=n"}
	if _, err := os.Stat(file); err == nil {
		return env, nil
	}
	if err := os.MkdirAll(cd, 0o755); err != nil {
		return nil, fmt.Errorf("write ucx.conf: %w", err)
	}
	if err := os.WriteFile(file+".tmp", content, 0o644); err != nil {
		return nil, fmt.Errorf("write ucx.conf: %w", err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		return nil, fmt.Errorf("write ucx.conf: %w", err)
	}
	return env, nil
}

// Contender measures ucx_perftest's tag tests (a server and a client on
// two cores) with params loaded.
func (u *UCX) Contender(dir, label string, params map[string]string) mpistack.Contender {
	return mpistack.Contender{Label: "ucx " + label, Run: func(ctx context.Context, spec bench.Spec) (bench.Result, error) {
		env, err := configDir(dir, params)
		if err != nil {
			return bench.Result{}, err
		}
		return mpistack.RunUCX(ctx, mpistack.UCX{Name: "ucx " + label, Perftest: u.Perftest, Env: env}, spec)
	}}
}

// hazardStack is MPICH as the hazards run it. ucx_perftest cannot validate
// payloads, so the hazards run MPI traffic through UCX instead: Debian's
// MPICH is built ch4:ucx and, with MPIR_CVAR_NOLOCAL, sends even its
// intra-node messages through UCX (4.0.2 does so without it too: UCX_TLS=tcp
// slows its 8-byte round trip from 1.3 to 8 us), so a ucx.conf that hangs
// or corrupts MPI traffic fails here.
func (u *UCX) hazardStack(label string) mpistack.Stack {
	st := mpistack.MPICH("ucx " + label + " (mpich over ucx)")
	st.Env = append(st.Env, "MPIR_CVAR_NOLOCAL=1")
	return st
}

// Check runs the stack hazards through MPICH over UCX with params loaded
// from UCX_CONFIG_DIR, as for measuring.
func (u *UCX) Check(ctx context.Context, dir string, params map[string]string) error {
	env, err := configDir(dir, params)
	if err != nil {
		return err
	}
	st := u.hazardStack("check")
	st.Env = append(st.Env, env...)
	return mpistack.Check(ctx, st, u.mpich, checkSizes, u.Hazards)
}

// quartets is the powers of four times lo up to hi.
func quartets(lo, hi int) []int {
	var out []int
	for n := lo; n <= hi; n *= 4 {
		out = append(out, n)
	}
	return out
}
