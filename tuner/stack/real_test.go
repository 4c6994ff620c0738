package stack

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

// Each adapter weighs a parameter through its real stack, with the values
// loaded as users load them, confirms the choice against the defaults, and
// runs the stack hazards; a value that hangs them is caught.
func TestTuneRealStacks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real MPI ranks")
	}
	sizes := []int{4 << 10, 64 << 10}
	// Hazard runs bounded for a test: a run that must pass gets ample time
	// (a 3-rank flood on 2 cores takes seconds at 1 MiB, and more than 45 s
	// through MPICH over UCX while other packages' tests spin their own
	// ranks beside it); a run that must hang is cut at 5 s, which only a
	// hang reaches.
	patient := mpistack.CheckOptions{Iters: 5, Timeout: 3 * time.Minute}
	quick := mpistack.CheckOptions{Iters: 5, Timeout: 5 * time.Second}
	for _, tc := range []struct {
		family string
		a      Adapter
		hang   map[string]string // values that hang the hazards (nil: none tried)
		crash  map[string]string // values the stack refuses at start (nil: none tried)
	}{
		{"openmpi", &OpenMPI{Params: []Param{{Name: "btl_vader_single_copy_mechanism", Values: []string{"cma", "none"}, Pattern: bench.Bandwidth, Sizes: sizes}}, Hazards: patient},
			map[string]string{"btl_vader_fbox_size": "1"}, nil},
		{"mpich", &MPICH{Params: []Param{{Name: "ch4_shm_posix_iqueue_num_cells", Values: []string{"64", "32"}, Pattern: bench.Bandwidth, Sizes: sizes}}, Hazards: patient}, nil, nil},
		// UCX's hazards run MPICH over UCX: a file whose transports cannot
		// reach the peer must fail them, which shows the file is loaded.
		{"ucx", &UCX{Params: []Param{{Name: "tls", Values: []string{"all", "posix,cma,self"}, Pattern: bench.Bandwidth, Sizes: sizes}}, Hazards: patient},
			nil, map[string]string{"tls": "self"}},
		// mimalloc preloaded into Open MPI's ranks, weighed on the alloc churn
		{"mimalloc", &Mimalloc{Params: []Param{{Name: "decommit_delay", Values: []string{"25", "250"}, Pattern: bench.AllocChurn, Sizes: []int{4 << 10, 1 << 20}}}, Hazards: patient},
			nil, nil},
	} {
		t.Run(tc.family, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			res, err := Tune(ctx, tc.a, Config{Dir: dir, Rounds: 2, Iters: 4, ConfirmSizes: sizes})
			if errors.Is(err, sys.ErrNotSupported) {
				testutil.SkipUnless(t, tc.family, err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Version == "" || len(res.Choices) != 1 || len(res.Choices[0].Results) != 2 {
				t.Fatalf("result %+v", res)
			}
			for _, r := range res.Choices[0].Results {
				want := tc.a.Space()[0].Sizes
				if len(r.Points) != len(want) || len(r.Points[0].Samples) != 2 {
					t.Fatalf("%s: %d points, samples %v; want %d sizes of 2 rounds", r.Label, len(r.Points), r.Points[0].Samples, len(want))
				}
			}
			if v, set := res.Params[tc.a.Space()[0].Name]; set && v == tc.a.Space()[0].Values[0] {
				t.Errorf("the default %s is written to the file", v)
			}
			if err := tc.a.Check(ctx, dir, res.Params); err != nil {
				t.Errorf("hazards with %v: %v", res.Params, err)
			}
			if tc.hang != nil {
				tc.a.(*OpenMPI).Hazards = quick
				if err := tc.a.Check(ctx, dir, tc.hang); !errors.Is(err, mpistack.ErrHang) {
					t.Errorf("hazards with %v: %v, want a hang", tc.hang, err)
				}
			}
			if tc.crash != nil {
				if err := tc.a.Check(ctx, dir, tc.crash); !errors.Is(err, mpistack.ErrCrash) {
					t.Errorf("hazards with %v: %v, want a crash", tc.crash, err)
				}
			}
			t.Logf("%s %s: chose %v (scores %v); confirm %d", tc.family, res.Version, res.Params, res.Choices[0].Scores, len(res.Confirm))
		})
	}
}

// Open MPI's pml ucx runs the hazards when the file opens its device list
// up (the candidate's With), and refuses to start without it: so the file
// is what selects it.
func TestOpenMPIPMLUCX(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real MPI ranks")
	}
	ctx := context.Background()
	dir := t.TempDir()
	o := &OpenMPI{Hazards: mpistack.CheckOptions{Iters: 5, Timeout: 45 * time.Second}}
	if err := o.Prepare(ctx, dir); err != nil {
		testutil.SkipUnless(t, "openmpi", err)
		t.Fatal(err)
	}
	if !o.pmlUCX {
		t.Skip("this Open MPI has no ucx pml")
	}
	var pml Param
	for _, p := range o.Space() {
		if p.Name == "pml" {
			pml = p
		}
	}
	if pml.Name == "" {
		t.Fatal("the space has no pml parameter though ompi_info lists pml ucx")
	}
	params := map[string]string{}
	pml.set(params, "ucx")
	if err := o.Check(ctx, dir, params); err != nil {
		t.Errorf("hazards with %v: %v", params, err)
	}
	if err := o.Check(ctx, dir, map[string]string{"pml": "ucx"}); !errors.Is(err, mpistack.ErrCrash) {
		t.Errorf("hazards with pml ucx alone: %v, want a refusal to start", err)
	}
	for _, p := range o.Space()[1:] {
		if !p.moot(params) {
			t.Errorf("%s is weighed under pml ucx", p.Name)
		}
	}
}
