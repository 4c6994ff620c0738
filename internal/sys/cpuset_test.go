package sys

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// CpusetCPUs reads the cpuset of the process's cgroup (v2, walking up to
// the nearest cgroup that has one; or v1's cpuset hierarchy), else the
// online CPUs.
func TestCpusetCPUs(t *testing.T) {
	for _, c := range []struct {
		name    string
		files   map[string]string
		want    []int
		wantErr bool
	}{
		{"v2 leaf", map[string]string{
			"proc/self/cgroup": "0::/system.slice/slurmstepd.scope/job_7/step_0/user/task_0\n",
			"sys/fs/cgroup/system.slice/slurmstepd.scope/job_7/step_0/user/task_0/cpuset.cpus.effective": "4-5\n",
			"sys/fs/cgroup/cpuset.cpus.effective":                                                        "0-63\n",
		}, []int{4, 5}, false},
		{"v2 ancestor", map[string]string{
			"proc/self/cgroup": "0::/user.slice/session-3.scope\n",
			"sys/fs/cgroup/user.slice/cpuset.cpus.effective": "0-3,8\n",
		}, []int{0, 1, 2, 3, 8}, false},
		{"v1 cpuset", map[string]string{
			"proc/self/cgroup": "4:memory:/x\n3:cpuset:/slurm/uid_0/job_9\n0::/\n",
			"sys/fs/cgroup/cpuset/slurm/uid_0/job_9/cpuset.effective_cpus": "2,6\n",
		}, []int{2, 6}, false},
		{"no cpuset: online", map[string]string{
			"proc/self/cgroup":              "0::/\n",
			"sys/devices/system/cpu/online": "0-1\n",
		}, []int{0, 1}, false},
		{"no cgroup file: online", map[string]string{
			"sys/devices/system/cpu/online": "0-7\n",
		}, []int{0, 1, 2, 3, 4, 5, 6, 7}, false},
		{"corrupt list", map[string]string{
			"proc/self/cgroup":                    "0::/\n",
			"sys/fs/cgroup/cpuset.cpus.effective": "3-1\n",
		}, nil, true},
		{"nothing", map[string]string{}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for name, body := range c.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := CpusetCPUs(root)
			if (err != nil) != c.wantErr || !slices.Equal(got, c.want) {
				t.Fatalf("CpusetCPUs = %v, %v; want %v (error: %v)", got, err, c.want, c.wantErr)
			}
		})
	}
}

// This process's cpuset holds every CPU of its affinity mask.
func TestCpusetCoversAffinity(t *testing.T) {
	set, err := CpusetCPUs("/")
	if err != nil {
		t.Fatal(err)
	}
	mask, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range mask {
		if !slices.Contains(set, c) {
			t.Errorf("cpu %d is in the affinity mask %v but not in the cpuset %v", c, mask, set)
		}
	}
}
