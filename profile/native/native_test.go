package native

import (
	"flag"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/profile"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// tuned is a valid profile with decisions for every stack, as a sweep with
// --stack openmpi,mpich,ucx,mimalloc would emit it.
func tuned() *profile.Profile {
	return &profile.Profile{
		Version:     profile.FormatVersion,
		Gotune:      "0.5.0",
		Created:     "2026-11-27T10:00:00Z",
		Scope:       profile.Scope{Hosts: []string{"vm"}},
		Fingerprint: profile.Fingerprint{Host: "vm", CPUModel: "AMD EPYC 7B13", Cores: 2, NUMANodes: 1, Kernel: "6.1.0"},
		Evidence:    profile.Evidence{Run: "20261127-100000", Measurements: "measurements.jsonl", Records: 640, Plan: "quick"},
		Decisions: map[string]map[string]profile.Decision{profile.Intranode: {profile.HostHost: {
			Ranges:     []profile.Range{{Min: 0, Transport: "sm", Protocol: "eager"}, {Min: 4097, Transport: "sm", Protocol: "pipeline"}},
			EagerLimit: 4096, FragSize: 64 << 10, FragSlots: 16, FIFODepth: 64, CellSize: 4160, Copy: "auto",
		}}},
		Allocator: profile.Allocator{CacheBytes: 64 << 20, Purge: "delayed"},
		Stacks: map[string]profile.Stack{
			"openmpi": {Version: "4.1.4",
				Params: map[string]string{"btl_vader_eager_limit": "32768", "btl_vader_single_copy_mechanism": "none", "btl_vader_max_send_size": "65536"},
				Evidence: map[string]string{
					"btl_vader_eager_limit":           "latency 256-16K geomean 1.08x over the default 4K (8 interleaved rounds, U test settled at 5 of 7 sizes)",
					"btl_vader_single_copy_mechanism": "bw 4K-16M geomean 1.42x over the default 'cma' (8 interleaved rounds, U test settled at 11 of 13 sizes)",
				}},
			"mpich": {Version: "4.0.2",
				Params:   map[string]string{"ch4_cma_enable": "0", "ch4_ipc_cma_p2p_threshold": "65536"},
				Evidence: map[string]string{"ch4_cma_enable": "bw 4K-16M geomean 1.21x over CMA on (8 rounds)"}},
			"ucx": {Version: "1.13.1",
				Params:   map[string]string{"tls": "sm,self", "rndv_thresh": "64K", "zcopy_thresh": "auto"},
				Evidence: map[string]string{"rndv_thresh": "ucx_perftest tag_bw 8K-4M geomean 1.12x over the default auto; default best at 16K"}},
			"nccl": {Version: "2.28.9",
				Params:   map[string]string{"buffsize": "8388608", "p2p_nvl_chunksize": "1048576", "ll128_buffsize": "9830400", "nvls_enable": "0"},
				Evidence: map[string]string{"buffsize": "sendrecv 64K-256M geomean 1.31x over the default 4 MiB (6 interleaved rounds, one process each)"}},
			"mimalloc": {Version: "2.0.9",
				Params:   map[string]string{"decommit_delay": "250", "large_os_pages": "0"},
				Evidence: map[string]string{"decommit_delay": "alloc 4K-16M geomean 1.19x over the default 25 ms"}},
		},
		Safety: []profile.Verdict{{Probe: "H5", Config: "c0ffee01", Outcome: profile.Passed}},
	}
}

func TestRenderGolden(t *testing.T) {
	cases := []struct {
		name, stack string
		mutate      func(*profile.Profile)
	}{
		{"openmpi", "openmpi", nil},
		{"mpich", "mpich", nil},
		{"ucx", "ucx", nil},
		{"mimalloc", "mimalloc", nil},
		{"nccl", "nccl", nil},
		{"mvapich2", "mvapich2", nil},
		{"mvapich2-from-mpich", "mvapich2", func(p *profile.Profile) { delete(p.Stacks, "openmpi") }},
		{"mvapich2-xpmem", "mvapich2", func(p *profile.Profile) {
			p.Stacks["openmpi"].Params["btl_vader_single_copy_mechanism"] = "xpmem"
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := tuned()
			if c.mutate != nil {
				c.mutate(p)
			}
			b, err := Render(c.stack, p)
			if err != nil {
				t.Fatal(err)
			}
			name, err := FileName(c.stack)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), "# "+name+": ") {
				t.Errorf("the file does not open with its name %s", name)
			}
			testutil.Golden(t, filepath.Join("testdata", c.name+".golden"), b, *update)
		})
	}
}

// valueLine is what every line that is not a comment looks like, by stack.
var valueLine = map[string]*regexp.Regexp{
	"openmpi":  regexp.MustCompile(`^[a-z0-9_]+ = \S(.*\S)?$`),
	"mpich":    regexp.MustCompile(`^MPIR_CVAR_[A-Z0-9_]+=\S+$`),
	"ucx":      regexp.MustCompile(`^UCX_[A-Z0-9_]+=\S+$`),
	"mimalloc": regexp.MustCompile(`^MIMALLOC_[A-Z0-9_]+=\S+$`),
	"nccl":     regexp.MustCompile(`^NCCL_[A-Z0-9_]+=\S+$`),
	"mvapich2": regexp.MustCompile(`^MV2_[A-Z0-9_]+ = \S+$`),
}

// Every line is a comment or one value, each parameter exactly once, and
// comments stay within the wrap width.
func TestRenderLines(t *testing.T) {
	p := tuned()
	for _, stack := range Stacks {
		b, err := Render(stack, p)
		if err != nil {
			t.Fatal(err)
		}
		values := 0
		for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			switch {
			case strings.HasPrefix(l, "#"):
				if len(l) > width {
					t.Errorf("%s: comment of %d bytes: %q", stack, len(l), l)
				}
			case valueLine[stack].MatchString(l):
				values++
			default:
				t.Errorf("%s: line %q is neither a comment nor a value line", stack, l)
			}
		}
		want := len(p.Stacks[stack].Params)
		if stack == "mvapich2" {
			want = len(mv2Mappings)
		}
		if values != want {
			t.Errorf("%s: %d value lines, want %d", stack, values, want)
		}
	}
}

func TestRenderErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "profile.yaml")
	only := tuned()
	only.Stacks = map[string]profile.Stack{"ucx": only.Stacks["ucx"]}
	if err := profile.Write(path, only); err != nil {
		t.Fatal(err)
	}
	loaded, err := profile.LoadEnv(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	none := tuned()
	none.Stacks = nil
	cases := []struct {
		name, stack string
		p           *profile.Profile
		mutate      func(*profile.Profile)
		want        string
	}{
		{"unknown stack", "rccl", tuned(), nil, `unknown stack "rccl": gotune renders openmpi, mpich, ucx, mimalloc, nccl, mvapich2`},
		{"a stack the profile lacks", "openmpi", loaded, nil,
			"rendering openmpi for profile " + path + ": the profile has no stacks.openmpi section (it has stacks ucx)"},
		{"no stacks at all", "mimalloc", none, nil, "the profile has no stacks.mimalloc section (it has no stacks section)"},
		{"mvapich2 from neither", "mvapich2", loaded, nil,
			"rendering mvapich2 for profile " + path + ": it derives from stacks.openmpi or stacks.mpich, and the profile has stacks ucx"},
		{"invalid profile", "ucx", tuned(), func(p *profile.Profile) { p.Stacks["ucx"] = profile.Stack{Params: map[string]string{"tls": "sm"}} },
			"stacks.ucx.version: empty"},
		{"trailing blank", "openmpi", tuned(), func(p *profile.Profile) { p.Stacks["openmpi"].Params["btl_vader_eager_limit"] = "4096 " },
			`stacks.openmpi.params.btl_vader_eager_limit: "4096 " has leading or trailing blanks`},
		{"UCX inline comment", "ucx", tuned(), func(p *profile.Profile) { p.Stacks["ucx"].Params["tls"] = "sm ;self" },
			`stacks.ucx.params.tls: "sm ;self" holds " ;"`},
		{"UCX long line", "ucx", tuned(), func(p *profile.Profile) { p.Stacks["ucx"].Params["tls"] = strings.Repeat("x", 200) },
			"UCX_TLS is 208 bytes, longer than the 198"},
		{"NCCL blank", "nccl", tuned(), func(p *profile.Profile) { p.Stacks["nccl"].Params["proto"] = " LL" },
			`stacks.nccl.params.proto: " LL": empty or with leading or trailing blanks`},
		{"NCCL LL128 off its steps", "nccl", tuned(), func(p *profile.Profile) { p.Stacks["nccl"].Params["ll128_buffsize"] = "131072" },
			"NCCL_LL128_BUFFSIZE=131072: not NCCL's 4915200 bytes times a power of two"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.mutate != nil {
				c.mutate(c.p)
			}
			b, err := Render(c.stack, c.p)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Render = %q, %v\nwant an error with %q", b, err, c.want)
			}
		})
	}
	if _, err := FileName("rccl"); err == nil || !strings.Contains(err.Error(), `"rccl"`) {
		t.Errorf("FileName(rccl) = %v", err)
	}
}

func TestAvailable(t *testing.T) {
	p := tuned()
	if got := Available(p); !slices.Equal(got, Stacks) {
		t.Errorf("every stack: %v", got)
	}
	p.Stacks = map[string]profile.Stack{"mpich": p.Stacks["mpich"], "ucx": p.Stacks["ucx"]}
	if got, want := Available(p), []string{"mpich", "ucx", "mvapich2"}; !slices.Equal(got, want) {
		t.Errorf("Available = %v, want %v", got, want)
	}
	p.Stacks = map[string]profile.Stack{"mimalloc": p.Stacks["ucx"]}
	if got, want := Available(p), []string{"mimalloc"}; !slices.Equal(got, want) {
		t.Errorf("Available = %v, want %v", got, want)
	}
}

// A file rendered from an overridden profile says so, and evidence with
// line breaks stays inside its comment.
func TestRenderOverridesAndBreaks(t *testing.T) {
	p := tuned()
	p.Hash = "sha256:" + strings.Repeat("ab", 32)
	p.Overrides = []string{"GOTUNE_STACKS_MPICH_PARAMS_CH4_CMA_ENABLE=1"}
	p.Stacks["mpich"].Evidence["ch4_cma_enable"] = "first line\nMPIR_CVAR_EVIL=1"
	b, err := Render("mpich", p)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"# Profile sha256:abab", "GOTUNE_STACKS_MPICH_PARAMS_CH4_CMA_ENABLE=1", "# ch4_cma_enable: first line MPIR_CVAR_EVIL=1\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("file\n%s\nlacks %q", s, want)
		}
	}
	if strings.Contains(s, "\nMPIR_CVAR_EVIL") {
		t.Error("evidence escaped its comment")
	}
}

func TestEnvLineQuotes(t *testing.T) {
	for value, want := range map[string]string{
		"65536":      "X=65536",
		"sm,self":    "X=sm,self",
		"":           "X=''",
		"a b":        "X='a b'",
		"it's":       `X='it'\''s'`,
		"$HOME;rm":   "X='$HOME;rm'",
		"/usr/lib/x": "X=/usr/lib/x",
	} {
		got, err := envLine("X", value)
		if err != nil || got != want {
			t.Errorf("envLine(%q) = %q, %v; want %q", value, got, err, want)
		}
	}
}

func TestWrap(t *testing.T) {
	for _, c := range []struct {
		text string
		n    int
		want []string
	}{
		{"", 10, []string{""}},
		{"one two three", 20, []string{"one two three"}},
		{"one two three four", 12, []string{"one two", "three four"}},
		{"abcdefghijklmnop", 5, []string{"abcde", "fghij", "klmno", "p"}},
	} {
		if got := wrap(c.text, c.n); !slices.Equal(got, c.want) {
			t.Errorf("wrap(%q, %d) = %q, want %q", c.text, c.n, got, c.want)
		}
	}
}

// The package imports package profile and the standard library only, so
// that anything may render a profile's files.
func TestImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range ast.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if strings.Contains(path, ".") && path != "github.com/gotune/gotune/profile" {
				t.Errorf("%s imports %s", f, path)
			}
		}
	}
}
