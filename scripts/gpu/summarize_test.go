// Package gpuscripts has no Go code: its test runs the Python tests of the
// GPU runner's scripts, so that go test ./... (make test, CI) covers them.
package gpuscripts

import (
	"os/exec"
	"testing"

	"github.com/gotune/gotune/internal/testutil"
)

// summarize.py's golden test (python3 summarize_test.py --update rewrites
// its golden file).
func TestSummarize(t *testing.T) {
	python, err := exec.LookPath("python3")
	testutil.SkipUnless(t, "python3", err)
	out, err := exec.Command(python, "summarize_test.py").CombinedOutput()
	if err != nil {
		t.Fatalf("python3 summarize_test.py: %v\n%s", err, out)
	}
}
