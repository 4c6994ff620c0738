package launchenv

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Info is one process's place in a job started by an external launcher.
type Info struct {
	Launcher  string // "openmpi", "hydra" or "slurm": whose variables said so
	Rank      int
	Size      int
	LocalRank int    // rank among the job's processes on this node
	LocalSize int    // processes of the job on this node; 0: the launcher does not say
	Node      int    // index of this node in the job; -1: the launcher does not say
	JobID     string // the launcher's job (and, for Slurm, step) id: unique to this launch
}

// ErrNoLauncher is returned when no launcher's variables are set: the
// process was not started by mpirun, mpiexec or srun.
var ErrNoLauncher = errors.New("no launcher's variables in the environment (not started by mpirun, mpiexec or srun)")

// source is one launcher's variables. Launchers nest (mpirun under an
// salloc allocation starts its daemons with srun, and the ranks inherit
// the daemons' SLURM_PROCID), so the launcher that started the rank
// itself is tried first: Open MPI's, then Hydra's, then Slurm's.
type source struct {
	name                  string
	rank, size            string
	localRank, localSize  string // "" when the launcher has none
	node, job             string
	step                  string // appended to the job id: "" when the launcher has none
	localSizeFromNodeList func(get Getenv, node int) (int, error)
}

var sources = []source{
	{name: "openmpi", rank: "OMPI_COMM_WORLD_RANK", size: "OMPI_COMM_WORLD_SIZE",
		localRank: "OMPI_COMM_WORLD_LOCAL_RANK", localSize: "OMPI_COMM_WORLD_LOCAL_SIZE", job: "PMIX_NAMESPACE"},
	{name: "hydra", rank: "PMI_RANK", size: "PMI_SIZE",
		localRank: "MPI_LOCALRANKID", localSize: "MPI_LOCALNRANKS", job: "PMI_JOBID"},
	{name: "slurm", rank: "SLURM_PROCID", size: "SLURM_NTASKS",
		localRank: "SLURM_LOCALID", node: "SLURM_NODEID", job: "SLURM_JOB_ID", step: "SLURM_STEP_ID", localSizeFromNodeList: slurmLocalSize},
}

// Getenv is os.LookupEnv's shape, so that tests pass an environment.
type Getenv func(key string) (string, bool)

// FromEnv reads the launcher's variables through get. A launcher whose rank
// variable is set must also give the size, and every value it gives must
// be a number in range: an error names the variable and its value.
func FromEnv(get Getenv) (Info, error) {
	for _, s := range sources {
		if _, ok := get(s.rank); !ok {
			continue
		}
		return s.read(get)
	}
	return Info{}, ErrNoLauncher
}

func (s source) read(get Getenv) (Info, error) {
	in := Info{Launcher: s.name, Node: -1, LocalRank: -1}
	var err error
	if in.Rank, err = required(get, s.rank); err != nil {
		return in, err
	}
	if in.Size, err = required(get, s.size); err != nil {
		return in, err
	}
	if in.Size < 1 || in.Rank >= in.Size {
		return in, fmt.Errorf("%s: %s=%d with %s=%d: the rank must be below the size", s.name, s.rank, in.Rank, s.size, in.Size)
	}
	if in.LocalRank, err = optional(get, s.localRank, -1); err != nil {
		return in, err
	}
	if in.LocalSize, err = optional(get, s.localSize, 0); err != nil {
		return in, err
	}
	if in.Node, err = optional(get, s.node, -1); err != nil {
		return in, err
	}
	if s.localSizeFromNodeList != nil && in.LocalSize == 0 && in.Node >= 0 {
		if in.LocalSize, err = s.localSizeFromNodeList(get, in.Node); err != nil {
			return in, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	if in.LocalSize > 0 && in.LocalRank >= in.LocalSize {
		return in, fmt.Errorf("%s: %s=%d with %d processes on the node: the local rank must be below them", s.name, s.localRank, in.LocalRank, in.LocalSize)
	}
	if s.job != "" {
		in.JobID, _ = get(s.job)
	}
	if step, ok := get(s.step); ok && s.step != "" && in.JobID != "" {
		in.JobID += "." + step // each srun of an allocation is its own job here
	}
	return in, nil
}

func required(get Getenv, key string) (int, error) {
	v, ok := get(key)
	if !ok {
		return 0, fmt.Errorf("%s is not set", key)
	}
	return number(key, v)
}

// optional reads key, or def when the launcher has no such variable or
// does not set it.
func optional(get Getenv, key string, def int) (int, error) {
	if key == "" {
		return def, nil
	}
	v, ok := get(key)
	if !ok {
		return def, nil
	}
	return number(key, v)
}

func number(key, v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s=%q: want a count (0 or more)", key, v)
	}
	return n, nil
}

// slurmLocalSize is the number of the step's tasks on node, from
// SLURM_STEP_TASKS_PER_NODE (or SLURM_TASKS_PER_NODE): counts per node in
// node order, a run of equal ones written "N(xK)", e.g. "2(x3),1".
func slurmLocalSize(get Getenv, node int) (int, error) {
	key := "SLURM_STEP_TASKS_PER_NODE"
	v, ok := get(key)
	if !ok {
		key = "SLURM_TASKS_PER_NODE"
		if v, ok = get(key); !ok {
			return 0, nil
		}
	}
	counts, err := ParseTasksPerNode(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: %w", key, v, err)
	}
	if node >= len(counts) {
		return 0, fmt.Errorf("%s=%q names %d nodes, SLURM_NODEID is %d", key, v, len(counts), node)
	}
	return counts[node], nil
}

// ParseTasksPerNode expands Slurm's compressed task counts ("2(x3),1" is
// 2, 2, 2, 1).
func ParseTasksPerNode(s string) ([]int, error) {
	var counts []int
	for _, part := range strings.Split(s, ",") {
		n, reps, found := strings.Cut(part, "(x")
		k := 1
		if found {
			r, ok := strings.CutSuffix(reps, ")")
			var err error
			if k, err = strconv.Atoi(r); !ok || err != nil || k < 1 {
				return nil, fmt.Errorf("bad repeat %q", part)
			}
		}
		c, err := strconv.Atoi(n)
		if err != nil || c < 0 {
			return nil, fmt.Errorf("bad count %q", part)
		}
		for range k {
			counts = append(counts, c)
		}
	}
	return counts, nil
}
