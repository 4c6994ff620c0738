package atomicfile

import (
	"os"
	"path/filepath"
)

// Write writes data to path with mode perm through a temporary file in
// the same directory, synced, then renamed over path: a reader sees the
// old file or the new one, never a part, and a crash leaves one of them.
// On failure the temporary file is gone and the error is the os call's
// (it names the file).
func Write(path string, data []byte, perm os.FileMode) error {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	err = write(tmp, data, perm)
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	// Make the rename itself durable (best effort: not every file system
	// lets a directory be synced).
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func write(f *os.File, data []byte, perm os.FileMode) error {
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(perm); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}
