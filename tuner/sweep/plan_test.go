package sweep

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBuiltInPlansAreValid(t *testing.T) {
	for _, name := range []string{"", "quick", "full"} {
		p, err := LoadPlan(name)
		if err != nil {
			t.Fatalf("LoadPlan(%q): %v", name, err)
		}
		if err := p.Check(); err != nil {
			t.Fatalf("plan %q: %v", name, err)
		}
	}
}

func TestLoadPlanFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("tiny.yaml", "budget: 90s\nrounds: 2\neager: [1K, 4K]\nprobes: [H5]\nparks: [0s, 50us, 2ms]\n")
	p, err := LoadPlan(good)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "tiny" || p.Budget != 90*time.Second || p.Rounds != 2 || len(p.Eager) != 2 || p.Window != Quick().Window {
		t.Fatalf("plan = %+v", p)
	}
	if want := []time.Duration{0, 50 * time.Microsecond, 2 * time.Millisecond}; !slices.Equal(p.Parks, want) {
		t.Fatalf("parks = %v, want %v", p.Parks, want)
	}
	for _, tc := range []struct{ name, body, want string }{
		{"unknown.yaml", "budget: 1m\nrouds: 3\n", "rouds"},
		{"wrongtype.yaml", "rounds: many\n", "rounds"},
		{"weak.yaml", "rounds: \"3\"\n", "rounds"},
		{"duration.yaml", "budget: 5\n", "budget"},
		{"badsize.yaml", "eager: [1Q]\n", "eager"},
		{"badfrag.yaml", "fragments: [64K]\n", "fragments"},
		{"badsettle.yaml", "settle: 4Q\n", "settle"},
		{"badtransport.yaml", "transports: [sm, ucx]\n", "transports"},
		{"maxrounds.yaml", "rounds: 4\nmax_rounds: 2\n", "max_rounds"},
		{"ranks.yaml", "ranks_per_node: 1\n", "ranks_per_node"},
		{"geometry.yaml", "geometry_ranks: 3\n", "geometry_ranks: 3: want 0 (ranks_per_node) or an even number"},
		{"allocwindow.yaml", "alloc_window: -1\n", "alloc_window"},
		{"parkint.yaml", "parks: [0, 50us]\n", "parks"},
		{"parknegative.yaml", "parks: [-1ms]\n", "parks: -1ms"},
		{"parksizes.yaml", "parks: [50us]\npark_sizes: \"\"\n", "park_sizes: empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := write(tc.name, tc.body)
			_, err := LoadPlan(path)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q should name the key %q and the file", err, tc.want)
			}
		})
	}
	if _, err := LoadPlan(filepath.Join(dir, "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("missing plan: %v", err)
	}
}

func TestLadder(t *testing.T) {
	l, err := ParseSizeList("8K:16M")
	if err != nil {
		t.Fatal(err)
	}
	got := l.Every(2)
	want := []int{8 << 10, 32 << 10, 128 << 10, 512 << 10, 2 << 20, 8 << 20, 16 << 20}
	if len(got) != len(want) {
		t.Fatalf("ladder = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ladder = %v, want %v", got, want)
		}
	}
}
