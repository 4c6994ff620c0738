package profile

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// withStacks adds the decisions of two stacks: Open MPI with evidence for
// every value, UCX with none.
func withStacks(p *Profile) {
	p.Stacks = map[string]Stack{
		"openmpi": {
			Version: "4.1.4",
			Params:  map[string]string{"btl_vader_eager_limit": "32768", "btl_vader_single_copy_mechanism": "none"},
			Evidence: map[string]string{
				"btl_vader_eager_limit":           "latency 256-16K geomean 1.08x over the default 4K (8 interleaved rounds)",
				"btl_vader_single_copy_mechanism": "bw 4K-16M geomean 1.42x over the default 'cma' (8 interleaved rounds, U test settled at 11 of 13 sizes)",
			},
		},
		"ucx": {Version: "1.13.1", Params: map[string]string{"rndv_thresh": "64K", "tls": "sm,self"}},
	}
}

// A profile without stacks encodes as before: the section adds no key, so
// the golden profile and every profile of record keep their hashes.
func TestStacksKeepHashes(t *testing.T) {
	paths := []string{goldenProfile}
	root := testutil.ModuleRoot(t)
	err := filepath.WalkDir(filepath.Join(root, "results"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "profile.yaml" {
			paths = append(paths, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 2 {
		t.Fatalf("found no profile under %s/results", root)
	}
	for _, path := range paths {
		// Load checks the file's hash against the content re-encoded with
		// today's schema; the re-encoding must also be the same bytes.
		p, err := LoadEnv(path, nil)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		file, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(file), "\nhash: "+p.Hash+"\n") {
			t.Errorf("%s: loaded with hash %s, which is not the file's", path, p.Hash)
		}
		if p.Stacks != nil {
			continue // a profile of record with stacks: its hash was checked
		}
		again := *p
		b, err := Encode(&again)
		if err != nil {
			t.Fatal(err)
		}
		if again.Hash != p.Hash || strings.Contains(string(b), "stacks") {
			t.Errorf("%s: re-encoded with hash %s (file %s), or with a stacks key", path, again.Hash, p.Hash)
		}
	}
}

func TestEncodeStacksGolden(t *testing.T) {
	p := sample()
	withStacks(p)
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/profile-stacks.yaml", b)
	if _, err := LoadEnv("testdata/profile-stacks.yaml", nil); err != nil {
		t.Error(err)
	}
}

func TestStacksRoundTrip(t *testing.T) {
	for name, mutate := range map[string]func(*Profile){
		"two stacks": withStacks,
		"empty maps": func(p *Profile) {
			p.Stacks = map[string]Stack{"mimalloc": {Version: "2.0.9", Params: map[string]string{}, Evidence: map[string]string{}}}
		},
		"values that look like other things": func(p *Profile) {
			p.Stacks = map[string]Stack{"mpich": {Version: "4.0", Params: map[string]string{
				"ch4_cma_enable": "1", "a": "true", "b": "null", "c": "", "d": "1e3", "e": " x ", "f": "#", "g": "a=b"}}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := sample()
			mutate(p)
			got := roundTrip(t, p)
			normalize(p)
			if !reflect.DeepEqual(got, p) {
				t.Errorf("loaded\n%#v\nwrote\n%#v", got.Stacks, p.Stacks)
			}
		})
	}
}

func TestLoadStacksBroken(t *testing.T) {
	text := sealed(t, withStacks)
	cases := []struct {
		name, old, new string
		want           string
	}{
		{"unknown key in a stack", "    version: 1.13.1\n", "    version: 1.13.1\n    build: debian\n", "stacks.ucx.build: unknown key"},
		{"an int for a value", `rndv_thresh: 64K`, `rndv_thresh: 65536`, "stacks.ucx.params.rndv_thresh: expected string, got int 65536"},
		{"an upper-case parameter", `rndv_thresh: 64K`, `RNDV_THRESH: 64K`, `stacks.ucx.params."RNDV_THRESH": line`},
		{"a dotted parameter", `rndv_thresh: 64K`, `rndv.thresh: 64K`, `stacks.ucx.params."rndv.thresh": line`},
		{"a list for params", "    params:\n      rndv_thresh: 64K\n      tls: sm,self\n", "    params: [rndv_thresh]\n", "stacks.ucx.params: expected a mapping, got a list"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "broken.yaml", []byte(edit(t, text, c.old, c.new)))
			_, err := LoadEnv(path, nil)
			if err == nil || !strings.Contains(err.Error(), path+": "+c.want) {
				t.Errorf("error %v\nwant %s: %s", err, path, c.want)
			}
		})
	}
}

func TestValidateStacks(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(map[string]Stack)
		want   []string
	}{
		{"unknown stack", func(s map[string]Stack) { s["mvapich2"] = s["ucx"] },
			[]string{`stacks.mvapich2: unknown stack "mvapich2": gotune tunes openmpi, mpich, ucx, mimalloc`}},
		{"no version", func(s map[string]Stack) { st := s["ucx"]; st.Version = ""; s["ucx"] = st },
			[]string{"stacks.ucx.version: empty: say which version of ucx the decisions were measured on"}},
		{"evidence for no parameter", func(s map[string]Stack) {
			st := s["openmpi"]
			st.Evidence["btl_vader_fbox_size"] = "msgrate 8B 1.1x"
			s["openmpi"] = st
		}, []string{"stacks.openmpi.evidence.btl_vader_fbox_size: evidence for btl_vader_fbox_size, which is not among stacks.openmpi.params"}},
		{"parameter keys", func(s map[string]Stack) { s["ucx"].Params["UCX_TLS"] = "sm" },
			[]string{`stacks.ucx.params.UCX_TLS: invalid key "UCX_TLS"`}},
		{"a line break", func(s map[string]Stack) { s["ucx"].Params["tls"] = "sm\nUCX_TLS=all" },
			[]string{`stacks.ucx.params.tls: "sm\nUCX_TLS=all" holds a line break`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := sample()
			withStacks(p)
			c.mutate(p.Stacks)
			err := Validate(p)
			if err == nil {
				t.Fatal("valid")
			}
			for _, w := range c.want {
				if !strings.Contains("\n"+err.Error()+"\n", "\n"+w) {
					t.Errorf("error\n%v\nlacks the line %q", err, w)
				}
			}
		})
	}
}

func TestEnvOverridesStacks(t *testing.T) {
	path := writeFile(t, "profile.yaml", []byte(sealed(t, withStacks)))
	p, err := LoadEnv(path, []string{
		"GOTUNE_STACKS_OPENMPI_PARAMS_BTL_VADER_EAGER_LIMIT=65536",
		"GOTUNE_STACKS_UCX_VERSION=1.14.0",
		"GOTUNE_STACKS_UCX_PARAMS_ZCOPY_THRESH=1M", // not in the file: not a key
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Stacks["openmpi"].Params["btl_vader_eager_limit"]; got != "65536" {
		t.Errorf("eager limit %q, want the override 65536", got)
	}
	if got := p.Stacks["ucx"].Version; got != "1.14.0" {
		t.Errorf("ucx version %q, want 1.14.0", got)
	}
	if _, ok := p.Stacks["ucx"].Params["zcopy_thresh"]; ok {
		t.Error("an override added a parameter the file does not have")
	}
	if p.Stacks["openmpi"].Params["btl_vader_single_copy_mechanism"] != "none" || len(p.Stacks["openmpi"].Evidence) != 2 {
		t.Errorf("overrides changed more than their keys: %+v", p.Stacks["openmpi"])
	}
	want := "GOTUNE_STACKS_OPENMPI_PARAMS_BTL_VADER_EAGER_LIMIT=65536 GOTUNE_STACKS_UCX_VERSION=1.14.0"
	if got := strings.Join(p.Overrides, " "); got != want {
		t.Errorf("Overrides %q, want %q", got, want)
	}
}

func TestShowStacksGolden(t *testing.T) {
	p := sample()
	withStacks(p)
	var buf bytes.Buffer
	if err := Show(&buf, p); err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/show-stacks.golden", buf.Bytes())
}

func TestDiffStacks(t *testing.T) {
	a, b := sample(), sample()
	withStacks(a)
	withStacks(b)
	b.Stacks["openmpi"].Params["btl_vader_eager_limit"] = "16384"
	delete(b.Stacks, "ucx")
	b.Stacks["mimalloc"] = Stack{Version: "2.0.9", Params: map[string]string{"purge_delay": "100"}}
	var buf bytes.Buffer
	differ, err := Diff(&buf, a, b)
	if err != nil || !differ {
		t.Fatalf("Diff = %t, %v; want true", differ, err)
	}
	want := `stacks.mimalloc.version: (absent) → "2.0.9"
stacks.mimalloc.params.purge_delay: (absent) → "100"
stacks.openmpi.params.btl_vader_eager_limit: "32768" → "16384"
stacks.ucx.version: "1.13.1" → (absent)
stacks.ucx.params.rndv_thresh: "64K" → (absent)
stacks.ucx.params.tls: "sm,self" → (absent)
agreement: 36 of 40 decisions (90.0%)
`
	if buf.String() != want {
		t.Errorf("Diff wrote\n%s\nwant\n%s", buf.String(), want)
	}
	ag := Compare(a, b, DefaultSizes())
	wantDiffs := []string{
		`stacks.mimalloc.params.purge_delay: (absent) vs "100"`,
		`stacks.openmpi.params.btl_vader_eager_limit: "32768" vs "16384"`,
		`stacks.ucx.params.rndv_thresh: "64K" vs (absent)`,
		`stacks.ucx.params.tls: "sm,self" vs (absent)`,
	}
	if !reflect.DeepEqual(ag.Differences, wantDiffs) {
		t.Errorf("Compare differences\n%s\nwant\n%s", strings.Join(ag.Differences, "\n"), strings.Join(wantDiffs, "\n"))
	}
}
