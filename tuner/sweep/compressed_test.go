package sweep

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/hostinfo"
	"github.com/gotune/gotune/internal/testutil"
	"github.com/gotune/gotune/profile"
	"github.com/gotune/gotune/tuner/store"
)

// Checked-in run directories (catalogue entries, relative to the module
// root, or testdata/ beside this test), and the SHA-256 of the
// measurements.bench each run wrote before its store was compressed.
const (
	sweepRun       = "results/catalogue/vm" // make sweep
	benchRun       = "results/catalogue/cpu-h200"
	benchRunBench  = "9b7da4db057a88362b69038d4273d16e1610c4ed54edfca7b1548a26783e8040"
	verifyRun      = "testdata/verify-vm" // gotune verify PROFILE --rounds 30 on the development VM
	verifyRunBench = "2939bc545f1ce32c477b83f8ebcf6ffb5298c1f8bb058eb3438b2d3697bf5452"
)

// runPath is where a checked-in run lies: testdata/ beside this test, or
// a catalogue entry under the module root.
func runPath(t *testing.T, run string) string {
	t.Helper()
	if strings.HasPrefix(run, "testdata/") {
		return run
	}
	return filepath.Join(testutil.ModuleRoot(t), run)
}

// storeForms are the ways a run directory's store may be found: plain (a
// run as the sweep leaves it), compressed (as checked in) and compressed
// with a plain file beside it (a compressed run resumed).
var storeForms = []string{"plain", "compressed", "compressed+plain"}

// storeLines returns the records of run's store, whichever form is
// checked in, as lines.
func storeLines(t *testing.T, run string) []string {
	t.Helper()
	path := filepath.Join(runPath(t, run), MeasurementsFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		f, ferr := os.Open(path + store.CompressedSuffix)
		if ferr != nil {
			t.Fatal(ferr)
		}
		defer f.Close()
		zr, zerr := gzip.NewReader(f)
		if zerr != nil {
			t.Fatalf("%s%s: %v", path, store.CompressedSuffix, zerr)
		}
		b, err = io.ReadAll(zr)
	}
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// runDirIn copies run (meta.json and the store) to a new run
// directory whose store has the given form.
func runDirIn(t *testing.T, run, form string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), run)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(runPath(t, run), MetaFile))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gz := func(lines []string) []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
		zw.Write([]byte(strings.Join(lines, "")))
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	write(MetaFile, meta)
	lines := storeLines(t, run)
	switch form {
	case "plain":
		write(MeasurementsFile, []byte(strings.Join(lines, "")))
	case "compressed":
		write(MeasurementsFile+store.CompressedSuffix, gz(lines))
	case "compressed+plain":
		half := len(lines) / 2
		write(MeasurementsFile+store.CompressedSuffix, gz(lines[:half]))
		write(MeasurementsFile, []byte(strings.Join(lines[half:], "")))
	default:
		t.Fatalf("unknown store form %q", form)
	}
	return dir
}

// gotune tune re-decides a checked-in run from its compressed store to the
// profile it decides from the plain one, measuring nothing and leaving no
// plain file beside the compressed one.
func TestTuneRedecidesACompressedRunDir(t *testing.T) {
	hashes := map[string]string{}
	for _, form := range storeForms {
		t.Run(form, func(t *testing.T) {
			dir := runDirIn(t, sweepRun, form)
			res, err := Tune(context.Background(), dir, nil)
			if err != nil {
				t.Fatalf("tune %s: %v", dir, err)
			}
			if res.Measured != 0 || res.ProfilePath == "" {
				t.Fatalf("tune %s: %d measured, profile %q; want none measured and a profile", dir, res.Measured, res.ProfilePath)
			}
			p, err := profile.Load(res.ProfilePath)
			if err != nil {
				t.Fatal(err)
			}
			hashes[form] = p.Hash
			if _, err := os.Stat(filepath.Join(dir, MeasurementsFile)); form == "compressed" && err == nil {
				t.Errorf("tune of a compressed store left a %s beside it", MeasurementsFile)
			}
		})
	}
	for _, form := range storeForms[1:] {
		if hashes[form] == "" || hashes[form] != hashes["plain"] {
			t.Errorf("profile hash from the %s store %q, from the plain one %q", form, hashes[form], hashes["plain"])
		}
	}
}

// gotune tune of the checked-in quick sweep, by a build of another version,
// re-emits the run's own profile byte for byte: the replay emits under the
// run's version, so the stored verification, keyed by the profile's hash,
// and any mend it made replay too.
func TestTuneReemitsTheRunsProfile(t *testing.T) {
	saved := hostinfo.Version
	hostinfo.Version = "another-build"
	defer func() { hostinfo.Version = saved }()
	dir := runDirIn(t, sweepRun, "compressed")
	res, err := Tune(context.Background(), dir, nil)
	if err != nil {
		t.Fatalf("tune %s: %v", dir, err)
	}
	got, err := os.ReadFile(res.ProfilePath)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(runPath(t, sweepRun), ProfileFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("tune by another build re-emitted %s differently from the checked-in profile", dir)
	}
}

// WriteBench makes, from meta.json and the store alone, the very
// measurements.bench the run wrote, for a sweep and a verification, from
// every form of the store.
func TestWriteBenchReproducesTheRunsBenchFile(t *testing.T) {
	for _, tc := range []struct{ run, sha string }{{benchRun, benchRunBench}, {verifyRun, verifyRunBench}} {
		for _, form := range storeForms {
			t.Run(tc.run+"/"+form, func(t *testing.T) {
				dir := runDirIn(t, tc.run, form)
				var b bytes.Buffer
				if err := WriteBench(dir, &b); err != nil {
					t.Fatal(err)
				}
				if sum := sha256.Sum256(b.Bytes()); hex.EncodeToString(sum[:]) != tc.sha {
					t.Fatalf("bench view of %s (%d bytes) is not the run's %s:\n%.1000s", dir, b.Len(), BenchFile, b.String())
				}
				if left, _ := os.ReadDir(dir); len(left) != map[bool]int{true: 3, false: 2}[form == "compressed+plain"] {
					t.Errorf("WriteBench wrote into %s: %d entries", dir, len(left))
				}
			})
		}
	}
}

func TestWriteBenchNamesWhatIsMissing(t *testing.T) {
	dir := runDirIn(t, verifyRun, "plain")
	if err := os.Remove(filepath.Join(dir, MeasurementsFile)); err != nil {
		t.Fatal(err)
	}
	if err := WriteBench(dir, io.Discard); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, MeasurementsFile)) {
		t.Fatalf("WriteBench without a store: %v, want an error naming %s", err, filepath.Join(dir, MeasurementsFile))
	}
	if err := WriteBench(t.TempDir(), io.Discard); err == nil || !strings.Contains(err.Error(), MetaFile) {
		t.Fatalf("WriteBench without meta.json: %v", err)
	}
}
