package native

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gotune/gotune/profile"
)

// Write renders every one of stacks for p and writes each file into dir
// (made if missing) under its FileName, atomically, returning the paths in
// the order of stacks. Nothing is written unless every file renders.
func Write(dir string, stacks []string, p *profile.Profile) ([]string, error) {
	files := make([][]byte, len(stacks))
	paths := make([]string, len(stacks))
	for i, s := range stacks {
		b, err := Render(s, p)
		if err != nil {
			return nil, err
		}
		name, err := FileName(s)
		if err != nil {
			return nil, err
		}
		files[i], paths[i] = b, filepath.Join(dir, name)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("native files: %w", err)
	}
	for i, path := range paths {
		if err := writeAtomic(path, files[i]); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// writeAtomic writes b to path through a temporary file in the same
// directory and a rename, so that a stack never reads half a file.
func writeAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fail := func(err error) error {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := tmp.Write(b); err != nil {
		return fail(err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fail(err)
	}
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
