package sm_test

import (
	"os/exec"
	"regexp"
	"testing"
)

// The blocking calls' fast paths promise calls that inline (their
// comments say so): a cold path grown into one of these functions puts a
// call back on every message. The compiler's own report is the judge.
func TestHotPathsInline(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("needs the go tool to ask the compiler: %v", err)
	}
	out, err := exec.Command(goTool, "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	for _, fn := range []string{
		`\(\*box\)\.due`, `\(\*box\)\.turn`, `\(\*box\)\.taken`,
		`\(\*consumer\)\.peek`, `\(\*Endpoint\)\.peerOf`, `\(\*Endpoint\)\.closePacks`,
		`\(\*Endpoint\)\.startProgressFor`, `\(\*Endpoint\)\.await`, `\(\*Endpoint\)\.alone`,
	} {
		if !regexp.MustCompile(`can inline ` + fn + `\b`).Match(out) {
			t.Errorf("%s no longer inlines: move its cold path out of line", fn)
		}
	}
}
