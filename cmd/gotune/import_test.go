package main

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const importFixtures = "../../bench/importer/testdata"

func TestImport(t *testing.T) {
	osu := filepath.Join(importFixtures, "osu/osu_mbw_mr_7.4.txt")
	imb := filepath.Join(importFixtures, "imb/imb_mpi1_2021.11_openmpi.txt")
	out := filepath.Join(t.TempDir(), "runs.jsonl")
	for range 2 {
		stdout, stderr, code := run(t, "import", "--format", "csv", "--out", out, osu, imb)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		want := osu + ": osu, 2 results\n" + imb + ": imb, 9 results\n"
		if stderr != want {
			t.Errorf("stderr %q, want %q", stderr, want)
		}
		if !strings.HasPrefix(stdout, "label,") || !strings.Contains(stdout, "osu_mbw_mr 7.4") || !strings.Contains(stdout, "IMB-MPI1 PingPong 2021.11") {
			t.Errorf("csv output:\n%s", stdout)
		}
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runs := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct{ Type, Label string }
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("--out line %q: %v", sc.Text(), err)
		}
		if line.Type == "run" {
			runs++
		}
	}
	if runs != 2*11 {
		t.Errorf("--out holds %d runs, want 22 (11 results, appended twice)", runs)
	}
}

func TestImportTable(t *testing.T) {
	stdout, stderr, code := run(t, "import", filepath.Join(importFixtures, "osu/osu_bw_c_fail_7.4.txt"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "osu_bw 7.4: bw over mpi") || !strings.Contains(stdout, "warning: size 4K: OSU validation failed") {
		t.Errorf("table:\n%s", stdout)
	}
}

func TestImportErrors(t *testing.T) {
	dir := t.TempDir()
	noise := make([]byte, 4096)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(r.IntN(256))
	}
	random := filepath.Join(dir, "random.bin")
	text := filepath.Join(dir, "notes.txt")
	for path, data := range map[string][]byte{random: noise, text: []byte("hello\nworld\n")} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	truncated := filepath.Join(importFixtures, "osu/osu_bw_truncated_7.4.txt")
	out := filepath.Join(dir, "runs.jsonl")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{random}, random + ": "},
		{[]string{text}, text + ": not the output of a known tool"},
		{[]string{truncated}, truncated + ":13: "},
		{[]string{filepath.Join(dir, "missing.txt")}, "missing.txt"},
		{[]string{"--out", out, filepath.Join(importFixtures, "osu/osu_bw_7.4.txt"), text, random}, "2 of 3 files"},
		{[]string{"--format", "xml", text}, "--format"},
	} {
		stdout, stderr, code := run(t, append([]string{"import"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("import %v: exit %d, stdout %q, stderr %q; want a failure saying %q", c.args, code, stdout, stderr, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed import wrote --out (%v)", err)
	}
}
