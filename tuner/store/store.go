package store

import (
	"github.com/gotune/gotune/internal/sys"

	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// CompressedSuffix names a store's compressed part: the records of
// path are those of path+CompressedSuffix (if there is one), then those
// of path itself.
const CompressedSuffix = ".gz"

// Record is one line of the store.
type Record struct {
	Key  string          `json:"key"`  // identifies the trial (e.g. a digest of its configuration)
	Kind string          `json:"kind"` // what Data holds, e.g. "point", "verdict"
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data"`
}

// Store is an open append-only record file, with an optional compressed
// part before it that is read and never written.
type Store struct {
	path    string
	f       *os.File // the plain file; nil until the first Append when only the compressed part exists
	lockf   *os.File // the file whose lock this store holds: the compressed part if any, else f
	records []Record
	byKey   map[string]int // index of the latest record per key
	// Dropped is the torn final line found at Open, if any: cut from the
	// plain file, or skipped at the end of the compressed part (which Open
	// never rewrites). When both have one, it is the plain file's.
	Dropped []byte
}

// Open opens the store at path and reads what is there: path+".gz" first
// (gzip members, as `gzip -9n` writes them), then path. Appends go to
// path, which is created when missing: at Open without a compressed
// part, at the first Append with one (so that reading a compressed store
// leaves nothing beside it).
func Open(path string) (*Store, error) {
	s := &Store{path: path, byKey: map[string]int{}}
	gz := path + CompressedSuffix
	zf, err := os.Open(gz)
	switch {
	case err == nil:
		// One writer at a time: a second process would write at its own
		// offset, and its Open could take the first's half-written line
		// for a torn one and cut it. The lock is on the compressed part
		// whenever there is one, so that every opener locks the same file
		// whether or not the plain one exists yet.
		if err := lock(zf); err != nil {
			zf.Close()
			return nil, fmt.Errorf("open store %s: %w", gz, err)
		}
		s.lockf = zf
		if err := s.loadCompressed(zf, gz); err != nil {
			zf.Close()
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if errors.Is(err, os.ErrNotExist) {
			return s, nil
		}
		if err != nil {
			zf.Close()
			return nil, fmt.Errorf("open store: %w", err)
		}
		s.f = f
	case errors.Is(err, os.ErrNotExist):
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		if err := lock(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("open store %s: %w", path, err)
		}
		s.f, s.lockf = f, f
	default:
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := s.loadPlain(len(s.records)); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Read returns the records of the store at path (its compressed part,
// then the plain file), oldest first, without locking, creating or
// trimming anything: a torn final line is skipped. It is for readers of a
// finished run; a missing store is an error.
func Read(path string) ([]Record, error) {
	s := &Store{path: path, byKey: map[string]int{}}
	found := false
	gz := path + CompressedSuffix
	if zf, err := os.Open(gz); err == nil {
		found = true
		err := s.loadCompressed(zf, gz)
		zf.Close()
		if err != nil {
			return nil, err
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read store: %w", err)
	}
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		found = true
		if _, err := s.parse(data, path, len(s.records)); err != nil {
			return nil, err
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("read store: %w", err)
	}
	if !found {
		return nil, fmt.Errorf("read store: neither %s nor %s exists", path, gz)
	}
	return s.records, nil
}

// loadCompressed reads the records of the compressed part. A member cut
// short (a copy or a compression that was interrupted) is read as far as
// it goes, like a torn write of the plain file: what it holds of its last
// line is dropped.
func (s *Store) loadCompressed(f *os.File, name string) error {
	var data []byte
	zr, err := gzip.NewReader(bufio.NewReader(f))
	if err == nil {
		data, err = io.ReadAll(zr)
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !(errors.Is(err, io.EOF) && len(data) == 0) {
		return fmt.Errorf("read store %s: %w", name, err)
	}
	_, err = s.parse(data, name, 0)
	return err
}

// loadPlain reads the plain file, cuts a torn final line off it and
// leaves it positioned for appending. prior is how many records the
// compressed part held (see parse).
func (s *Store) loadPlain(prior int) error {
	data, err := io.ReadAll(s.f)
	if err != nil {
		return fmt.Errorf("read store %s: %w", s.path, err)
	}
	good, err := s.parse(data, s.path, prior)
	if err != nil {
		return err
	}
	if good < len(data) {
		if err := s.f.Truncate(int64(good)); err != nil {
			return fmt.Errorf("drop torn record from %s: %w", s.path, err)
		}
	}
	if _, err := s.f.Seek(int64(good), io.SeekStart); err != nil {
		return fmt.Errorf("seek store %s: %w", s.path, err)
	}
	return nil
}

// parse adds the records of data, read from the file name, and returns
// how many bytes of complete records it holds; a final line without its
// newline (a write that was cut off) goes to Dropped. When the records
// before it came from a compressed part (prior > 0), data must not begin
// with that part's first record: that is a plain copy kept beside its
// compressed form (gzip -k), whose records would count twice.
func (s *Store) parse(data []byte, name string, prior int) (int, error) {
	good := 0 // bytes of complete, valid records
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Bytes()
		end := good + len(text) + 1
		if end > len(data) { // no newline: the write was cut off
			s.Dropped = append([]byte(nil), text...)
			break
		}
		var r Record
		if err := json.Unmarshal(text, &r); err != nil {
			return 0, fmt.Errorf("%s:%d: corrupt record: %w", name, line, err)
		}
		if r.Key == "" {
			return 0, fmt.Errorf("%s:%d: record without a key", name, line)
		}
		if line == 1 && prior > 0 && r.Key == s.records[0].Key && r.Time.Equal(s.records[0].Time) {
			return 0, fmt.Errorf("%s:1: repeats the first record of %s%s: one is a copy of the other; remove it",
				name, s.path, CompressedSuffix)
		}
		s.add(r)
		good = end
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read store %s: %w", name, err)
	}
	return good, nil
}

func (s *Store) add(r Record) {
	s.byKey[r.Key] = len(s.records)
	s.records = append(s.records, r)
}

// Has reports whether a record with key exists.
func (s *Store) Has(key string) bool { _, ok := s.byKey[key]; return ok }

// Get returns the latest record with key.
func (s *Store) Get(key string) (Record, bool) {
	i, ok := s.byKey[key]
	if !ok {
		return Record{}, false
	}
	return s.records[i], true
}

// Records returns every record, oldest first.
func (s *Store) Records() []Record { return s.records }

// Append writes r as one line with a single write and syncs it to disk.
func (s *Store) Append(r Record) error {
	if r.Key == "" {
		return errors.New("store: record without a key")
	}
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode record %s: %w", r.Key, err)
	}
	line = append(line, '\n')
	if s.f == nil { // only the compressed part so far, whose lock we hold
		f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("append: %w", err)
		}
		s.f = f
	}
	if _, err := s.f.Write(line); err != nil {
		return fmt.Errorf("append to %s: %w", s.path, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", s.path, err)
	}
	s.add(r)
	return nil
}

// Close closes the files.
func (s *Store) Close() error {
	var err error
	if s.f != nil {
		err = s.f.Close()
	}
	if s.lockf != nil && s.lockf != s.f {
		if lerr := s.lockf.Close(); err == nil {
			err = lerr
		}
	}
	return err
}

// lockGrace is how long Open waits for a lock to be let go. A writer that
// was just killed can leave it held for a moment: a child it was forking
// holds a copy of the descriptor until its exec closes it.
const lockGrace = 2 * time.Second

func lock(f *os.File) error {
	deadline := time.Now().Add(lockGrace)
	for {
		err := sys.LockFile(f)
		if !errors.Is(err, sys.ErrLocked) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
