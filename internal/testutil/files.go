package testutil

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ModuleRoot returns the directory of go.mod at or above the test's
// working directory (its package directory).
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// WriteTree writes files, each a path relative to root and its content,
// making the directories they need: a fake /proc or /sys for a test.
func WriteTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Updating reports whether the test binary was given -update, a flag its
// package defines: golden files are then rewritten, not compared.
func Updating() bool {
	f := flag.Lookup("update")
	if f == nil {
		return false
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return false
	}
	b, _ := g.Get().(bool)
	return b
}

// GoldenFile is Golden of testdata/name, rewritten under -update.
func GoldenFile(t testing.TB, name string, got []byte) {
	t.Helper()
	Golden(t, filepath.Join("testdata", name), got, Updating())
}

// Golden compares got with the golden file at path, or writes it (and its
// directory) when update is set: a test binary's -update flag.
func Golden(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it if the change is intended); %s", path, FirstDiff(string(want), string(got)))
	}
}

// FirstDiff shows the first line where two texts differ.
func FirstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n want %q\n got  %q", i+1, a, b)
		}
	}
	return ""
}

// SharedExecutable copies this process's executable (a test binary, whose
// own directory is private to the user who built it) into a new directory
// every user may enter, as a file every user may run, so that a test can
// start it as another user. remove deletes the copy and its directory.
func SharedExecutable() (path string, remove func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	data, err := os.ReadFile(self)
	if err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "gotune-shared-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	path = filepath.Join(dir, filepath.Base(self))
	if err := os.WriteFile(path, data, 0o755); err != nil {
		remove()
		return "", nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		remove()
		return "", nil, err
	}
	return path, remove, nil
}
