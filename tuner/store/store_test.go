package store

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/sys"
)

func TestMain(m *testing.M) {
	// As a child: append records until killed, reporting each one done.
	if path := os.Getenv("STORE_TEST_APPEND"); path != "" {
		s, err := Open(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for i := 0; ; i++ {
			data, _ := json.Marshal(strings.Repeat("x", i%5000))
			if err := s.Append(Record{Key: strconv.Itoa(i), Kind: "point", Data: data}); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			fmt.Println(i) // after the sync: this record is durable
		}
	}
	os.Exit(m.Run())
}

func rec(key string) Record { return Record{Key: key, Kind: "point", Data: json.RawMessage(`{"v":1}`)} }

func TestAppendAndResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b", "a"} {
		if err := s.Append(rec(k)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Records()) != 3 || !s.Has("a") || !s.Has("b") || s.Has("c") {
		t.Fatalf("reopened: %d records, keys a=%v b=%v c=%v", len(s.Records()), s.Has("a"), s.Has("b"), s.Has("c"))
	}
	if r, _ := s.Get("a"); r.Time != s.Records()[2].Time {
		t.Error("Get does not return the latest record of a key")
	}
}

// A write cut off by a kill leaves a line without its newline: it is
// dropped, the file is trimmed, and appending continues cleanly.
func TestTornFinalLineIsDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	s, _ := Open(path)
	s.Append(rec("a"))
	s.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"key":"b","kind":"po`)
	f.Close()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Dropped) != `{"key":"b","kind":"po` || s.Has("b") || !s.Has("a") {
		t.Fatalf("dropped %q, has b=%v a=%v", s.Dropped, s.Has("b"), s.Has("a"))
	}
	s.Append(rec("c"))
	s.Close()
	b, _ := os.ReadFile(path)
	if lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"); len(lines) != 2 || !strings.Contains(lines[1], `"key":"c"`) {
		t.Errorf("file after resume:\n%s", b)
	}
}

func TestCorruptLineNamesFileAndLine(t *testing.T) {
	for name, content := range map[string]string{
		"garbage":    "{\"key\":\"a\",\"kind\":\"p\",\"data\":1}\nnot json\n{\"key\":\"c\",\"data\":1}\n",
		"no key":     "{\"key\":\"a\",\"data\":1}\n{\"kind\":\"p\",\"data\":1}\n",
		"wrong type": "{\"key\":\"a\",\"data\":1}\n{\"key\":7,\"data\":1}\n",
	} {
		path := filepath.Join(t.TempDir(), "m.jsonl")
		os.WriteFile(path, []byte(content), 0o644)
		_, err := Open(path)
		if err == nil || !strings.Contains(err.Error(), path+":2:") {
			t.Errorf("%s: got %v, want an error at %s:2", name, err, path)
		}
	}
}

// kill -9 of a writer in the middle of appending: every record it reported
// durable is there, nothing is corrupt, and the store appends again; with
// a compressed part, its records are kept and it is left as it was.
func TestKilledWriterLosesNothingFinished(t *testing.T) {
	for _, compressed := range []bool{false, true} {
		t.Run(fmt.Sprintf("compressed=%v", compressed), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.jsonl")
			var gz []byte
			if compressed {
				gz = gzipLines(t, path+CompressedSuffix, line(t, "old-a"), line(t, "old-b"))
			}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "STORE_TEST_APPEND="+path)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Read acknowledgements until 200 records are durable, then kill.
			buf := make([]byte, 0, 1<<16)
			last := -1
			for last < 200 {
				chunk := make([]byte, 4096)
				n, err := out.Read(chunk)
				if err != nil {
					t.Fatal(err)
				}
				buf = append(buf, chunk[:n]...)
				lines := strings.Split(strings.TrimSuffix(string(buf), "\n"), "\n")
				if strings.HasSuffix(string(buf), "\n") {
					last, _ = strconv.Atoi(lines[len(lines)-1])
				}
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			for i := 0; i <= last; i++ {
				if !s.Has(strconv.Itoa(i)) {
					t.Fatalf("record %d was reported durable but is missing (%d records, dropped %d bytes)", i, len(s.Records()), len(s.Dropped))
				}
			}
			if compressed {
				if !s.Has("old-a") || !s.Has("old-b") || s.Records()[0].Key != "old-a" {
					t.Fatalf("the compressed part's records are not read first")
				}
				if b, _ := os.ReadFile(path + CompressedSuffix); !bytes.Equal(b, gz) {
					t.Fatalf("the compressed part was rewritten")
				}
			}
			if err := s.Append(rec("after")); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestSecondWriterIsRefused(t *testing.T) {
	for _, compressed := range []bool{false, true} {
		t.Run(fmt.Sprintf("compressed=%v", compressed), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			if compressed { // the lock is the compressed part's, before the plain file exists
				gzipLines(t, path+CompressedSuffix, line(t, "a"))
			}
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Open(path); !errors.Is(err, sys.ErrLocked) {
				t.Fatalf("second Open while the first is open: %v, want ErrLocked", err)
			}
			if err := s.Append(rec("b")); err != nil {
				t.Fatal(err)
			}
			if compressed { // still the same lock, now that the plain file exists
				if _, err := Open(path); !errors.Is(err, sys.ErrLocked) {
					t.Fatalf("second Open after the first appended: %v, want ErrLocked", err)
				}
			}
			s.Close()
			s2, err := Open(path)
			if err != nil {
				t.Fatalf("Open after Close: %v", err)
			}
			s2.Close()
		})
	}
}

// line is r's JSON line, newline included.
func line(t *testing.T, key string) string {
	t.Helper()
	r := rec(key)
	r.Time = time.Date(2026, 11, 21, 14, 5, 14, 0, time.UTC)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// gzipLines writes the lines to path as one gzip member, as gzip -9n
// does, and returns the file's bytes.
func gzipLines(t *testing.T, path string, lines ...string) []byte {
	t.Helper()
	b := gzipBytes(t, strings.Join(lines, ""))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

func gzipBytes(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// keys returns the records' keys in order.
func keys(rs []Record) []string {
	var k []string
	for _, r := range rs {
		k = append(k, r.Key)
	}
	return k
}

// A compressed store (path.gz, path absent or holding what was appended
// since) reads as one store, in order, whatever Open or Read finds.
func TestCompressedStore(t *testing.T) {
	a, b, c := "a", "b", "c"
	whole := gzipBytes(t, line(t, a)+line(t, b)+line(t, c))
	for _, tc := range []struct {
		name    string
		gz      []byte // the compressed part
		plain   *string
		want    []string // keys, oldest first
		dropped bool     // a torn line is reported
		err     string   // the error names this file:line (path and .gz stand for the store's files)
	}{
		{name: "compressed only", gz: whole, want: []string{a, b, c}},
		{name: "then plain", gz: gzipBytes(t, line(t, a)+line(t, b)), plain: ptr(line(t, c)), want: []string{a, b, c}},
		{name: "empty plain", gz: whole, plain: ptr(""), want: []string{a, b, c}},
		{name: "two members", gz: append(gzipBytes(t, line(t, a)), gzipBytes(t, line(t, b)+line(t, c))...), want: []string{a, b, c}},
		{name: "torn last line", gz: gzipBytes(t, line(t, a)+line(t, b)+`{"key":"c","ki`), want: []string{a, b}, dropped: true},
		{name: "torn in both", gz: gzipBytes(t, line(t, a)+`{"key":"b","ki`), plain: ptr(line(t, c) + `{"key":"d"`), want: []string{a, c}, dropped: true},
		{name: "member without its trailer", gz: whole[:len(whole)-8], want: []string{a, b, c}},
		{name: "empty file", gz: []byte{}, plain: ptr(line(t, a)), want: []string{a}},
		{name: "corrupt line", gz: gzipBytes(t, line(t, a)+"not json\n"+line(t, b)), err: ".gz:2:"},
		{name: "corrupt line in plain", gz: whole, plain: ptr(line(t, "d") + "{}\n"), err: "path:2:"},
		{name: "not gzip", gz: []byte(line(t, a)), err: ".gz"},
		{name: "plain copy kept beside", gz: whole, plain: ptr(line(t, a) + line(t, b) + line(t, c)), err: "path:1:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.jsonl")
			if err := os.WriteFile(path+CompressedSuffix, tc.gz, 0o644); err != nil {
				t.Fatal(err)
			}
			if tc.plain != nil {
				if err := os.WriteFile(path, []byte(*tc.plain), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			wantErr := strings.NewReplacer("path:", path+":", ".gz", path+".gz").Replace(tc.err)
			got, err := Read(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), wantErr) {
					t.Fatalf("Read: %v, want an error naming %s", err, wantErr)
				}
				if _, err := Open(path); err == nil || !strings.Contains(err.Error(), wantErr) {
					t.Fatalf("Open: %v, want an error naming %s", err, wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if !slices.Equal(keys(got), tc.want) {
				t.Fatalf("Read: keys %v, want %v", keys(got), tc.want)
			}
			s, err := Open(path)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if !slices.Equal(keys(s.Records()), tc.want) || (len(s.Dropped) > 0) != tc.dropped {
				t.Fatalf("Open: keys %v, dropped %q; want %v, dropped %v", keys(s.Records()), s.Dropped, tc.want, tc.dropped)
			}
			if _, err := os.Stat(path); (err == nil) != (tc.plain != nil) {
				t.Fatalf("Open created the plain file (or removed it): %v", err)
			}
			if err := s.Append(rec("new")); err != nil {
				t.Fatal(err)
			}
			s.Close()
			if b, _ := os.ReadFile(path + CompressedSuffix); !bytes.Equal(b, tc.gz) {
				t.Fatalf("the compressed part was rewritten")
			}
			s, err = Open(path)
			if err != nil {
				t.Fatalf("reopen after Append: %v", err)
			}
			defer s.Close()
			if want := append(slices.Clone(tc.want), "new"); !slices.Equal(keys(s.Records()), want) {
				t.Fatalf("reopened: keys %v, want %v", keys(s.Records()), want)
			}
		})
	}
}

func TestReadMissingStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
	if _, err := Read(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Read of a missing store: %v, want an error naming %s", err, path)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("Read created the store")
	}
}

func ptr(s string) *string { return &s }
