package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// TestCheckExitStatus: 0 when every value is used, 1 when one is
// overridden, 2 on trouble, against the real Open MPI.
func TestCheckExitStatus(t *testing.T) {
	_, err := exec.LookPath("ompi_info")
	testutil.SkipUnless(t, "openmpi", err)
	dir := t.TempDir()
	file := filepath.Join(dir, "openmpi-mca-params.conf")
	if err := os.WriteFile(file, []byte("btl_vader_eager_limit = 8192\nbtl_vader_fbox_max = 64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(bad, []byte("btl_vader_eager_limit 8192\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := run(t, "check", "--stack", "openmpi", file)
	if code != 0 || !strings.Contains(out, "ok: openmpi uses every value of "+file) {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	t.Setenv("OMPI_MCA_btl_vader_fbox_max", "16")
	out, errOut, code = run(t, "check", "--stack", "openmpi", file)
	if code != 1 || !strings.Contains(out, "btl_vader_fbox_max = 64 is overridden by the environment: OMPI_MCA_btl_vader_fbox_max=16") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, args := range [][]string{
		{"check", "--stack", "openmpi", bad},
		{"check", "--stack", "rccl", file},
		{"check", file},
		{"check", "--stack", "openmpi", file, file},
		{"check", "--stack", "openmpi", filepath.Join(dir, "missing.conf")},
	} {
		if _, errOut, code := run(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errOut)
		}
	}
}
