package tools

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// Fake programs the drivers run, written to a temporary directory that
// goes first on PATH: gotune bench (bandwidth at 1K and 4K, doubled by any
// --opt), mpirun running the anchor (three repetitions at each size) and
// the phase probe (one round at a 40 ns round trip); mpirun running gotune
// bench (bandwidth 1000 MB/s at 1K, 2000 at 4K; latency 4 us), the anchor
// at 8 B (latency 5 us), and nshosts (iperf3 at 8 Gbit/s). Across hosts
// (a --hostfile) mpirun fails an anchor run without a rankfile placing rank
// i on slot i of host i+1, and a gotune run that mpirun binds.
var fakes = map[string]string{
	"gotune": `#!/bin/sh
v=1000
case "$*" in *--opt*) v=2000 ;; esac
echo '{"type":"run","label":"fake"}'
echo "{\"type\":\"point\",\"size\":1024,\"samples\":[$v,$v,$v]}"
echo "{\"type\":\"point\",\"size\":4096,\"samples\":[$((v*2)),$((v*2)),$((v*2))]}"
`,
	"mpirun": `#!/bin/sh
case "$*" in
*"--hostfile "*" bench "*" --bind-to none "*|*"--hostfile "*" --bind-to none "*" bench "*) ;;
*"--hostfile "*" bench "*) echo "mpirun: gotune bench bound by mpirun" >&2; exit 1 ;;
*"--hostfile "*" --rankfile "*) rf=$(echo "$*" | sed 's/.*--rankfile \([^ ]*\).*/\1/')
	grep -qx "rank 0=h1 slot=0" "$rf" && grep -qx "rank 1=h2 slot=1" "$rf" || { echo "mpirun: rankfile $rf:" >&2; cat "$rf" >&2; exit 1; } ;;
*"--hostfile "*) echo "mpirun: the anchor across hosts without a rankfile" >&2; exit 1 ;;
esac
case "$*" in
*" bench "*latency*) echo '{"type":"point","size":8,"samples":[4,4,4]}' ;;
*" bench "*) echo '{"type":"point","size":1024,"samples":[1000,1000]}'; echo '{"type":"point","size":4096,"samples":[2000,2000]}' ;;
*latency*) for r in 0 1 2; do echo "rep 8 $r 5"; done ;;
*) for r in 0 1 2; do echo "rep 1024 $r 500"; echo "rep 4096 $r 4000"; done ;;
esac
`,
	"nshosts": `#!/bin/sh
case "$1" in
mpirun-args) printf 'h1 slots=2\nh2 slots=2\n' > "$(dirname "$0")/hostfile"; echo "--hostfile $(dirname "$0")/hostfile" ;;
iperf3) echo "h2 -> h1 (10.213.0.2): 8.00 Gbit/s, 0 retransmits, 3.0 s" ;;
esac
`,
	"probe": `#!/bin/sh
echo "0 rtt_min 40 med 110 ns vv 45.4 [s 21 r 20] mv 54.6 [s 14 r 18] mm 65.4 [s 12 r 15]"
`,
}

// step runs a script: args and env may name {tmp} (the step's working
// directory, shared by a tool's steps) and {bin} (the fakes' directory);
// stdout must hold every line of want.
type step struct {
	script string // relative to tools/
	args   []string
	env    []string
	want   []string
}

func TestScripts(t *testing.T) {
	python, err := exec.LookPath("python3")
	testutil.SkipUnless(t, "python3", err)
	bin := t.TempDir()
	for name, text := range fakes {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range []struct {
		name  string
		steps []step
	}{
		{"abvader", []step{
			{script: "abvader/drv.py", args: []string{"2", "1K,4K", "{tmp}/r.jsonl", "a|{bin}/gotune|sm", "b|{bin}/gotune|sm --opt sm.depth=64", "vader"},
				env: []string{"PROBE={bin}/probe"}},
			{script: "abvader/pb.py", args: []string{"{tmp}/r.jsonl", "a", "b"}, want: []string{
				"== rtt<=50ns 2 rounds",
				"      1024 a 1.0 GB/s  b 2.0 GB/s  b/a 2.000 [2.00-2.00]",
				"      4096 a 2.0 GB/s  b 4.0 GB/s  b/a 2.000 [2.00-2.00]",
			}},
			{script: "abvader/an.py", args: []string{"{tmp}/r.jsonl"}, want: []string{
				"0 40 110 45 55 65 | 1024:0 2.00 4.00 | 4096:4 0.50 1.00",
				"== lo<=50 2 rounds; syn vv/mv/mm 45 55 65",
				"   1024 vader 0.5 a 1.0 (2.00) b 2.0 (4.00)",
			}},
		}},
		{"ab", []step{
			{script: "ab/ab.py", args: []string{"2", "1K,4K", "base|GTBIN={bin}/gotune|sm", "new|GTBIN={bin}/gotune|sm --opt sm.depth=64"},
				env: []string{"RAW={tmp}/raw.json"}, want: []string{
					"1024 2.000[2.00-2.00]",
					"4096 2.000[2.00-2.00]",
					"geomean 2.000",
				}},
			{script: "ab/phase.py", args: []string{"{tmp}/raw.json", "base", "1024", "1500"}, want: []string{
				"phase by base at 1024 < 1500.0 : slow rounds 2 of 2",
			}},
			{script: "ab/phase.py", args: []string{filepath.Join(here, "ab/testdata/raw.json"), "base", "1024", "500"}, want: []string{
				"phase by base at 1024 < 500.0 : slow rounds 1 of 3",
				"1024 | new slow 3.000 fast 2.000 | abs base slow 0.4 fast 1.0",
				"4096 | new slow 2.000 fast 1.000 | abs base slow 2.0 fast 4.0",
			}},
		}},
		{"nstcp", []step{
			{script: "nstcp/nstcp.py", args: []string{"3", "1K,4K", "{tmp}/r.jsonl"},
				env: []string{"NSHOSTS={bin}/nshosts", "GOTUNE=gotune", "ANCHOR=anchor"}, want: []string{
					"    1024 2.000 [2.000-2.000]",
					"    4096 0.500 [0.500-0.500]",
					"       8 0.800 [0.800-0.800]",
					"  gotune 2.000 [2.000-2.000]",
					"    ompi 4.000 [4.000-4.000]",
				}},
		}},
		{"spells", []step{
			{script: "spells/spells.py", args: []string{filepath.Join(here, "spells/testdata/anchors.jsonl"), "32768"}, want: []string{
				"    32768 gotune sm            slow  1/4  30 10 31 29",
				"    32768 vader none           slow  2/4  28 27 9 8",
			}},
		}},
	} {
		t.Run(tool.name, func(t *testing.T) {
			tmp := t.TempDir()
			expand := strings.NewReplacer("{tmp}", tmp, "{bin}", bin).Replace
			for _, s := range tool.steps {
				cmd := exec.Command(python, append([]string{filepath.Join(here, s.script)}, mapStrings(s.args, expand)...)...)
				cmd.Dir = tmp
				cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
				cmd.Env = append(cmd.Env, mapStrings(s.env, expand)...)
				out, err := cmd.Output()
				if err != nil {
					stderr := ""
					if ee, ok := err.(*exec.ExitError); ok {
						stderr = string(ee.Stderr)
					}
					t.Fatalf("%s %v: %v\n%s", s.script, s.args, err, stderr)
				}
				lines := strings.Split(string(out), "\n")
				for _, w := range s.want {
					if !slices.Contains(lines, w) {
						t.Errorf("%s %v: output lacks the line %q:\n%s", s.script, s.args, w, out)
					}
				}
			}
		})
	}
}

func mapStrings(ss []string, f func(string) string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}
