package profile

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// catalogueOf writes one entry per profile (folder name → profile) into a
// new catalogue folder, with a stray file and a folder without a profile
// beside them.
func catalogueOf(t *testing.T, entries map[string]*Profile) string {
	t.Helper()
	dir := t.TempDir()
	for name, p := range entries {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := Write(filepath.Join(dir, name, "profile.yaml"), p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not an entry\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCatalogueFind(t *testing.T) {
	epyc := sample() // n[0-9][0-9] and login*, AMD EPYC 9654, 192 cores
	vm := sample()
	vm.Scope = Scope{Hosts: []string{"vm"}, CPUModel: "AMD EPYC", Cores: 2}
	xeon := sample()
	xeon.Scope = Scope{Hosts: []string{"vm"}, CPUModel: "Intel(R) Xeon(R) Processor", Cores: 16}
	gpu := sample()
	gpu.Scope = xeon.Scope
	gpu.GPU = &GPU{GPUs: "0,1", IPCThreshold: 4096, Staging: "async", PinnedThreshold: 1 << 20, Allocator: "pool"}
	dir := catalogueOf(t, map[string]*Profile{"epyc-192": epyc, "vm": vm, "cpu-h200": xeon, "gpu-h200": gpu})

	entries, err := Catalogue(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name)
	}
	if want := []string{"cpu-h200", "epyc-192", "gpu-h200", "vm"}; !slices.Equal(names, want) {
		t.Fatalf("entries %v, want %v", names, want)
	}
	for _, tc := range []struct {
		name  string
		host  Host
		found []string
		why   string // in the reasons of the first entry not found
	}{
		{"the dev VM", Host{"vm", "AMD EPYC", 2}, []string{"vm"}, `CPU model "AMD EPYC" is not scope.cpu_model`},
		{"the device machine: its host sweep, then its GPU sweep", Host{"vm", "Intel(R) Xeon(R) Processor", 16}, []string{"cpu-h200", "gpu-h200"}, ""},
		{"a node of the EPYC cluster", Host{"n07", "AMD EPYC 9654 96-Core Processor", 192}, []string{"epyc-192"}, `host "n07" matches none of scope.hosts [vm]`},
		{"same CPU, other core count", Host{"n07", "AMD EPYC 9654 96-Core Processor", 96}, nil, "96 cores, scope.cores is 192"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			found, why := Find(entries, tc.host)
			var got []string
			for _, e := range found {
				got = append(got, e.Name)
			}
			if !slices.Equal(got, tc.found) {
				t.Fatalf("found %v, want %v (why not: %q)", got, tc.found, why)
			}
			if len(why)+len(found) != len(entries) {
				t.Fatalf("%d found and %d reasons for %d entries", len(found), len(why), len(entries))
			}
			if tc.why != "" && !strings.Contains(strings.Join(why, "\n"), tc.why) {
				t.Fatalf("reasons %q do not say %q", why, tc.why)
			}
		})
	}
}

func TestCatalogueBrokenEntryNamed(t *testing.T) {
	dir := catalogueOf(t, map[string]*Profile{"vm": sample()})
	if err := os.MkdirAll(filepath.Join(dir, "bad"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad", "profile.yaml"), []byte("version: 1\nscope: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Catalogue(dir); err == nil || !strings.Contains(err.Error(), "catalogue entry bad") {
		t.Fatalf("Catalogue with a broken entry: %v, want an error naming it", err)
	}
	if _, err := Catalogue(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Catalogue of a missing folder: %v", err)
	}
}

func TestCatalogueDir(t *testing.T) {
	t.Setenv(CatalogueEnv, "")
	if d := CatalogueDir(); d != DefaultCatalogue {
		t.Fatalf("CatalogueDir() = %q, want %q", d, DefaultCatalogue)
	}
	t.Setenv(CatalogueEnv, "/srv/profiles")
	if d := CatalogueDir(); d != "/srv/profiles" {
		t.Fatalf("CatalogueDir() = %q with %s set", d, CatalogueEnv)
	}
}

// The checked-in catalogue loads, and each machine it was measured on
// finds its own entry: the development VM, the 1 x H200 device machine's
// CPUs, and the 2 x H200 one (a GPU sweep). Every machine here is named
// "vm", so the CPU model and core count tell them apart.
func TestCheckedInCatalogue(t *testing.T) {
	entries, err := Catalogue(filepath.Join(testutil.ModuleRoot(t), DefaultCatalogue))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host Host
		want string
	}{
		{Host{"vm", "Intel(R) Xeon(R) Processor", 2}, "vm"},
		{Host{"vm", "Intel(R) Xeon(R) Processor", 16}, "cpu-h200"},
		{Host{"vm", "Intel(R) Xeon(R) Processor", 32}, "gpu-h200x2"},
	} {
		found, why := Find(entries, tc.host)
		if len(found) != 1 || found[0].Name != tc.want {
			t.Errorf("%+v: found %v, want %s alone (why not: %q)", tc.host, found, tc.want, why)
		}
	}
}

// entryFiles are the files a catalogue entry holds: a sweep's run
// directory, its store compressed (gotune reads it so), without the
// .bench view gotune tune --bench writes again; true where required.
var entryFiles = map[string]bool{
	"profile.yaml": true, "meta.json": true, "summary": true, "measurements.jsonl.gz": true,
	"report.png": false,
}

// drawn says whether name is what gotune report DIR writes into an entry
// (report.html and its plots): regenerated, ignored by git, not checked.
func drawn(name string) bool {
	return name == "report.html" || strings.HasSuffix(name, ".svg")
}

// catalogueMaxBytes bounds the checked-in catalogue: profiles and their
// evidence, not a notebook of experiments.
const catalogueMaxBytes = 8 << 20

// dated finds a date in a line (YYYY-MM-DD): findings and their dates
// belong in the docs, and the catalogue's README only lists entries.
var dated = regexp.MustCompile(`\b20[0-9]{2}-[0-9]{2}-[0-9]{2}\b`)

// Every checked-in catalogue entry is complete and holds only what an
// entry holds; beside the entries there is one README, without dated
// findings; the whole stays under catalogueMaxBytes.
func TestCatalogueEntriesComplete(t *testing.T) {
	dir := filepath.Join(testutil.ModuleRoot(t), DefaultCatalogue)
	subs, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	size := func(path string) {
		if fi, err := os.Stat(path); err == nil {
			total += fi.Size()
		}
	}
	for _, d := range subs {
		path := filepath.Join(dir, d.Name())
		if !d.IsDir() {
			if d.Name() != "README.md" {
				t.Errorf("%s: not an entry (a folder) nor the README", path)
				continue
			}
			size(path)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(b), "\n") {
				if dated.MatchString(line) {
					t.Errorf("%s: a dated line (findings go in docs/): %s", path, line)
				}
			}
			continue
		}
		files, err := os.ReadDir(path)
		if err != nil {
			t.Fatal(err)
		}
		have := map[string]bool{}
		for _, f := range files {
			if drawn(f.Name()) {
				continue
			}
			have[f.Name()] = true
			if _, ok := entryFiles[f.Name()]; !ok {
				t.Errorf("%s: %s is not part of an entry (%v)", path, f.Name(), slices.Sorted(maps.Keys(entryFiles)))
			}
			size(filepath.Join(path, f.Name()))
		}
		for name, required := range entryFiles {
			if required && !have[name] {
				t.Errorf("%s: no %s", path, name)
			}
		}
	}
	if total > catalogueMaxBytes {
		t.Errorf("%s holds %d bytes, more than %d", dir, total, catalogueMaxBytes)
	}
}
