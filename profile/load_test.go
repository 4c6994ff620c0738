package profile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func goldenBytes(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(goldenProfile)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edit replaces old, which must occur exactly once, with new.
func edit(t testing.TB, s, old, new string) string {
	t.Helper()
	if n := strings.Count(s, old); n != 1 {
		t.Fatalf("%q occurs %d times in the profile, want once", old, n)
	}
	return strings.Replace(s, old, new, 1)
}

// sealed is the encoding of sample() after mutate, hash and all.
func sealed(t testing.TB, mutate func(*Profile)) string {
	t.Helper()
	p := sample()
	mutate(p)
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLoadGolden(t *testing.T) {
	p, err := LoadEnv(goldenProfile, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := sample()
	if err := Seal(want); err != nil {
		t.Fatal(err)
	}
	if p.Hash != want.Hash || p.Path() != goldenProfile || p.Overrides != nil {
		t.Errorf("hash %s path %q overrides %v; want %s %q none", p.Hash, p.Path(), p.Overrides, want.Hash, goldenProfile)
	}
}

// brokenCase is a profile file that Load must refuse, with what the error
// must say besides the file's name.
type brokenCase struct {
	name string
	data func(t testing.TB, golden string) string
	want []string
}

func brokenCases() []brokenCase {
	return []brokenCase{
		{"unknown top-level key",
			func(t testing.TB, g string) string { return edit(t, g, "hash:", "colour: blue\nhash:") },
			[]string{"colour: unknown key"}},
		{"unknown key in a decision",
			func(t testing.TB, g string) string {
				return edit(t, g, "      copy: auto\n", "      copy: auto\n      kopy: go\n")
			},
			[]string{"decisions.intranode.host_host.kopy: unknown key"}},
		{"unknown key in a range",
			func(t testing.TB, g string) string {
				return edit(t, g, "          protocol: pipeline\n", "          protocol: pipeline\n          weight: 2\n")
			},
			[]string{"decisions.intranode.host_host.ranges[1].weight: unknown key"}},
		{"unknown key in a verdict",
			func(t testing.TB, g string) string {
				return edit(t, g, "  - probe: H1\n", "  - probe: H1\n    seen: 3\n")
			},
			[]string{"safety[0].seen: unknown key"}},
		{"string for an int",
			func(t testing.TB, g string) string { return edit(t, g, "eager_limit: 4096", "eager_limit: 4k") },
			[]string{`decisions.intranode.host_host.eager_limit: expected int, got string "4k"`}},
		{"quoted number for an int (no weak typing)",
			func(t testing.TB, g string) string { return edit(t, g, "eager_limit: 4096", `eager_limit: "4096"`) },
			[]string{`decisions.intranode.host_host.eager_limit: expected int, got string "4096"`}},
		{"float for an int (no truncation)",
			func(t testing.TB, g string) string { return edit(t, g, "fifo_depth: 64", "fifo_depth: 64.5") },
			[]string{"decisions.intranode.host_host.fifo_depth: expected int, got float 64.5"}},
		{"int out of range",
			func(t testing.TB, g string) string {
				return edit(t, g, "  cores: 192\n  numa", "  cores: 18446744073709551615\n  numa")
			},
			[]string{"fingerprint.cores: 18446744073709551615 is out of range"}},
		{"int in a range's min",
			func(t testing.TB, g string) string { return edit(t, g, "min: 4097", "min: 4K") },
			[]string{`decisions.intranode.host_host.ranges[1].min: expected int, got string "4K"`}},
		{"int for a string",
			func(t testing.TB, g string) string { return edit(t, g, "purge: delayed", "purge: 3") },
			[]string{"allocator.purge: expected string, got int 3"}},
		{"string for a bool",
			func(t testing.TB, g string) string { return edit(t, g, "thp: true", "thp: yes") },
			[]string{`allocator.thp: expected bool, got string "yes"`}},
		{"string for a list",
			func(t testing.TB, g string) string {
				return edit(t, g, "  hosts:\n    - n[0-9][0-9]\n    - login*\n", "  hosts: n01,n02\n")
			},
			[]string{`scope.hosts: expected a list, got string "n01,n02"`}},
		{"list for a mapping",
			func(t testing.TB, g string) string {
				return edit(t, g, "libraries:\n  go: go1.26.8\n  kernel: 6.18.0\n  openmpi: 4.1.4\n", "libraries: [go1.26.8]\n")
			},
			[]string{"libraries: expected a mapping, got a list"}},
		{"mapping for a string",
			func(t testing.TB, g string) string { return edit(t, g, "copy: auto", "copy: {routine: auto}") },
			[]string{"decisions.intranode.host_host.copy: expected string, got a mapping"}},
		{"two errors, both named",
			func(t testing.TB, g string) string {
				return edit(t, edit(t, g, "thp: true", "thp: 1"), "frag_slots: 16", "frag_slots: sixteen")
			},
			[]string{"allocator.thp: expected bool, got int 1", `decisions.intranode.host_host.frag_slots: expected int, got string "sixteen"`}},
		{"upper-case key (viper would fold it)",
			func(t testing.TB, g string) string { return edit(t, g, "copy: auto", "Copy: auto") },
			[]string{`decisions.intranode.host_host."Copy": line 43: invalid key`}},
		{"dotted map key (viper would split it)",
			func(t testing.TB, g string) string { return edit(t, g, "  openmpi: 4.1.4", "  open.mpi: 4.1.4") },
			[]string{`libraries."open.mpi": line 19: invalid key`}},
		{"duplicate key",
			func(t testing.TB, g string) string {
				return edit(t, g, "      copy: auto\n", "      copy: auto\n      copy: go\n")
			},
			[]string{"decisions.intranode.host_host.copy: line 44: duplicate key (first at line 43)"}},
		{"alias",
			func(t testing.TB, g string) string {
				return edit(t, edit(t, g, "  cpu_model: AMD EPYC 9654 96-Core Processor\n  cores: 192\nfinger", "  cpu_model: &cpu AMD EPYC 9654 96-Core Processor\n  cores: 192\nfinger"),
					"  cpu_model: AMD EPYC 9654 96-Core Processor\n  cores: 192\n  numa", "  cpu_model: *cpu\n  cores: 192\n  numa")
			},
			[]string{"fingerprint.cpu_model: line 12: alias *cpu: a profile has no anchors or aliases", "scope.cpu_model: line 8: anchor &cpu"}},
		{"second document",
			func(t testing.TB, g string) string { return g + "---\nversion: 1\n" },
			[]string{"a second YAML document at line 59"}},
		{"YAML syntax",
			func(t testing.TB, g string) string { return edit(t, g, "  purge: delayed", "  purge: [delayed") },
			[]string{"yaml: line ", "did not find expected ',' or ']'"}},
		{"empty file",
			func(t testing.TB, g string) string { return "" },
			[]string{"empty file"}},
		{"a list at the top",
			func(t testing.TB, g string) string { return "- version: 1\n" },
			[]string{"line 1: the top level is a list, not a mapping"}},
		{"truncated in the middle",
			func(t testing.TB, g string) string { return g[:strings.Index(g, "fifo_depth")] },
			[]string{"hash: missing"}},
		{"truncated in the hash",
			func(t testing.TB, g string) string { return strings.TrimSuffix(g, "\n")[:len(g)-10] },
			[]string{"hash: \"sha256:", "is not sha256:<64 hex digits>: is the file cut short?"}},
		{"missing hash",
			func(t testing.TB, g string) string { return g[:strings.Index(g, "hash:")] },
			[]string{"hash: missing"}},
		{"hash mismatch after a hand edit",
			func(t testing.TB, g string) string { return edit(t, g, "eager_limit: 4096", "eager_limit: 8192") },
			[]string{"hash: sha256:", "does not match the content"}},
		{"hand edit that keeps the hash line",
			func(t testing.TB, g string) string { return edit(t, g, "- login*", "- '*'") },
			[]string{"hash: sha256:", "does not match the content"}},
		{"wrong version",
			func(t testing.TB, g string) string { return edit(t, g, "version: 1", "version: 2\nplugins: [x]") },
			[]string{"version: format version 2; this gotune reads version 1"}},
		{"version of the wrong type",
			func(t testing.TB, g string) string { return edit(t, g, "version: 1", `version: "1"`) },
			[]string{`version: expected int, got string "1"`}},
		{"no version",
			func(t testing.TB, g string) string { return edit(t, g, "version: 1\n", "") },
			[]string{"version: missing"}},
		// Sealed, so that they pass the hash and reach Validate.
		{"first range not at 0",
			func(t testing.TB, _ string) string {
				return sealed(t, setRange(0, Range{Min: 1, Transport: "sm", Protocol: "eager"}))
			},
			[]string{"decisions.intranode.host_host.ranges[0].min: 1, the first range starts at 0"}},
		{"ranges not ascending",
			func(t testing.TB, _ string) string {
				return sealed(t, setRange(2, Range{Min: 4097, Transport: "cma", Protocol: "rendezvous"}))
			},
			[]string{"decisions.intranode.host_host.ranges[2].min: 4097, not above the previous range's 4097"}},
		{"unknown transport",
			func(t testing.TB, _ string) string {
				return sealed(t, setRange(2, Range{Min: 1 << 20, Transport: "shmem", Protocol: "rendezvous"}))
			},
			[]string{`decisions.intranode.host_host.ranges[2].transport: "shmem" is not one of sm|cma|knem|xpmem`}},
		{"rendezvous over sm",
			func(t testing.TB, _ string) string {
				return sealed(t, setRange(2, Range{Min: 1 << 20, Transport: "sm", Protocol: "rendezvous"}))
			},
			[]string{"decisions.intranode.host_host.ranges[2]: rendezvous needs a single-copy transport (cma, knem, xpmem), not sm"}},
		{"a copy direction on a pipelined range",
			func(t testing.TB, _ string) string {
				return sealed(t, setRange(1, Range{Min: 4097, Transport: "sm", Protocol: "pipeline", Mode: "push"}))
			},
			[]string{"decisions.intranode.host_host.ranges[1].mode: push on a pipeline range: a copy direction belongs to rendezvous ranges"}},
		{"an unknown copy direction",
			func(t testing.TB, _ string) string {
				return sealed(t, setRange(2, Range{Min: 1 << 20, Transport: "cma", Protocol: "rendezvous", Mode: "sideways"}))
			},
			[]string{`decisions.intranode.host_host.ranges[2].mode: "sideways" is not one of pull|push|split`}},
		{"a split that is not cma's",
			func(t testing.TB, _ string) string {
				return sealed(t, setRange(2, Range{Min: 1 << 20, Transport: "xpmem", Protocol: "rendezvous", Mode: "split"}))
			},
			[]string{"decisions.intranode.host_host.ranges[2].mode: split on a xpmem range: only cma's ranges split"}},
		{"knem copying in two directions",
			func(t testing.TB, _ string) string {
				return sealed(t, func(p *Profile) {
					setRange(1, Range{Min: 4097, Transport: "knem", Protocol: "rendezvous", Mode: "pull"})(p)
					setRange(2, Range{Min: 1 << 20, Transport: "knem", Protocol: "rendezvous", Mode: "push"})(p)
				})
			},
			[]string{"decisions.intranode.host_host.ranges[2].mode: push after pull for knem: a handle-based transport copies in one direction"}},
		{"eager beyond the eager limit",
			func(t testing.TB, _ string) string {
				return sealed(t, setRange(1, Range{Min: 4097, Transport: "sm", Protocol: "eager"}))
			},
			[]string{"decisions.intranode.host_host.ranges[1]: eager for sizes 4K+1–1M-1, beyond eager_limit 4096"}},
		{"eager limit with nothing eager",
			func(t testing.TB, _ string) string {
				return sealed(t, setRange(0, Range{Min: 0, Transport: "sm", Protocol: "pipeline"}))
			},
			[]string{"decisions.intranode.host_host.ranges[0]: pipeline for sizes 0–4K, all within eager_limit 4096: they go eager"}},
		{"no fragment slots",
			func(t testing.TB, _ string) string {
				return sealed(t, func(p *Profile) {
					d := p.Decisions["intranode"][HostHost]
					d.FragSlots = 0
					p.Decisions["intranode"][HostHost] = d
				})
			},
			[]string{"decisions.intranode.host_host.frag_slots: 0, must be at least 1"}},
		{"a verdict that did not pass",
			func(t testing.TB, _ string) string {
				return sealed(t, func(p *Profile) { p.Safety[1].Outcome = "hazard" })
			},
			[]string{`safety[1].outcome: "hazard": a profile carries only passed verdicts`}},
		{"unknown purge",
			func(t testing.TB, _ string) string { return sealed(t, func(p *Profile) { p.Allocator.Purge = "lazy" }) },
			[]string{`allocator.purge: "lazy" is not one of immediate|delayed|never`}},
	}
}

func setRange(i int, r Range) func(*Profile) {
	return func(p *Profile) {
		d := p.Decisions["intranode"][HostHost]
		d.Ranges = append([]Range(nil), d.Ranges...)
		d.Ranges[i] = r
		p.Decisions["intranode"][HostHost] = d
	}
}

func TestLoadBroken(t *testing.T) {
	g := string(goldenBytes(t))
	for _, c := range brokenCases() {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "broken.yaml", []byte(c.data(t, g)))
			p, err := LoadEnv(path, nil)
			if err == nil {
				t.Fatalf("loaded %+v", p)
			}
			msg := err.Error()
			for _, line := range strings.Split(msg, "\n") {
				if !strings.HasPrefix(line, path+": ") {
					t.Errorf("error line %q does not start with the file's name", line)
				}
			}
			// The first thing wanted starts a line, after the file's name.
			if !strings.Contains("\n"+msg, "\n"+path+": "+c.want[0]) {
				t.Errorf("error\n%s\nhas no line starting %q", msg, path+": "+c.want[0])
			}
			for _, w := range c.want[1:] {
				if !strings.Contains(msg, w) {
					t.Errorf("error\n%s\ndoes not say %q", msg, w)
				}
			}
		})
	}
}

// Every prefix of a profile, cut anywhere short of its final newline, is
// refused with an error naming the file.
func TestLoadTruncatedAnywhere(t *testing.T) {
	g := goldenBytes(t)
	for n := range len(g) - 1 {
		p, err := parse("cut.yaml", g[:n], nil)
		if err == nil {
			t.Fatalf("the first %d bytes loaded: %+v", n, p)
		}
		if !strings.HasPrefix(err.Error(), "cut.yaml: ") {
			t.Fatalf("cut at %d: error %q does not name the file", n, err)
		}
	}
	if _, err := parse("cut.yaml", g[:len(g)-1], nil); err != nil {
		t.Errorf("without its final newline: %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.yaml")
	if _, err := LoadEnv(path, nil); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Load(missing) = %v, want an error naming %s", err, path)
	}
}

// Comments, whitespace and key order are not content: the hash holds.
func TestLoadToleratesLayout(t *testing.T) {
	g := string(goldenBytes(t))
	g = edit(t, g, "allocator:\n  cache_bytes: 67108864\n  purge: delayed\n  thp: true\n",
		"# hand-tuned? no: as emitted\nallocator: {thp: true, purge: delayed,   cache_bytes: 67108864}\n")
	if _, err := parse("layout.yaml", []byte(g), nil); err != nil {
		t.Fatal(err)
	}
}

func TestEnvOverrides(t *testing.T) {
	path := writeFile(t, "profile.yaml", goldenBytes(t))
	environ := []string{
		"PATH=/usr/bin",
		"GOTUNE_RANK=3", // the launcher's, not a key
		"GOTUNE_ALLOCATOR_PURGE=never",
		"GOTUNE_DECISIONS_INTRANODE_HOST_HOST_EAGER_LIMIT=8192",
		"GOTUNE_LIBRARIES_OPENMPI=5.0.6",
		"GOTUNE_ALLOCATOR_THP=false",
		"GOTUNE_FINGERPRINT_HOST=",         // empty: ignored
		"GOTUNE_ALLOCATOR_PURGE=immediate", // the first wins
	}
	p, err := LoadEnv(path, environ)
	if err != nil {
		t.Fatal(err)
	}
	d := p.Decisions["intranode"][HostHost]
	if p.Allocator.Purge != "never" || d.EagerLimit != 8192 || p.Libraries["openmpi"] != "5.0.6" || p.Allocator.THP || p.Fingerprint.Host != "n01" {
		t.Errorf("overrides not applied: allocator %+v, eager_limit %d, openmpi %s, host %s", p.Allocator, d.EagerLimit, p.Libraries["openmpi"], p.Fingerprint.Host)
	}
	want := []string{
		"GOTUNE_ALLOCATOR_PURGE=never",
		"GOTUNE_ALLOCATOR_THP=false",
		"GOTUNE_DECISIONS_INTRANODE_HOST_HOST_EAGER_LIMIT=8192",
		"GOTUNE_LIBRARIES_OPENMPI=5.0.6",
	}
	if strings.Join(p.Overrides, " ") != strings.Join(want, " ") {
		t.Errorf("Overrides = %q, want %q", p.Overrides, want)
	}
	// The rest is the file's, hash included.
	file, err := LoadEnv(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.Hash != file.Hash || d.FragSize != file.Decisions["intranode"][HostHost].FragSize || len(d.Ranges) != 3 {
		t.Errorf("overrides changed more than their keys: %+v", p)
	}
}

// A key the file leaves out (here an empty progress) can be set too.
func TestEnvOverrideAbsentKey(t *testing.T) {
	text := sealed(t, func(p *Profile) {
		d := p.Decisions["intranode"][HostHost]
		d.Progress = ""
		p.Decisions["intranode"][HostHost] = d
	})
	text = edit(t, text, "      progress: \"\"\n", "")
	path := writeFile(t, "profile.yaml", []byte(text))
	p, err := LoadEnv(path, []string{"GOTUNE_DECISIONS_INTRANODE_HOST_HOST_PROGRESS=thread"})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Decisions["intranode"][HostHost].Progress; got != "thread" {
		t.Errorf("progress %q, want thread", got)
	}
}

func TestEnvOverrideErrors(t *testing.T) {
	path := writeFile(t, "profile.yaml", goldenBytes(t))
	cases := []struct {
		env  string
		want string
	}{
		{"GOTUNE_DECISIONS_INTRANODE_HOST_HOST_EAGER_LIMIT=8k",
			`GOTUNE_DECISIONS_INTRANODE_HOST_HOST_EAGER_LIMIT: "8k" is not an int (it overrides decisions.intranode.host_host.eager_limit)`},
		{"GOTUNE_ALLOCATOR_CACHE_BYTES=1e9", `GOTUNE_ALLOCATOR_CACHE_BYTES: "1e9" is not an int`},
		{"GOTUNE_ALLOCATOR_THP=maybe", `GOTUNE_ALLOCATOR_THP: "maybe" is not a bool (it overrides allocator.thp)`},
		// Well typed but invalid: Validate names the key and the variable.
		{"GOTUNE_ALLOCATOR_PURGE=sometimes",
			`allocator.purge: "sometimes" is not one of immediate|delayed|never (set by GOTUNE_ALLOCATOR_PURGE)`},
		{"GOTUNE_DECISIONS_INTRANODE_HOST_HOST_FIFO_DEPTH=0",
			"decisions.intranode.host_host.fifo_depth: 0, must be at least 1 (set by GOTUNE_DECISIONS_INTRANODE_HOST_HOST_FIFO_DEPTH)"},
		{"GOTUNE_DECISIONS_INTRANODE_HOST_HOST_EAGER_LIMIT=1024",
			"decisions.intranode.host_host.ranges[0]: eager for sizes 0–4K, beyond eager_limit 1024"},
	}
	for _, c := range cases {
		_, err := LoadEnv(path, []string{c.env})
		if err == nil || !strings.Contains(err.Error(), path+": "+c.want) {
			t.Errorf("%s: error %v\nwant %s: %s", c.env, err, path, c.want)
		}
	}
}

func TestLoadReadsProcessEnvironment(t *testing.T) {
	path := writeFile(t, "profile.yaml", goldenBytes(t))
	t.Setenv("GOTUNE_ALLOCATOR_PURGE", "immediate")
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if p.Allocator.Purge != "immediate" || len(p.Overrides) != 1 {
		t.Errorf("purge %q, overrides %q", p.Allocator.Purge, p.Overrides)
	}
}

func TestEnvName(t *testing.T) {
	for key, want := range map[string]string{
		"allocator.purge":                         "GOTUNE_ALLOCATOR_PURGE",
		"decisions.intranode.host_host.frag_size": "GOTUNE_DECISIONS_INTRANODE_HOST_HOST_FRAG_SIZE",
		"libraries.nccl-net":                      "GOTUNE_LIBRARIES_NCCL_NET",
	} {
		if got := EnvName(key); got != want {
			t.Errorf("EnvName(%s) = %s, want %s", key, got, want)
		}
	}
}

func TestKeyPath(t *testing.T) {
	for in, want := range map[string]string{
		"":                                     "",
		"allocator.purge":                      "allocator.purge",
		"decisions[intranode][host_host].copy": "decisions.intranode.host_host.copy",
		"decisions[0][1].ranges[2].min":        "decisions.0.1.ranges[2].min",
		"safety[3].probe":                      "safety[3].probe",
		"libraries[go]":                        "libraries.go",
		"scope.hosts[1]":                       "scope.hosts[1]",
		"decisions[intranode][host_host].ranges[": "decisions.intranode.host_host.ranges[",
	} {
		if got := keyPath(in); got != want {
			t.Errorf("keyPath(%q) = %q, want %q", in, got, want)
		}
	}
}
