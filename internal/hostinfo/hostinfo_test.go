package hostinfo

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMemTotal(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"MemTotal:       24594612 kB\nMemFree:  1 kB\n", 24594612 << 10},
		{"MemFree:  1 kB\nMemTotal: 1024 kB", 1 << 20},
		{"MemFree:  1 kB\n", 0},
		{"MemTotal: 12 MB\n", 0},
		{"MemTotal: x kB\n", 0},
		{"MemTotal: -4 kB\n", 0},
	} {
		if got := memTotal(c.in); got != c.want {
			t.Errorf("memTotal(%q) = %d, want %d", c.in, got, c.want)
		}
	}
}

// Collect reads the machine's memory from root's proc/meminfo.
func TestCollectReadsMemory(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/meminfo"), []byte("MemTotal: 2048 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := Collect(root).MemBytes; got != 2<<20 {
		t.Fatalf("MemBytes = %d, want %d", got, 2<<20)
	}
	if got := Collect(t.TempDir()).MemBytes; got != 0 {
		t.Fatalf("MemBytes without meminfo = %d, want 0", got)
	}
}
