package stack

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

// The values reach the ranks as sourcing mimalloc.env and preloading the
// library put them there: environment lines, never launcher flags.
func TestMimallocLoaded(t *testing.T) {
	m := &Mimalloc{}
	for _, tc := range []struct {
		params map[string]string
		want   []string
	}{
		{nil, []string{"LD_PRELOAD=libmimalloc.so.2"}},
		{map[string]string{"segment_decommit_delay": "5000", "decommit_delay": "250"},
			[]string{"LD_PRELOAD=libmimalloc.so.2", "MIMALLOC_DECOMMIT_DELAY=250", "MIMALLOC_SEGMENT_DECOMMIT_DELAY=5000"}},
	} {
		st := m.loaded("x", tc.params)
		if !slices.Equal(st.Env, tc.want) || st.Family != "openmpi" || slices.ContainsFunc(st.Args, func(a string) bool { return strings.Contains(a, "mimalloc") }) {
			t.Errorf("%v: env %q args %q, want env %q through Open MPI", tc.params, st.Env, st.Args, tc.want)
		}
	}
	for _, p := range m.Space() {
		if p.Pattern != bench.AllocChurn || len(p.Values) < 2 || p.Sizes[0] != 4<<10 || p.Sizes[len(p.Sizes)-1] != 16<<20 {
			t.Errorf("param %+v: want the alloc churn over 4K-16M, the default and an alternative", p)
		}
	}
}

// A library ld.so cannot preload is a missing stack, not a failure.
func TestMimallocVersionMissingLibrary(t *testing.T) {
	cc := mpistack.OpenMPI("x").MPICC
	if _, err := exec.LookPath(cc); err != nil {
		testutil.SkipUnless(t, "openmpi", err)
	}
	_, err := mimallocVersion(t.Context(), cc, t.TempDir(), "libgotune-no-such-malloc.so.2")
	if !errors.Is(err, sys.ErrNotSupported) || !strings.Contains(err.Error(), "cannot be preloaded") {
		t.Fatalf("got %v, want ErrNotSupported saying the library cannot be preloaded", err)
	}
}

// The ranks Open MPI starts for a contender really run with mimalloc: each
// rank process of the anchor binary has libmimalloc mapped and the
// contender's MIMALLOC_ variable in its environment (/proc/PID/maps and
// environ, read while they run).
func TestMimallocInRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real MPI ranks")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	m := &Mimalloc{}
	if err := m.Prepare(ctx, t.TempDir()); err != nil {
		if errors.Is(err, sys.ErrNotSupported) {
			testutil.SkipUnless(t, "mimalloc", err)
		}
		t.Fatal(err)
	}
	if m.version == "" {
		t.Fatal("Prepare found no mimalloc version")
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		// long enough to be seen; cancelled once both ranks are
		_, err := mpistack.Run(runCtx, m.loaded("ranks", map[string]string{"decommit_delay": "250"}), m.binary,
			bench.Spec{Pattern: bench.Latency, Sizes: []int{8}, Reps: 1, Iters: 50_000_000, Warmup: 1})
		done <- err
	}()
	defer func() { stop(); <-done }()
	ranks := map[int]string{} // pid -> verdict
	for len(ranks) < 2 {
		select {
		case err := <-done:
			done <- err
			t.Fatalf("the run ended (%v) with ranks %v seen", err, ranks)
		case <-time.After(20 * time.Millisecond):
		}
		for pid, verdict := range rankProcesses(t, m.binary) {
			ranks[pid] = verdict
		}
	}
	for pid, verdict := range ranks {
		if verdict != "" {
			t.Errorf("rank pid %d: %s", pid, verdict)
		}
	}
	t.Logf("mimalloc %s in rank pids %v", m.version, slices.Sorted(maps.Keys(ranks)))
}

// rankProcesses finds the running processes of binary whose libraries ld.so
// has loaded (libmpi mapped) and says for each what is wrong ("" nothing).
func rankProcesses(t *testing.T, binary string) map[int]string {
	t.Helper()
	out := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join(d, "exe")); err != nil || exe != binary {
			continue
		}
		maps, err1 := os.ReadFile(filepath.Join(d, "maps"))
		environ, err2 := os.ReadFile(filepath.Join(d, "environ"))
		if err1 != nil || err2 != nil || !bytes.Contains(maps, []byte("/libmpi.so")) {
			continue // gone, or ld.so not done: look again
		}
		var verdict []string
		if !bytes.Contains(maps, []byte("/libmimalloc.so.2")) {
			verdict = append(verdict, "libmimalloc.so.2 not mapped")
		}
		if !slices.ContainsFunc(bytes.Split(environ, []byte{0}), func(kv []byte) bool { return string(kv) == "MIMALLOC_DECOMMIT_DELAY=250" }) {
			verdict = append(verdict, "MIMALLOC_DECOMMIT_DELAY=250 not in its environment")
		}
		out[pid] = strings.Join(verdict, "; ")
	}
	return out
}
