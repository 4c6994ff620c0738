package testutil

import (
	"os/exec"
	"syscall"
	"testing"
)

// Nobody is the unprivileged user (uid and gid 65534) tests run processes
// as when they need another user than root.
const Nobody = 65534

// AsNobody makes cmd start as Nobody (the caller must be root).
func AsNobody(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Nobody, Gid: Nobody}}
}

// MountTmpfs mounts a tmpfs with options (e.g. "size=24k", "ro,size=1m")
// at dir and unmounts it when the test ends; the test is skipped where
// mounting is not allowed.
func MountTmpfs(t *testing.T, dir, options string) {
	t.Helper()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", options, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs -o %s on %s: %v: %s", options, dir, err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
}
