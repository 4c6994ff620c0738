package stackcheck

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/sys"
)

// fakeNCCL makes the check read log instead of running NCCL, and records
// the environment the ranks would have had.
func fakeNCCL(t *testing.T, log string, err error) *[]string {
	t.Helper()
	var got []string
	old := runNCCL
	runNCCL = func(_ context.Context, env []string, _ string) (string, error) {
		got = env
		return log, err
	}
	t.Cleanup(func() { runNCCL = old })
	return &got
}

// What NCCL logged it read decides every line of nccl.conf: taken,
// beaten by the environment, never read, a blank or a CR that NCCL keeps,
// a second line of a name (NCCL keeps the first), a CR NCCL dropped, a
// value NCCL read otherwise; the plugin's lines are notes.
func TestCheckNCCL(t *testing.T) {
	log, err := os.ReadFile("testdata/nccl.log")
	if err != nil {
		t.Fatal(err)
	}
	env := fakeNCCL(t, string(log), nil)
	r, err := Check(context.Background(), "nccl", "testdata/nccl.conf", []string{"NCCL_PROTO=Simple", "NCCL_DEBUG=WARN", "HOME=/root"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != "NCCL 2.28.3+cuda12.9" {
		t.Errorf("version %q", r.Version)
	}
	want := map[int]Status{4: OK, 5: Overridden, 6: Unknown, 7: NotTaken, 8: OK, 9: Overridden, 10: OK, 11: NotTaken}
	for _, row := range r.Rows {
		if s, ok := want[row.Line]; !ok || s != row.Status {
			t.Errorf("line %d %q=%q: %q (used %q from %q), want %q", row.Line, row.Name, row.File, row.Status, row.Used, row.Source, s)
		}
		delete(want, row.Line)
	}
	if len(want) > 0 {
		t.Errorf("no rows for lines %v", want)
	}
	if !r.Problems() || !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "Using gotune (v5)") }) ||
		!slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "dropped the line's CR") }) {
		t.Errorf("warnings %q, notes %q: want warnings and the plugin's load line", r.Warnings, r.Notes)
	}
	for _, kv := range []string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,ENV,TUNING", "NCCL_PROTO=Simple"} {
		if !slices.Contains(*env, kv) {
			t.Errorf("the ranks' environment lacks %s: %q", kv, *env)
		}
	}
	if slices.Contains(*env, "NCCL_DEBUG=WARN") || !slices.ContainsFunc(*env, func(kv string) bool {
		return strings.HasPrefix(kv, "NCCL_CONF_FILE=") && strings.HasSuffix(kv, "testdata/nccl.conf")
	}) {
		t.Errorf("the ranks' environment: %q; want NCCL_CONF_FILE naming the file and the caller's NCCL_DEBUG replaced", *env)
	}
}

// Without a file the check lists what NCCL uses for the variables gotune
// tunes; without NCCL or GPUs the check says so.
func TestCheckNCCLWithoutFile(t *testing.T) {
	log, err := os.ReadFile("testdata/nccl.log")
	if err != nil {
		t.Fatal(err)
	}
	fakeNCCL(t, string(log), nil)
	r, err := Check(context.Background(), "nccl", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, row := range r.Rows {
		got[row.Name] = row.Used + " from " + row.Source
	}
	if got["NCCL_BUFFSIZE"] != "8388608 from environment" || got["NCCL_MIN_CTAS"] != " from NCCL's default" {
		t.Errorf("rows %v", got)
	}
	fakeNCCL(t, "", sys.NotSupported("nccl", "no GPU", nil))
	if _, err := Check(context.Background(), "nccl", "", nil); !errors.Is(err, sys.ErrNotSupported) {
		t.Errorf("without NCCL: %v, want not supported", err)
	}
}
