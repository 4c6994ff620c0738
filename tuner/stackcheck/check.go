package stackcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gotune/gotune/internal/sys"
)

// toolTimeout bounds every tool the check runs; each takes well under a
// second here, so a tool still running after this is stuck.
const toolTimeout = 60 * time.Second

// Check checks stack ("openmpi", "mpich", "ucx", "mimalloc", "nccl") with the tuned
// file at path loaded as its users load it, in the environment env
// (os.Environ's form; the caller's). With path "" it reports the values in
// use for the parameters gotune tunes. A missing tool matches
// sys.ErrNotSupported; a file that does not parse, or a tool that fails, is
// an error naming them.
func Check(ctx context.Context, stack, path string, env []string) (*Report, error) {
	if _, err := lookup(stack); err != nil {
		return nil, err
	}
	var p *Parsed
	if path != "" {
		abs, err := absPath(path)
		if err != nil {
			return nil, err
		}
		parsed, err := ParseFile(stack, abs)
		if err != nil {
			return nil, err
		}
		p = &parsed
	}
	var r *Report
	var err error
	switch stack {
	case "openmpi":
		r, err = checkOpenMPI(ctx, p, env)
	case "mpich":
		r, err = checkMPICH(ctx, p, env)
	case "ucx":
		r, err = checkUCX(ctx, p, env)
	case "mimalloc":
		r, err = checkMimalloc(ctx, p, env)
	case "nccl":
		r, err = checkNCCL(ctx, p, env)
	}
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", stack, err)
	}
	if p != nil {
		for _, s := range p.Foreign {
			r.notef("%s: %s is not a %s variable: not checked", r.at(s.Line), s.Name, strings.TrimSuffix(lookupPrefix(stack), "_"))
		}
	}
	return r, nil
}

func lookupPrefix(stack string) string {
	st, _ := lookup(stack)
	return st.prefix
}

// toolOutput is what a tool wrote.
type toolOutput struct {
	stdout, stderr string
}

// runTool runs name with args in env (and dir, if not ""), bounded by
// toolTimeout. A tool not in PATH is sys.ErrNotSupported naming capability;
// a failing tool is an error carrying its stderr, returned with what it
// wrote.
func runTool(ctx context.Context, capability string, env []string, dir, name string, args ...string) (toolOutput, error) {
	bin, err := exec.LookPath(name)
	if err != nil {
		return toolOutput{}, sys.NotSupported(capability, name+" not found in PATH", err)
	}
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env, cmd.Dir = env, dir
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	out := toolOutput{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		if ctx.Err() != nil {
			err = errors.Join(err, ctx.Err())
		}
		return out, fmt.Errorf("%s %s: %w%s", name, strings.Join(args, " "), err, indent(out.stderr))
	}
	return out, nil
}

// indent formats a tool's message for an error, its last lines only.
func indent(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > 8 {
		lines = lines[len(lines)-8:]
	}
	return "\n\t" + strings.Join(lines, "\n\t")
}
