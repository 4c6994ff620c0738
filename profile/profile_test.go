package profile

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// goldenProfile is testdata/profile.yaml: Encode(sample()).
const goldenProfile = "testdata/profile.yaml"

// sample is a profile as the tuner would emit it for a two-socket node.
func sample() *Profile {
	return &Profile{
		Version: FormatVersion,
		Gotune:  "0.4.0",
		Created: "2026-11-21T13:15:00Z",
		Scope: Scope{
			Hosts:    []string{"n[0-9][0-9]", "login*"},
			CPUModel: "AMD EPYC 9654 96-Core Processor",
			Cores:    192,
		},
		Fingerprint: Fingerprint{Host: "n01", CPUModel: "AMD EPYC 9654 96-Core Processor", Cores: 192, NUMANodes: 2, Kernel: "6.18.0"},
		Libraries:   map[string]string{"go": "go1.26.8", "kernel": "6.18.0", "openmpi": "4.1.4"},
		Evidence:    Evidence{Run: "20261121-131500", Measurements: "measurements.jsonl", Records: 4312, Plan: "plan.yaml"},
		Decisions: map[string]map[string]Decision{
			"intranode": {
				"host_host": {
					Ranges: []Range{
						{Min: 0, Transport: "sm", Protocol: "eager"},
						{Min: 4097, Transport: "sm", Protocol: "pipeline"},
						{Min: 1 << 20, Transport: "cma", Protocol: "rendezvous"},
					},
					EagerLimit: 4096, FragSize: 64 << 10, FragSlots: 16, FIFODepth: 64, CellSize: 4160,
					Copy: "auto", Progress: "poll",
					Footprint: "1.3 MiB per ordered pair; 8 ranks: 70 MiB",
				},
			},
		},
		Allocator: Allocator{CacheBytes: 64 << 20, Purge: "delayed", THP: true},
		Safety: []Verdict{
			{Probe: "H1", Config: "c0ffee01", Outcome: Passed},
			{Probe: "H5", Config: "c0ffee01", Outcome: Passed, Detail: "head-to-head and 7→1 flood at depth 4"},
		},
	}
}

// golden compares got with the file, or rewrites the file with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	testutil.Golden(t, path, got, *update)
}

// writeFile writes data to a file named name in a new temporary directory.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEncodeGolden(t *testing.T) {
	b, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, goldenProfile, b)
	// Encoding is a function of the content: again, and from a copy whose
	// maps were built in another order, the same bytes.
	p := sample()
	p.Libraries = map[string]string{"openmpi": "4.1.4", "kernel": "6.18.0", "go": "go1.26.8"}
	again, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, again) {
		t.Error("two encodings of one profile differ")
	}
}

func TestSeal(t *testing.T) {
	p := sample()
	if err := Seal(p); err != nil {
		t.Fatal(err)
	}
	if !hashPattern.MatchString(p.Hash) {
		t.Fatalf("hash %q", p.Hash)
	}
	first := p.Hash
	if err := Seal(p); err != nil || p.Hash != first {
		t.Errorf("resealing changed the hash: %s → %s (%v)", first, p.Hash, err)
	}
	p.Allocator.THP = false
	if err := Seal(p); err != nil || p.Hash == first {
		t.Errorf("a changed profile kept its hash %s (%v)", p.Hash, err)
	}
	// The hash is the last key, so a file cut short loses it.
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if last := lines[len(lines)-1]; last != "hash: "+p.Hash {
		t.Errorf("last line %q, want the hash", last)
	}
}

func TestRoundTrip(t *testing.T) {
	for name, mutate := range map[string]func(*Profile){
		"sample":    func(*Profile) {},
		"no safety": func(p *Profile) { p.Safety = nil },
		"empty strings": func(p *Profile) {
			p.Gotune, p.Created, p.Scope.CPUModel, p.Decisions["intranode"][HostHost] = "", "", "", withProgress(p, "")
		},
		"awkward strings": func(p *Profile) { p.Gotune, p.Fingerprint.Host = "1.0", "yes"; p.Libraries["ucx"] = "null" },
		"two localities": func(p *Profile) {
			p.Decisions["internode"] = map[string]Decision{HostHost: {
				Ranges:     []Range{{Min: 0, Transport: "tcp", Protocol: "eager"}, {Min: 65537, Transport: "tcp", Protocol: "rendezvous"}},
				EagerLimit: 65536, Options: map[string]string{"eager": "64K", "conns": "2"},
				Footprint: "no registered memory; 2 socket(s) per peer",
			}}
		},
		"numeric map keys": func(p *Profile) { p.Libraries["0"] = "x" },
		"long, multi-line and odd strings": func(p *Profile) {
			p.Safety[0].Detail = strings.Repeat("a long detail line, ", 20) + "\nsecond line\n\tindented: yes # not a comment\n"
			p.Evidence.Plan = " leading and trailing spaces "
			p.Fingerprint.Kernel = "\x00\u2028\"'"
			p.Fingerprint.Host = "\xff\xfe not UTF-8"
		},
		"keys that look like other things": func(p *Profile) {
			for _, k := range []string{"null", "true", "y", "0x1f", "1_0", "1e3", "2026-11-21", "0o7", "inf", "nan"} {
				p.Libraries[k] = k
			}
		},
		"int64 cache bytes": func(p *Profile) { p.Allocator.CacheBytes = 1 << 40 },
		"a parking delay": func(p *Profile) {
			d := p.Decisions["intranode"][HostHost]
			d.Park, d.FIFODepthRanks = "500us", 16
			p.Decisions["intranode"][HostHost] = d
		},
		"no parking delay": func(p *Profile) {
			d := p.Decisions["intranode"][HostHost]
			d.Park = "0s"
			p.Decisions["intranode"][HostHost] = d
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := sample()
			mutate(p)
			got := roundTrip(t, p)
			if !reflect.DeepEqual(got, p) {
				t.Errorf("loaded\n%#v\nwrote\n%#v", got, p)
			}
		})
	}
}

// roundTrip writes p to a new file and loads it back, its path checked
// and then cleared so that it compares with p.
func roundTrip(t *testing.T, p *Profile) *Profile {
	t.Helper()
	path := filepath.Join(t.TempDir(), "profile.yaml")
	if err := Write(path, p); err != nil {
		t.Fatal(err)
	}
	got, err := LoadEnv(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Path() != path {
		t.Errorf("Path() = %q, want %q", got.Path(), path)
	}
	got.path = ""
	return got
}

func withProgress(p *Profile, progress string) Decision {
	d := p.Decisions["intranode"][HostHost]
	d.Progress = progress
	return d
}

func TestWriteRefusesInvalid(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "profile.yaml")
	p := sample()
	p.Allocator.Purge = "sometimes"
	err := Write(path, p)
	if err == nil || !strings.Contains(err.Error(), "allocator.purge") || !strings.Contains(err.Error(), path) {
		t.Fatalf("Write(invalid) = %v, want an error naming allocator.purge and %s", err, path)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left %d files behind", len(entries))
	}
}

func TestWriteReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "profile.yaml")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, sample()); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("%d files in the directory, want only the profile (no temporary left)", len(entries))
	}
	want, _ := os.ReadFile(goldenProfile)
	if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
		t.Errorf("wrote\n%s\nwant %s", got, goldenProfile)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v (%v), want 0644", fi.Mode(), err)
	}
}

func TestRoute(t *testing.T) {
	p := sample()
	cases := []struct {
		size                int
		transport, protocol string
	}{
		{0, "sm", "eager"}, {1, "sm", "eager"}, {4096, "sm", "eager"},
		{4097, "sm", "pipeline"}, {1<<20 - 1, "sm", "pipeline"},
		{1 << 20, "cma", "rendezvous"}, {1 << 40, "cma", "rendezvous"},
	}
	for _, c := range cases {
		r, err := p.Route("intranode", "host_host", c.size)
		if err != nil || r.Transport != c.transport || r.Protocol != c.protocol {
			t.Errorf("Route(%d) = %+v, %v; want %s %s", c.size, r, err, c.transport, c.protocol)
		}
	}
	for _, c := range []struct {
		locality, pair string
		size           int
		want           string
	}{
		{"internode", "host_host", 8, "decisions.internode.host_host"},
		{"intranode", "host_device", 8, "decisions.intranode.host_device"},
		{"intranode", "host_host", -1, "negative"},
	} {
		if _, err := p.Route(c.locality, c.pair, c.size); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Route(%s, %s, %d) = %v, want an error with %q", c.locality, c.pair, c.size, err, c.want)
		}
	}
}

// Two profiles send a size alike only on the same range under the same
// channel settings; where a range begins, or what the footprint says, does
// not change how a size inside both is sent.
func TestSendsAlike(t *testing.T) {
	change := func(f func(d *Decision)) *Profile {
		p := sample()
		d := p.Decisions["intranode"]["host_host"]
		d.Ranges = slices.Clone(d.Ranges)
		f(&d)
		p.Decisions["intranode"]["host_host"] = d
		return p
	}
	cmaFrom256K := change(func(d *Decision) { d.Ranges[2].Min = 256 << 10 })
	for _, tc := range []struct {
		name  string
		other *Profile
		size  int
		alike bool
	}{
		{"itself", sample(), 8, true},
		{"cma from 256K, at 64K", cmaFrom256K, 64 << 10, true},
		{"cma from 256K, at 512K", cmaFrom256K, 512 << 10, false},
		{"cma from 256K, at 4M", cmaFrom256K, 4 << 20, true},
		{"another footprint line", change(func(d *Decision) { d.Footprint = "x" }), 8, true},
		{"poll spelled empty", change(func(d *Decision) { d.Progress = "" }), 8, true},
		{"the progress thread", change(func(d *Decision) { d.Progress = "thread" }), 8, false},
		{"another parking delay", change(func(d *Decision) { d.Park = "0s" }), 8, false},
		{"another eager limit, above both", change(func(d *Decision) { d.EagerLimit = 2048 }), 8, false},
		{"another depth", change(func(d *Decision) { d.FIFODepth = 128 }), 8, false},
		{"push, in the cma range", change(func(d *Decision) { d.Ranges[2].Mode = "push" }), 4 << 20, false},
		{"no such decision", &Profile{}, 8, false},
	} {
		if got := sample().SendsAlike(tc.other, "intranode", "host_host", tc.size); got != tc.alike {
			t.Errorf("%s: SendsAlike at %d = %v, want %v", tc.name, tc.size, got, tc.alike)
		}
	}
}

func TestApplies(t *testing.T) {
	p := sample()
	const cpu = "AMD EPYC 9654 96-Core Processor"
	cases := []struct {
		host, cpu string
		cores     int
		want      string // "" applies; else in the reason
	}{
		{"n01", cpu, 192, ""},
		{"login2", cpu, 192, ""},
		{"n1", cpu, 192, `host "n1" matches none of scope.hosts`},
		{"gpu01", cpu, 192, "scope.hosts"},
		{"n01", "Intel Xeon", 192, "scope.cpu_model"},
		{"n01", cpu, 96, "scope.cores"},
	}
	for _, c := range cases {
		err := p.Applies(c.host, c.cpu, c.cores)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("Applies(%s, %s, %d) = %v, want nil", c.host, c.cpu, c.cores, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("Applies(%s, %s, %d) = %v, want a reason with %q", c.host, c.cpu, c.cores, err, c.want)
		}
	}
	// No CPU model or core count in the scope: any.
	p.Scope.CPUModel, p.Scope.Cores = "", 0
	if err := p.Applies("n01", "Intel Xeon", 8); err != nil {
		t.Errorf("unrestricted scope: %v", err)
	}
}
