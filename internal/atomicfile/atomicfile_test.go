package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		path string
		perm os.FileMode
		ok   bool
	}{
		{"new file", filepath.Join(dir, "a"), 0o644, true},
		{"replaces a file", filepath.Join(dir, "a"), 0o600, true},
		{"missing directory", filepath.Join(dir, "no", "b"), 0o644, false},
	} {
		err := Write(c.path, []byte(c.name), c.perm)
		if (err == nil) != c.ok {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !c.ok {
			continue
		}
		b, err := os.ReadFile(c.path)
		if err != nil || string(b) != c.name {
			t.Errorf("%s: read %q (%v)", c.name, b, err)
		}
		if fi, err := os.Stat(c.path); err != nil || fi.Mode().Perm() != c.perm {
			t.Errorf("%s: stat %v", c.name, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*tmp*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
