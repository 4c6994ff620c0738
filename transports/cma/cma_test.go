package cma_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/transports/cma"
)

func TestMain(m *testing.M) {
	// Rank 1 makes itself non-dumpable; rank 0 checks CMA without
	// CAP_SYS_PTRACE: the kernel must refuse rank 0's read.
	launch.Register("cma-denied", func(r *launch.Rank) (any, error) {
		env := transports.Env{Rank: r.ID, Size: r.Size, PIDs: r.PIDs, Segment: r.Segment}
		t, err := cma.New(env)
		if err != nil {
			return nil, err
		}
		if r.ID == 1 {
			if err := sys.SetDumpable(false); err != nil {
				return nil, err
			}
			return nil, cma.Check(t, env)
		}
		return nil, sys.WithoutPtraceCapability(func() error { return cma.Check(t, env) })
	})
	launch.MaybeRunRank()
	os.Exit(m.Run())
}

func segmentBytes(t *testing.T) int {
	d, err := transports.Lookup("cma")
	if err != nil {
		t.Fatal(err)
	}
	n, err := d.SharedBytes(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPermissionDeniedIsNotSupported(t *testing.T) {
	_, err := launch.Run(context.Background(), launch.Job{Kind: "cma-denied", Size: 2, SegmentBytes: segmentBytes(t)}, launch.Hooks{})
	if !errors.Is(err, transports.ErrNotSupported) {
		t.Fatalf("got %v, want an error matching ErrNotSupported", err)
	}
	if !strings.Contains(err.Error(), "process_vm_readv") || !strings.Contains(err.Error(), "ptrace") {
		t.Errorf("error does not say what and why: %v", err)
	}
}

func TestParseParams(t *testing.T) {
	cases := []struct {
		opts transports.Options
		want string
	}{
		{nil, ""},
		{transports.Options{"cma.mode": "push", "cma.chunk": "64K", "cma.threshold": "16K"}, ""},
		{transports.Options{"cma.mode": "pull-ish"}, `cma.mode="pull-ish"`},
		{transports.Options{"cma.threshold": "4096"}, "cma.threshold=4096"},
		{transports.Options{"cma.chunk": "lots"}, `cma.chunk="lots"`},
	}
	for _, c := range cases {
		p, err := cma.ParseParams(c.opts, 4096)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.opts, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: got %v, want error containing %q", c.opts, err, c.want)
		case c.want == "" && c.opts == nil && (!p.Pull || p.Threshold != 4097 || p.Chunk != 0):
			t.Errorf("defaults: %+v", p)
		}
	}
}
