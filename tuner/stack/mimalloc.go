package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/bench/mpistack"
	"github.com/gotune/gotune/internal/sys"
)

// MimallocLib is the library the ranks preload: Debian 12's libmimalloc2.0
// (mimalloc 2.0.9) installs it as /usr/lib/<triplet>/libmimalloc.so.2, a
// link to libmimalloc.so.2.0, which ld.so finds by this name.
const MimallocLib = "libmimalloc.so.2"

// Mimalloc tunes mimalloc's purge policy for ranks that preload it,
// measured through Open MPI (ob1 over vader, mpistack.OpenMPI) on the alloc
// pattern, where every message's buffer is malloc'ed and freed. The values
// are loaded as sourcing mimalloc.env loads them: LD_PRELOAD=MimallocLib and
// MIMALLOC_NAME=value in the launcher's environment, which the ranks
// inherit.
//
// Every value, the defaults included, is measured with mimalloc preloaded:
// the profile's mimalloc entry says how to run mimalloc, not whether to.
// glibc's malloc is not weighed, since "preload or not" is no mimalloc
// option: the file cannot express it (a MIMALLOC_ line does nothing
// without the preload) and the other parameters mean nothing without it.
type Mimalloc struct {
	// Params replaces the built-in space when set (tests weigh less).
	Params []Param
	// Hazards bounds the hazard runs (zero: anchor's defaults).
	Hazards mpistack.CheckOptions
	binary  string // anchor.c built with mpicc.openmpi by Prepare
	version string // mimalloc's, from its mi_version() in a preloading process
}

// Name is the profile's name for the stack.
func (*Mimalloc) Name() string { return "mimalloc" }

// Prepare builds the reference benchmark with Open MPI's compiler wrapper
// and asks a process that preloads MimallocLib for mimalloc's version; a
// library ld.so cannot preload matches sys.ErrNotSupported.
func (m *Mimalloc) Prepare(ctx context.Context, dir string) error {
	build := mpistack.OpenMPI("mimalloc build")
	bin, err := mpistack.Build(ctx, build, filepath.Join(dir, "mimalloc"))
	if err != nil {
		return err
	}
	v, err := mimallocVersion(ctx, build.MPICC, filepath.Join(dir, "mimalloc"), MimallocLib)
	if err != nil {
		return err
	}
	m.binary, m.version = bin, v
	return nil
}

// Space: when freed pages go back to the kernel (decommit_delay, per span
// of a segment), when whole free segments do (segment_decommit_delay),
// whether anything does (allow_decommit), and huge pages for segments
// (large_os_pages), the counterparts of gotune's alloc.purge, alloc.delay
// and alloc.thp. Values[0] is 2.0.9's default (MIMALLOC_VERBOSE=1 prints
// them). Not weighed: a purge at every free (decommit_delay=0, MADV_DONTNEED
// on each: 2-6x slower on this churn in a spot check here), page_reset
// (MADV_FREE on every freed page: 1.6-4.6x slower) and eager_commit (commit
// is an mprotect, paid once: the churn reuses committed memory).
func (m *Mimalloc) Space() []Param {
	if m.Params != nil {
		return m.Params
	}
	sizes := []int{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}
	return []Param{
		{Name: "decommit_delay", Values: []string{"25", "250"}, Pattern: bench.AllocChurn, Sizes: sizes},
		{Name: "segment_decommit_delay", Values: []string{"500", "5000"}, Pattern: bench.AllocChurn, Sizes: sizes},
		{Name: "allow_decommit", Values: []string{"1", "0"}, Pattern: bench.AllocChurn, Sizes: sizes},
		{Name: "large_os_pages", Values: []string{"0", "1"}, Pattern: bench.AllocChurn, Sizes: sizes},
	}
}

// loaded is Open MPI with mimalloc preloaded and params as MIMALLOC_
// variables, as `set -a; . mimalloc.env` and LD_PRELOAD set them. 2.0.9
// reads MIMALLOC_NAME for option name (decommit_delay); an unknown name
// (2.1's purge_delay) is ignored without a word.
func (m *Mimalloc) loaded(label string, params map[string]string) mpistack.Stack {
	st := mpistack.OpenMPI("mimalloc " + label)
	st.Env = append(st.Env, "LD_PRELOAD="+MimallocLib)
	st.Env = append(st.Env, envLines("mimalloc", params)...)
	return st
}

// Contender measures with params loaded; the result's provenance names
// mimalloc's version beside Open MPI's.
func (m *Mimalloc) Contender(_, label string, params map[string]string) mpistack.Contender {
	return mpistack.Contender{Label: "mimalloc " + label, Run: func(ctx context.Context, spec bench.Spec) (bench.Result, error) {
		res, err := mpistack.Run(ctx, m.loaded(label, params), m.binary, spec)
		if err != nil {
			return res, err
		}
		if res.Provenance.Libraries == nil {
			res.Provenance.Libraries = map[string]string{}
		}
		res.Provenance.Libraries["mimalloc"] = m.version
		return res, nil
	}}
}

// Check runs the stack hazards through Open MPI with params loaded.
func (m *Mimalloc) Check(ctx context.Context, _ string, params map[string]string) error {
	return mpistack.Check(ctx, m.loaded("check", params), m.binary, checkSizes, m.Hazards)
}

// versionSource prints the version of the mimalloc loaded into the process,
// found by its mi_version() symbol (major*100 + minor*10 + patch in 2.0),
// and fails where no mimalloc is loaded.
const versionSource = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int main(void)
{
    int (*version)(void);
    *(void **)&version = dlsym(RTLD_DEFAULT, "mi_version");
    if (version == NULL) {
        fputs("no mi_version: mimalloc is not loaded\n", stderr);
        return 1;
    }
    int v = version();
    printf("%d.%d.%d\n", v / 100, v / 10 % 10, v % 10);
    return 0;
}
`

var mimallocVersionLine = regexp.MustCompile(`^\d+\.\d+\.\d+$`)

// mimallocVersion builds versionSource with cc under dir and runs it with
// lib preloaded: the version proves ld.so preloads the library.
func mimallocVersion(ctx context.Context, cc, dir, lib string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("mimalloc version: %w", err)
	}
	src, bin := filepath.Join(dir, "mi_version.c"), filepath.Join(dir, "mi_version")
	if err := os.WriteFile(src, []byte(versionSource), 0o644); err != nil {
		return "", fmt.Errorf("mimalloc version: %w", err)
	}
	if out, err := exec.CommandContext(ctx, cc, "-std=c11", "-Wall", "-Wextra", "-o", bin, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("mimalloc version: build with %s: %w: %s", cc, err, bytes.TrimSpace(out))
	}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	// ld.so only warns about a library it cannot preload and runs the
	// program without it.
	if bytes.Contains(stderr.Bytes(), []byte("cannot be preloaded")) {
		return "", sys.NotSupported("mimalloc", lib+" cannot be preloaded (Debian: apt install libmimalloc2.0)",
			errors.New(strings.TrimSpace(stderr.String())))
	}
	if err != nil {
		return "", fmt.Errorf("mimalloc version: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	v := strings.TrimSpace(stdout.String())
	if !mimallocVersionLine.MatchString(v) {
		return "", fmt.Errorf("mimalloc version: %q is no version", v)
	}
	return v, nil
}

// ConfirmPattern: mimalloc's settings act where buffers are allocated per
// message, so its file is confirmed on that churn, not on plain bandwidth.
func (*Mimalloc) ConfirmPattern() bench.Pattern { return bench.AllocChurn }
