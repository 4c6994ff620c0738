package launchenv

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// probeEnv makes the test binary print its Info as JSON and exit: the real
// launchers' test starts it as their ranks.
const probeEnv = "GOTUNE_LAUNCHER_PROBE"

func TestMain(m *testing.M) {
	if os.Getenv(probeEnv) == "1" {
		in, err := FromEnv(os.LookupEnv)
		if err != nil {
			os.Stdout.WriteString("error: " + err.Error() + "\n")
			os.Exit(1)
		}
		b, _ := json.Marshal(in)
		os.Stdout.Write(append(b, '\n'))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func env(kv ...string) Getenv {
	m := map[string]string{}
	for _, s := range kv {
		k, v, _ := strings.Cut(s, "=")
		m[k] = v
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  Getenv
		want Info
		err  string
	}{
		// As Open MPI 4.1.4's mpirun -np 2 sets them (rank 1), under an
		// salloc allocation whose srun started its daemon (SLURM_PROCID).
		{"openmpi", env("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1",
			"OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=1769209857", "SLURM_PROCID=0", "SLURM_NTASKS=1"),
			Info{Launcher: "openmpi", Rank: 1, Size: 2, LocalRank: 1, LocalSize: 2, Node: -1, JobID: "1769209857"}, ""},
		// As MPICH 4.0.2's Hydra (mpiexec -launcher fork -np 2) sets them.
		{"hydra", env("PMI_RANK=0", "PMI_SIZE=2", "MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=2", "PMI_FD=6"),
			Info{Launcher: "hydra", Rank: 0, Size: 2, LocalRank: 0, LocalSize: 2, Node: -1}, ""},
		// srun -N3 -n7: the third node's first task; 3, 2 and 2 tasks a node.
		{"slurm", env("SLURM_PROCID=5", "SLURM_NTASKS=7", "SLURM_LOCALID=0", "SLURM_NODEID=2", "SLURM_JOB_ID=4242",
			"SLURM_STEP_TASKS_PER_NODE=3,2(x2)"),
			Info{Launcher: "slurm", Rank: 5, Size: 7, LocalRank: 0, LocalSize: 2, Node: 2, JobID: "4242"}, ""},
		{"slurm step", env("SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_NODEID=1", "SLURM_JOB_ID=4242", "SLURM_STEP_ID=3"),
			Info{Launcher: "slurm", Rank: 1, Size: 2, LocalRank: 0, Node: 1, JobID: "4242.3"}, ""},
		{"slurm without task counts", env("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_LOCALID=0", "SLURM_NODEID=0"),
			Info{Launcher: "slurm", Rank: 0, Size: 2, LocalRank: 0, Node: 0}, ""},
		{"none", env("HOME=/root"), Info{}, ErrNoLauncher.Error()},
		{"size missing", env("OMPI_COMM_WORLD_RANK=0"), Info{}, "OMPI_COMM_WORLD_SIZE is not set"},
		{"not a number", env("PMI_RANK=zero", "PMI_SIZE=2"), Info{}, `PMI_RANK="zero": want a count`},
		{"rank past size", env("SLURM_PROCID=4", "SLURM_NTASKS=4"), Info{}, "the rank must be below the size"},
		{"local rank past local size", env("PMI_RANK=1", "PMI_SIZE=2", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=1"), Info{}, "local rank must be below"},
		{"node past the task list", env("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODEID=3", "SLURM_TASKS_PER_NODE=1(x2)"), Info{},
			`SLURM_TASKS_PER_NODE="1(x2)" names 2 nodes, SLURM_NODEID is 3`},
		{"bad task list", env("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODEID=0", "SLURM_TASKS_PER_NODE=2(x)"), Info{}, "bad repeat"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromEnv(tc.env)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if _, err := FromEnv(env()); !errors.Is(err, ErrNoLauncher) {
		t.Errorf("empty environment: %v, want ErrNoLauncher", err)
	}
}

func TestParseTasksPerNode(t *testing.T) {
	for in, want := range map[string][]int{"1": {1}, "2(x3),1": {2, 2, 2, 1}, "4,0": {4, 0}} {
		got, err := ParseTasksPerNode(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
}

// The real launchers: the test binary started as two ranks by Open MPI's
// mpirun and by MPICH's Hydra reads ranks 0 and 1 of 2, both local.
func TestRealLaunchers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real launchers")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		family, launcher string
		args             []string
	}{
		{"openmpi", "mpirun.openmpi", []string{"--oversubscribe", "-np", "2", "-x", probeEnv + "=1"}},
		{"mpich", "mpirun.mpich", []string{"-launcher", "fork", "-np", "2", "-genv", probeEnv, "1"}},
	} {
		t.Run(tc.family, func(t *testing.T) {
			path, err := exec.LookPath(tc.launcher)
			testutil.SkipUnless(t, tc.family, err)
			cmd := exec.Command(path, append(tc.args, exe)...)
			cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", tc.launcher, err, out)
			}
			var ranks []int
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				var in Info
				if err := json.Unmarshal([]byte(line), &in); err != nil {
					continue // the launcher's own chatter
				}
				want := map[string]string{"openmpi": "openmpi", "mpich": "hydra"}[tc.family]
				if in.Launcher != want || in.Size != 2 || in.LocalSize != 2 || in.LocalRank != in.Rank {
					t.Errorf("rank reads %+v, want launcher %s, size 2, both ranks on this node", in, want)
				}
				ranks = append(ranks, in.Rank)
			}
			slices.Sort(ranks)
			if !slices.Equal(ranks, []int{0, 1}) {
				t.Errorf("ranks %v, want [0 1]:\n%s", ranks, out)
			}
		})
	}
}
