package store

import (
	"github.com/gotune/gotune/internal/sys"

	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Record is one line of the store.
type Record struct {
	Key  string          `json:"key"`  // identifies the trial (e.g. a digest of its configuration)
	Kind string          `json:"kind"` // what Data holds, e.g. "point", "verdict"
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data"`
}

// Store is an open append-only record file.
type Store struct {
	path    string
	f       *os.File
	records []Record
	byKey   map[string]int // index of the latest record per key
	// Dropped is the torn final line found (and removed) at Open, if any.
	Dropped []byte
}

// Open opens (or creates) the store at path and reads what is there.
func Open(path string) (*Store, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// One writer at a time: a second process would write at its own
	// offset, and its Open could take the first's half-written line for a
	// torn one and cut it.
	if err := lock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{path: path, f: f, byKey: map[string]int{}}
	if err := s.load(); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) load() error {
	data, err := io.ReadAll(s.f)
	if err != nil {
		return fmt.Errorf("read store %s: %w", s.path, err)
	}
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
			return fmt.Errorf("%s:%d: corrupt record: %w", s.path, line, err)
		}
		if r.Key == "" {
			return fmt.Errorf("%s:%d: record without a key", s.path, line)
		}
		s.add(r)
		good = end
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read store %s: %w", s.path, err)
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
	if _, err := s.f.Write(line); err != nil {
		return fmt.Errorf("append to %s: %w", s.path, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", s.path, err)
	}
	s.add(r)
	return nil
}

// Close closes the file.
func (s *Store) Close() error { return s.f.Close() }

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
