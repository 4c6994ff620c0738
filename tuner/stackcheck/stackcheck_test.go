package stackcheck

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// The recordings under testdata were made on Debian 12 (Open MPI 4.1.4,
// MPICH 4.0.2, UCX 1.13.1, mimalloc 2.0.9) with the sample files beside
// them and one override each in the environment, then trimmed to the lines
// the check reads (cvars' count line adjusted to the lines kept):
//
//	ompi_info.{with,without}.txt  OMPI_MCA_btl_vader_fbox_max=16 ompi_info --all --parsable,
//	                              with OMPI_MCA_mca_base_param_files=/tmp/gotune-check-td/openmpi-mca-params.conf
//	cvars.{with,without}.txt      csrc/cvars.c with MPIR_CVAR_CH4_IPC_XPMEM_P2P_THRESHOLD=4096, mpich.env sourced after
//	ucx_info.{with,without}.txt   UCX_TLS=posix,self ucx_info -v -c -a, with ucx.conf as ./ucx.conf
//	ucx_info.e.txt                ucx_info -e -u t with ucx.conf's lines in the environment
//	mimalloc.{with,without}.txt   LD_PRELOAD=libmimalloc.so.2 MIMALLOC_VERBOSE=1 true, MIMALLOC_PAGE_RESET=0,
//	                              mimalloc.env sourced after; mimalloc.alone.txt: PURGE_DELAY and RESET_DELAY alone
const recordedOpenMPIFile = "/tmp/gotune-check-td/openmpi-mca-params.conf"

func open(t *testing.T, name string) *os.File {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// record parses the recorded tool output testdata/name with parse.
func record[T any](t *testing.T, parse func(io.Reader) (T, error), name string) T {
	t.Helper()
	v, err := parse(open(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func parseTestdata(t *testing.T, stack, name string) *Parsed {
	t.Helper()
	p, err := Parse(stack, "testdata/"+name, open(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestParse(t *testing.T) {
	tests := []struct {
		stack, text string
		want        []Setting // nil with wantErr
		foreign     int
		sections    int
		wantErr     string
	}{
		{stack: "openmpi", text: "# c\n\nbtl_vader_eager_limit = 8192\n  pml=ob1  # inline comment\nbtl = \"self,vader\"\n",
			want: []Setting{{"btl_vader_eager_limit", "8192", 3, ""}, {"pml", "ob1", 4, ""}, {"btl", `"self,vader"`, 5, ""}}},
		{stack: "openmpi", text: "pml ob1\n", wantErr: "f:1:"},
		{stack: "openmpi", text: "= 3\n", wantErr: "f:1:"},
		{stack: "mpich", text: "# c\nexport MPIR_CVAR_A=1\nMPIR_CVAR_B='x y'\nMPIR_CVAR_C=\"2\"\nFOO=1\n",
			want: []Setting{{"MPIR_CVAR_A", "1", 2, ""}, {"MPIR_CVAR_B", "x y", 3, ""}, {"MPIR_CVAR_C", "2", 4, ""}}, foreign: 1},
		{stack: "mpich", text: "MPIR_CVAR_A 1\n", wantErr: "f:1:"},
		{stack: "ucx", text: "UCX_TLS=sm\n[Intel Xeon]\nUCX_RNDV_THRESH=16k\n",
			want: []Setting{{"UCX_TLS", "sm", 1, ""}, {"UCX_RNDV_THRESH", "16k", 3, "Intel Xeon"}}, sections: 1},
		{stack: "ucx", text: "[broken\n", wantErr: "f:1:"},
		{stack: "mimalloc", text: "MIMALLOC_PURGE_DELAY=10\n", want: []Setting{{"MIMALLOC_PURGE_DELAY", "10", 1, ""}}},
		{stack: "mimalloc", text: "[x]\n", wantErr: "f:1:"},
		{stack: "nccl", text: "# c\nNCCL_A=1\nNCCL_PROTO = LL\nFOO=1\nNCCL_B=2\r\n",
			want: []Setting{{"NCCL_A", "1", 2, ""}, {"NCCL_PROTO ", " LL", 3, ""}, {"NCCL_B", "2\r", 5, ""}}, foreign: 1},
		{stack: "nccl", text: "NCCL_A\n", wantErr: "f:1:"},
		{stack: "rccl", text: "", wantErr: "unknown stack"},
	}
	for _, tt := range tests {
		t.Run(tt.stack+"/"+strings.SplitN(tt.text, "\n", 2)[0], func(t *testing.T) {
			p, err := Parse(tt.stack, "f", strings.NewReader(tt.text))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Settings) != len(tt.want) {
				t.Fatalf("settings %+v, want %+v", p.Settings, tt.want)
			}
			for i := range tt.want {
				if p.Settings[i] != tt.want[i] {
					t.Errorf("setting %d = %+v, want %+v", i, p.Settings[i], tt.want[i])
				}
			}
			if len(p.Foreign) != tt.foreign || len(p.Sections) != tt.sections {
				t.Errorf("foreign %v sections %v, want %d and %d", p.Foreign, p.Sections, tt.foreign, tt.sections)
			}
		})
	}
}

func TestParseOMPIInfo(t *testing.T) {
	info := record(t, parseOMPIInfo, "ompi_info.with.txt")
	if info.Version != "Open MPI 4.1.4" {
		t.Errorf("version %q", info.Version)
	}
	for name, want := range map[string]ompiParam{
		"btl_vader_eager_limit": {"8192", "file (" + recordedOpenMPIFile + ":2)"},
		"btl_vader_fbox_max":    {"16", "environment"},
		"btl_vader_fbox_size":   {"4096", "default"},
		"mca_base_param_files":  {recordedOpenMPIFile, "environment"},
	} {
		if got := info.Params[name]; got != want {
			t.Errorf("%s = %+v, want %+v", name, got, want)
		}
	}
	for _, tt := range []struct{ text, wantErr string }{
		{"", "no mca:"},
		{"mca:btl:vader:param:x:value\n", "line 1"},
	} {
		if _, err := parseOMPIInfo(strings.NewReader(tt.text)); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%q: err = %v, want %q", tt.text, err, tt.wantErr)
		}
	}
	// A value may hold colons.
	info, err := parseOMPIInfo(strings.NewReader("mca:a:b:param:p:value:x:y:z\nmca:a:b:param:p:source:file (/a:b.conf:7)\n"))
	if err != nil || info.Params["p"].Value != "x:y:z" {
		t.Fatalf("%+v %v", info, err)
	}
	if path, line, ok := fileSource(info.Params["p"].Source); !ok || path != "/a:b.conf" || line != 7 {
		t.Errorf("fileSource = %q %d %v", path, line, ok)
	}
	if _, _, ok := fileSource("environment"); ok {
		t.Error("fileSource(environment) ok")
	}
}

func TestParseCvars(t *testing.T) {
	l := record(t, parseCvars, "cvars.with.txt")
	if l.Version != "MPICH 4.0.2" || l.Vars["MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS"] != (cvar{"int", "128"}) ||
		l.Vars["MPIR_CVAR_CH4_SHM"] != (cvar{"char", ""}) {
		t.Errorf("%+v", l)
	}
	for _, text := range []string{"# cvars 2\nA\tint\t1\n", "A\tint\t1\n", "# cvars 1\nA int 1\n"} {
		if _, err := parseCvars(strings.NewReader(text)); err == nil {
			t.Errorf("%q: no error", text)
		}
	}
}

func TestParseUCXInfo(t *testing.T) {
	f := open(t, "ucx_info.with.txt")
	b, _ := os.ReadFile(f.Name())
	c, err := parseUCXInfo(bytes.NewReader(b), bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != "UCX 1.13.1" || c.Vars["UCX_RNDV_THRESH"] != "16K" || c.Vars["UCX_TLS"] != "posix,self" || len(c.Errors) != 0 {
		t.Errorf("%+v", c)
	}
	log := "[1.2] [vm:1:0] parser.c:1059 UCX  ERROR Invalid value for RNDV_THRESH: 'bogus'. Expected: memory units\n"
	c, err = parseUCXInfo(strings.NewReader("UCX_TLS=all\n"), strings.NewReader(log))
	if err != nil || len(c.Errors) != 1 || !strings.HasPrefix(c.Errors[0], "Invalid value for RNDV_THRESH") {
		t.Errorf("%+v %v", c, err)
	}
	e, _ := os.ReadFile(filepath.Join("testdata", "ucx_info.e.txt"))
	if got := parseUCXUnused(string(e)); len(got) != 1 || !got["UCX_FOOBAR"] {
		t.Errorf("unused = %v", got)
	}
	rej, un := ucxRejected([]Setting{{Name: "UCX_RNDV_THRESH", Line: 4}, {Name: "UCX_MM_FIFO_SIZE", Line: 6}},
		[]string{"Invalid value for FIFO_SIZE: 'x'", "something else"})
	if len(rej) != 1 || rej[6] == "" || len(un) != 1 {
		t.Errorf("rejected %v unmatched %v", rej, un)
	}
}

func TestParseMimalloc(t *testing.T) {
	m := record(t, parseMimalloc, "mimalloc.alone.txt")
	if m.Options["decommit_delay"] != "10" || m.Deprecated["MIMALLOC_RESET_DELAY"] != "MIMALLOC_DECOMMIT_DELAY" {
		t.Errorf("%+v", m)
	}
	if _, err := parseMimalloc(strings.NewReader("")); err == nil {
		t.Error("no options: no error")
	}
}

func TestJudge(t *testing.T) {
	for _, tt := range []struct {
		file, used, without string
		want                Status
	}{
		{"16k", "16K", "auto", OK},
		{"binomial", "1", "0", ReadsAs},
		{`"none"`, "cma", "cma", NotTaken},
		{"4096", "4096", "4096", OK},
	} {
		if got := judge(tt.file, tt.used, tt.without); got != tt.want {
			t.Errorf("judge(%q, %q, %q) = %q, want %q", tt.file, tt.used, tt.without, got, tt.want)
		}
	}
}

// TestGolden judges the recorded outputs and compares the printed reports
// with testdata/golden (go test -update rewrites them).
func TestGolden(t *testing.T) {
	reports := map[string]func(t *testing.T) *Report{
		"openmpi": func(t *testing.T) *Report {
			p := parseTestdata(t, "openmpi", "openmpi-mca-params.conf")
			p.Path = recordedOpenMPIFile
			with := record(t, parseOMPIInfo, "ompi_info.with.txt")
			without := record(t, parseOMPIInfo, "ompi_info.without.txt")
			return judgeOpenMPI(p, with, without, map[string]string{"OMPI_MCA_btl_vader_fbox_max": "16"})
		},
		"openmpi-nofile": func(t *testing.T) *Report {
			without := record(t, parseOMPIInfo, "ompi_info.without.txt")
			return judgeOpenMPI(nil, without, without, nil)
		},
		"mpich": func(t *testing.T) *Report {
			with := record(t, parseCvars, "cvars.with.txt")
			without := record(t, parseCvars, "cvars.without.txt")
			return judgeMPICH(parseTestdata(t, "mpich", "mpich.env"), with, without,
				map[string]string{"MPIR_CVAR_CH4_IPC_XPMEM_P2P_THRESHOLD": "4096", "MPICH_CH4_SHM_POSIX_IQUEUE_NUM_CELLS": "16"})
		},
		"ucx": func(t *testing.T) *Report {
			read := func(name string) ucxConfig {
				b, err := os.ReadFile(filepath.Join("testdata", name))
				if err != nil {
					t.Fatal(err)
				}
				c, err := parseUCXInfo(bytes.NewReader(b), bytes.NewReader(b))
				if err != nil {
					t.Fatal(err)
				}
				return c
			}
			e, err := os.ReadFile(filepath.Join("testdata", "ucx_info.e.txt"))
			if err != nil {
				t.Fatal(err)
			}
			others := map[string]Parsed{"/root/ucx.conf": {Settings: []Setting{{Name: "UCX_RNDV_THRESH", Value: "32k", Line: 1}}}}
			return judgeUCX(parseTestdata(t, "ucx", "ucx.conf"), read("ucx_info.with.txt"), read("ucx_info.without.txt"),
				parseUCXUnused(string(e)), map[string]string{"UCX_TLS": "posix,self"}, others)
		},
		"mimalloc": func(t *testing.T) *Report {
			with := record(t, parseMimalloc, "mimalloc.with.txt")
			without := record(t, parseMimalloc, "mimalloc.without.txt")
			alone := record(t, parseMimalloc, "mimalloc.alone.txt")
			for old, to := range alone.Deprecated {
				with.Deprecated[old] = to // as checkMimalloc merges its probe
			}
			return judgeMimalloc(parseTestdata(t, "mimalloc", "mimalloc.env"), with, without, map[string]string{"MIMALLOC_PAGE_RESET": "0"})
		},
	}
	want := map[string]int{"openmpi": 3, "openmpi-nofile": 0, "mpich": 2, "ucx": 2, "mimalloc": 3}
	for name, report := range reports {
		t.Run(name, func(t *testing.T) {
			r := report(t)
			var b bytes.Buffer
			if err := r.Write(&b); err != nil {
				t.Fatal(err)
			}
			testutil.Golden(t, filepath.Join("testdata", "golden", name+".txt"), b.Bytes(), *update)
			if len(r.Warnings) != want[name] {
				t.Errorf("%d warnings, want %d: %q", len(r.Warnings), want[name], r.Warnings)
			}
		})
	}
}
