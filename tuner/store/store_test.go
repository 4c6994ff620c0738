package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

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
// durable is there, nothing is corrupt, and the store appends again.
func TestKilledWriterLosesNothingFinished(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.jsonl")
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
	if err := s.Append(rec("after")); err != nil {
		t.Fatal(err)
	}
}

func TestSecondWriterIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); !errors.Is(err, sys.ErrLocked) {
		t.Fatalf("second Open while the first is open: %v, want ErrLocked", err)
	}
	s.Close()
	s2, err := Open(path)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	s2.Close()
}
