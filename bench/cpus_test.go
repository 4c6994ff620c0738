package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/sys"
)

const defaultCPUsChild = "GOTUNE_TEST_DEFAULT_CPUS"

// The child of TestDefaultCPUsUnderBinding: prints DefaultCPUs(2).
func TestDefaultCPUsChild(t *testing.T) {
	if os.Getenv(defaultCPUsChild) == "" {
		t.Skip("the child of TestDefaultCPUsUnderBinding")
	}
	b, _ := json.Marshal(DefaultCPUs(2))
	fmt.Printf("cpus=%s\n", b)
}

// A process bound to one CPU (as mpirun binds by default) pins no ranks
// on its own, and under a launcher pins them to CPUs of its cpuset.
func TestDefaultCPUsUnderBinding(t *testing.T) {
	set, err := sys.CpusetCPUs("/")
	if err != nil {
		t.Fatal(err)
	}
	if len(set) < 2 {
		t.Skipf("the cpuset has %d CPU", len(set))
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Skip("no taskset")
	}
	for _, c := range []struct {
		name string
		env  []string
		want []int
	}{
		{"no launcher", nil, nil},
		{"mpirun", []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1", "OMPI_COMM_WORLD_LOCAL_RANK=0"}, set[:2]},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(taskset, "-c", fmt.Sprint(set[0]), os.Args[0], "-test.run", "^TestDefaultCPUsChild$", "-test.v")
			cmd.Env = append(withoutLauncherEnv(os.Environ()), append(c.env, defaultCPUsChild+"=1")...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var got []int
			for _, l := range strings.Split(string(out), "\n") {
				if v, ok := strings.CutPrefix(l, "cpus="); ok {
					if err := json.Unmarshal([]byte(v), &got); err != nil {
						t.Fatal(err)
					}
				}
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("DefaultCPUs(2) bound to cpu %d = %v, want %v\n%s", set[0], got, c.want, out)
			}
		})
	}
}

// withoutLauncherEnv drops the variables of any launcher (the tests may run
// under one).
func withoutLauncherEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		for _, p := range []string{"OMPI_", "PMI_", "PMIX_", "SLURM_", "MPI_LOCALRANKID", "MV2_", "HYDRA_"} {
			if strings.HasPrefix(kv, p) {
				return true
			}
		}
		return false
	})
}
