package mpistack

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/testutil"
)

// fakeOSU compiles testdata/fakeosu.c with the family's mpicc under each
// of names in a fresh directory and returns it, skipping when the family
// is not installed.
func fakeOSU(t *testing.T, family string, names ...string) string {
	t.Helper()
	mpicc := map[string]string{"openmpi": "mpicc.openmpi", "mpich": "mpicc.mpich"}[family]
	_, err := exec.LookPath(mpicc)
	testutil.SkipUnless(t, family, err)
	dir := t.TempDir()
	src, err := filepath.Abs("testdata/fakeosu.c")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		sub := filepath.Join(dir, "libexec", "osu-micro-benchmarks", "mpi")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(mpicc, "-o", filepath.Join(sub, name), src).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", mpicc, err, out)
		}
	}
	return dir
}

// OSU's binaries run through the launcher of the library they link, with
// the ranks and arguments the spec asks for, and their rows become the
// result's points.
func TestRunOSU(t *testing.T) {
	for _, family := range []string{"openmpi", "mpich"} {
		t.Run(family, func(t *testing.T) {
			dir := fakeOSU(t, family, "osu_bw", "osu_mbw_mr", "osu_alltoall")
			o, err := FindOSU(dir)
			if err != nil {
				t.Fatal(err)
			}
			if o.Family != family || len(o.Binaries) != 3 {
				t.Fatalf("found %s with %v; want %s with 3 binaries", o.Family, o.Binaries, family)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			for _, tc := range []struct {
				spec bench.Spec
				want float64 // 1000 x ranks + iterations
			}{
				{bench.Spec{Pattern: bench.Bandwidth, Sizes: []int{4096, 65536}, Reps: 2, Iters: 7, Warmup: 1}, 2007},
				{bench.Spec{Pattern: bench.MultiBandwidth, Ranks: 4, Sizes: []int{8, 1 << 20}, Reps: 1}, 4000},
				{bench.Spec{Pattern: bench.AllToAll, Ranks: 3, Sizes: []int{1024}, Reps: 1}, 3000},
			} {
				res, err := RunOSU(ctx, o, o.stack("osu "+family), tc.spec)
				if err != nil {
					t.Fatalf("%s: %v", tc.spec.Pattern, err)
				}
				if len(res.Points) != len(tc.spec.Sizes) || res.Spec.Pattern != tc.spec.Pattern || res.Provenance.Libraries[family] == "" {
					t.Fatalf("%s: points %+v, spec %+v, libraries %v", tc.spec.Pattern, res.Points, res.Spec, res.Provenance.Libraries)
				}
				for i, p := range res.Points {
					if p.Size != tc.spec.Sizes[i] || p.Unit != tc.spec.Pattern.Unit() || len(p.Samples) != tc.spec.Reps {
						t.Errorf("%s point %d: size %d unit %s, %d samples", tc.spec.Pattern, i, p.Size, p.Unit, len(p.Samples))
					}
					for _, v := range p.Samples {
						if v != tc.want {
							t.Errorf("%s size %d: %v, want %v (ranks or iterations not passed on)", tc.spec.Pattern, p.Size, v, tc.want)
						}
					}
				}
			}
		})
	}
}

func TestOSUErrors(t *testing.T) {
	dir := fakeOSU(t, "openmpi", "osu_bw")
	o, err := FindOSU(dir)
	if err != nil {
		t.Fatal(err)
	}
	notMPI := t.TempDir()
	trueBin, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(trueBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(notMPI, "osu_latency"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"a size OSU cannot run", func() error {
			_, err := RunOSU(t.Context(), o, o.stack("osu"), bench.Spec{Pattern: bench.Bandwidth, Sizes: []int{3000}})
			return err
		}, "powers of two"},
		{"a benchmark the install lacks", func() error {
			_, err := RunOSU(t.Context(), o, o.stack("osu"), bench.Spec{Pattern: bench.Latency, Sizes: []int{8}})
			return err
		}, "no osu_latency below it"},
		{"an empty directory", func() error { _, err := FindOSU(t.TempDir()); return err }, "none of osu_alltoall"},
		{"a binary without MPI", func() error { _, err := FindOSU(notMPI); return err }, "links no MPI library"},
	} {
		err := tc.err()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}
