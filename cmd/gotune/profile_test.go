package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gotune/gotune/profile"
)

// writeProfile writes a valid profile, changed by mutate, to dir/name.
func writeProfile(t *testing.T, dir, name string, mutate func(*profile.Profile)) string {
	t.Helper()
	p := &profile.Profile{
		Version: profile.FormatVersion,
		Gotune:  "test",
		Created: "2026-11-21T13:15:00Z",
		Scope:   profile.Scope{Hosts: []string{"*"}},
		Decisions: map[string]map[string]profile.Decision{profile.Intranode: {profile.HostHost: {
			Ranges: []profile.Range{
				{Min: 0, Transport: "sm", Protocol: "eager"},
				{Min: 4097, Transport: "sm", Protocol: "pipeline"},
				{Min: 1 << 20, Transport: "cma", Protocol: "rendezvous"},
			},
			EagerLimit: 4096, FragSize: 64 << 10, FragSlots: 16, FIFODepth: 64, CellSize: 4160, Copy: "auto",
		}}},
		Allocator: profile.Allocator{CacheBytes: 64 << 20, Purge: "delayed"},
		Safety:    []profile.Verdict{{Probe: "H5", Config: "c0ffee01", Outcome: "passed"}},
	}
	mutate(p)
	path := filepath.Join(dir, name)
	if err := profile.Write(path, p); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestProfileValidate(t *testing.T) {
	dir := t.TempDir()
	good := writeProfile(t, dir, "good.yaml", func(*profile.Profile) {})
	out, errOut, code := run(t, "profile", "validate", good)
	if code != 0 || !regexp.MustCompile(`^`+regexp.QuoteMeta(good)+`: ok \(sha256:[0-9a-f]{64}\)\n$`).MatchString(out) {
		t.Fatalf("validate good: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(string(b), "eager_limit: 4096", "eager_limit: 4k", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = run(t, "profile", "validate", bad, good)
	if code != 1 {
		t.Errorf("validate bad good: exit %d, want 1", code)
	}
	if !strings.HasPrefix(out, good+": ok") || strings.Contains(out, bad) {
		t.Errorf("stdout %q: want only the good file ok", out)
	}
	for _, want := range []string{
		bad + `: decisions.intranode.host_host.eager_limit: expected int, got string "4k"`,
		"gotune: 1 of 2 profiles invalid",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr\n%s\ndoes not say %q", errOut, want)
		}
	}
}

func TestProfileValidateAppliesEnvironment(t *testing.T) {
	good := writeProfile(t, t.TempDir(), "good.yaml", func(*profile.Profile) {})
	t.Setenv("GOTUNE_ALLOCATOR_PURGE", "never")
	if out, errOut, code := run(t, "profile", "validate", good); code != 0 || !strings.Contains(out, "; with GOTUNE_ALLOCATOR_PURGE=never)") {
		t.Errorf("exit %d, stdout %q, stderr %q: want the override noted", code, out, errOut)
	}
	t.Setenv("GOTUNE_ALLOCATOR_PURGE", "sometimes")
	if _, errOut, code := run(t, "profile", "validate", good); code != 1 || !strings.Contains(errOut, "GOTUNE_ALLOCATOR_PURGE") {
		t.Errorf("invalid override: exit %d, stderr %q", code, errOut)
	}
}

func TestProfileShow(t *testing.T) {
	path := writeProfile(t, t.TempDir(), "p.yaml", func(*profile.Profile) {})
	out, errOut, code := run(t, "profile", "show", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"profile    " + path + "\n", "intranode host_host\n", "│ 4K+1–1M-1 │ sm        │ pipeline   │", "allocator  cache 64M, purge delayed, THP off"} {
		if !strings.Contains(out, want) {
			t.Errorf("show output\n%s\nlacks %q", out, want)
		}
	}
}

func TestProfileDiff(t *testing.T) {
	dir := t.TempDir()
	a := writeProfile(t, dir, "a.yaml", func(*profile.Profile) {})
	same := writeProfile(t, dir, "same.yaml", func(*profile.Profile) {})
	b := writeProfile(t, dir, "b.yaml", func(p *profile.Profile) {
		d := p.Decisions[profile.Intranode][profile.HostHost]
		d.EagerLimit = 8192
		p.Decisions[profile.Intranode][profile.HostHost] = d
	})
	cases := []struct {
		args []string
		code int
		out  string // in stdout
		err  string // in stderr
	}{
		{[]string{a, same}, 0, "agreement: 35 of 35 decisions (100.0%)\n", ""},
		{[]string{a, b}, 1, "decisions.intranode.host_host.eager_limit: 4096 → 8192\nagreement: 35 of 35", "profiles differ"},
		{[]string{a, filepath.Join(dir, "missing.yaml")}, 2, "", "missing.yaml"},
		{[]string{a}, 2, "", "accepts 2 arg(s)"},
	}
	for _, c := range cases {
		out, errOut, code := run(t, append([]string{"profile", "diff"}, c.args...)...)
		if code != c.code || !strings.Contains(out, c.out) || !strings.Contains(errOut, c.err) {
			t.Errorf("diff %v: exit %d, stdout %q, stderr %q; want exit %d, %q, %q", c.args, code, out, errOut, c.code, c.out, c.err)
		}
	}
}

func TestProfileRender(t *testing.T) {
	dir := t.TempDir()
	path := writeProfile(t, dir, "profile.yaml", func(p *profile.Profile) {
		p.Stacks = map[string]profile.Stack{
			"openmpi": {Version: "4.1.4", Params: map[string]string{"btl_vader_single_copy_mechanism": "none"},
				Evidence: map[string]string{"btl_vader_single_copy_mechanism": "bw 4K-16M geomean 1.42x over cma"}},
			"ucx": {Version: "1.13.1", Params: map[string]string{"rndv_thresh": "64K"}},
		}
	})
	hash := func(path string) string {
		p, err := profile.LoadEnv(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p.Hash
	}(path)
	native := filepath.Join(dir, "native")

	// Default directory, one stack.
	out, errOut, code := run(t, "profile", "render", "--stack", "openmpi", path)
	if code != 0 || out != "openmpi: "+filepath.Join(native, "openmpi-mca-params.conf")+"\n" {
		t.Fatalf("render openmpi: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	b, err := os.ReadFile(filepath.Join(native, "openmpi-mca-params.conf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Profile " + hash + ".\n", "# btl_vader_single_copy_mechanism: bw 4K-16M geomean 1.42x over cma\nbtl_vader_single_copy_mechanism = none\n"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("openmpi-mca-params.conf\n%s\nlacks %q", b, want)
		}
	}

	// all: every stack the profile has, mvapich2 derived; into -o DIR, with
	// no temporary file left.
	outDir := filepath.Join(dir, "out")
	out, errOut, code = run(t, "profile", "render", "--stack", "all", "-o", outDir, path)
	if code != 0 {
		t.Fatalf("render all: exit %d, stderr %q", code, errOut)
	}
	entries, err := os.ReadDir(outDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "mvapich2.conf openmpi-mca-params.conf ucx.conf" {
		t.Errorf("render all wrote %s (stdout %q)", got, out)
	}

	// Several stacks to stdout, in the order given, each once.
	out, errOut, code = run(t, "profile", "render", "--stack", "ucx,openmpi", "--stack", "ucx", "-o", "-", path)
	if code != 0 || !strings.HasPrefix(out, "# ucx.conf: ") || !strings.Contains(out, "\nUCX_RNDV_THRESH=64K\n# openmpi-mca-params.conf: ") {
		t.Errorf("render to stdout: exit %d, stderr %q, stdout\n%s", code, errOut, out)
	}
	if strings.Count(out, "# ucx.conf: ") != 1 {
		t.Errorf("ucx rendered %d times", strings.Count(out, "# ucx.conf: "))
	}

	// Errors name the stack and the profile.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--stack", "mpich", path}, "rendering mpich for profile " + path + ": the profile has no stacks.mpich section (it has stacks openmpi, ucx)"},
		{[]string{"--stack", "rccl", path}, `--stack: unknown stack "rccl"`},
		{[]string{path}, `required flag(s) "stack" not set`},
		{[]string{"--stack", "all", writeProfile(t, dir, "plain.yaml", func(*profile.Profile) {})}, "has no stacks section"},
	} {
		_, errOut, code := run(t, append([]string{"profile", "render"}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("render %v: exit %d, stderr %q; want %q", c.args, code, errOut, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "native", "mpich.env")); err == nil {
		t.Error("a failed render wrote a file")
	}
}

// profile find prints the entry whose scope matches this host and says
// why the others do not; bench --transport auto without --profile routes
// by that entry and says which; with no match both say how to make one.
func TestProfileFindAndAutoFromTheCatalogue(t *testing.T) {
	dir := t.TempDir()
	for name, hosts := range map[string][]string{"here": {"*"}, "elsewhere": {"no-such-host-*"}} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		writeProfile(t, filepath.Join(dir, name), "profile.yaml", func(p *profile.Profile) { p.Scope.Hosts = hosts })
	}
	t.Setenv(profile.CatalogueEnv, dir)
	out, errOut, code := run(t, "profile", "find")
	if want := filepath.Join(dir, "here", "profile.yaml") + "\n"; code != 0 || out != want {
		t.Fatalf("profile find: exit %d, stdout %q, want %q; stderr %s", code, out, want, errOut)
	}
	if !strings.Contains(errOut, "no match: elsewhere: host") {
		t.Fatalf("profile find does not say why the other entry does not match:\n%s", errOut)
	}
	out, errOut, code = run(t, "bench", "--transport", "auto", "--pattern", "bw", "--sizes", "8K", "--reps", "2", "--iters", "20", "--warmup", "2", "--format", "csv", "-q")
	if code != 0 || !strings.Contains(out, "auto,bw,8192,") || !strings.Contains(errOut, "the catalogue's entry here for this host") {
		t.Fatalf("bench --transport auto without --profile: exit %d\n%s\n%s", code, out, errOut)
	}

	if err := os.RemoveAll(filepath.Join(dir, "here")); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = run(t, "profile", "find")
	if code != 1 || !strings.Contains(errOut, "no profile in the catalogue") || !strings.Contains(errOut, "make sweep") {
		t.Fatalf("profile find with no match: exit %d\n%s", code, errOut)
	}
	_, errOut, code = run(t, "bench", "--transport", "auto", "--sizes", "8K")
	if code == 0 || !strings.Contains(errOut, "no profile in the catalogue") {
		t.Fatalf("bench --transport auto with no match: exit %d\n%s", code, errOut)
	}
}

// A profile whose cma ranges pull in the middle and push above it moves
// validated payloads through both (each range in its own direction).
func TestAutoCopiesEachRangeInItsDirection(t *testing.T) {
	path := writeProfile(t, t.TempDir(), "profile.yaml", func(p *profile.Profile) {
		d := p.Decisions[profile.Intranode][profile.HostHost]
		d.Ranges = []profile.Range{{Min: 0, Transport: "sm", Protocol: "eager"},
			{Min: 4097, Transport: "cma", Protocol: "rendezvous", Mode: "pull"},
			{Min: 256 << 10, Transport: "cma", Protocol: "rendezvous", Mode: "push"}}
		p.Decisions[profile.Intranode][profile.HostHost] = d
	})
	out, errOut, code := run(t, "bench", "--transport", "auto", "--profile", path, "--pattern", "bw", "--sizes", "64K,1M",
		"--reps", "2", "--iters", "8", "--warmup", "1", "--validate", "--settle", "0", "--format", "csv", "-q")
	if code != 0 || !strings.Contains(out, "auto,bw,65536,") || !strings.Contains(out, "auto,bw,1048576,") {
		t.Fatalf("bench --transport auto across a pull and a push range: exit %d\n%s\n%s", code, out, errOut)
	}
}
