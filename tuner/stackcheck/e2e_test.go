package stackcheck

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotune/gotune/internal/sys"
	"github.com/gotune/gotune/internal/testutil"
)

// checkInstalled runs Check against the installed stack with path (""
// for none) and env, skipping (or, with GOTUNE_REQUIRE, failing) when the
// stack's tools are missing.
func checkInstalled(t *testing.T, stack, path string, env []string) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := Check(ctx, stack, path, env)
	if errors.Is(err, sys.ErrNotSupported) {
		testutil.SkipUnless(t, stack, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// writeFile writes text to a file called name in a fresh folder.
func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantRows checks each named row's status and used value ("*": any).
func wantRows(t *testing.T, r *Report, want map[string][2]string) {
	t.Helper()
	for _, row := range r.Rows {
		w, ok := want[row.Name]
		if !ok {
			continue
		}
		delete(want, row.Name)
		if string(row.Status) != w[0] || (w[1] != "*" && row.Used != w[1]) {
			t.Errorf("%s: status %q used %q, want %q %q", row.Name, row.Status, row.Used, w[0], w[1])
		}
	}
	for name := range want {
		t.Errorf("no row for %s", name)
	}
}

// TestStacksReal checks a file of text against each installed stack, with
// env in the caller's environment: values taken, overridden by the
// environment or differing, and a misspelt name each stack passes over in
// silence.
func TestStacksReal(t *testing.T) {
	for _, tc := range []struct {
		stack, name, text, env string
		rows                   map[string][2]string
		version                string // the prefix of the stack's version ("": no check of it and the warnings)
		more                   func(t *testing.T, r *Report)
	}{
		{
			stack: "openmpi", name: "openmpi-mca-params.conf",
			text: "btl_vader_eager_limit = 8192\nbtl_vader_fbox_max = 64\nbtl_vader_eager_limitt = 1\n",
			env:  "OMPI_MCA_btl_vader_fbox_max=16",
			rows: map[string][2]string{
				"btl_vader_eager_limit":  {"ok", "8192"},
				"btl_vader_fbox_max":     {"overridden", "16"},
				"btl_vader_eager_limitt": {"unknown", ""},
			},
			version: "Open MPI ",
			more: func(t *testing.T, r *Report) {
				// Open MPI says nothing about the unknown name.
				out, err := runTool(context.Background(), "openmpi", append(os.Environ(), "OMPI_MCA_mca_base_param_files="+r.File), "", "ompi_info", "--all", "--parsable")
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(out.stdout+out.stderr, "eager_limitt") {
					t.Errorf("ompi_info mentions the unknown name")
				}
			},
		},
		{
			stack: "mpich", name: "mpich.env",
			text: "# tuned\nexport MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS=128\nMPIR_CVAR_CH4_IPC_XPMEM_P2P_THRESHOLD=8192\nMPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELL=5\n",
			env:  "MPIR_CVAR_CH4_IPC_XPMEM_P2P_THRESHOLD=4096",
			rows: map[string][2]string{
				"MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELLS": {"ok", "128"},
				"MPIR_CVAR_CH4_IPC_XPMEM_P2P_THRESHOLD":    {"differs", "8192"},
				"MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_NUM_CELL":  {"unknown", ""},
			},
			version: "MPICH ",
			more: func(t *testing.T, _ *Report) {
				// A value MPICH cannot parse stops MPI_T: trouble, with its message.
				path := writeFile(t, "bad.env", "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE=64K\n")
				if _, err := Check(context.Background(), "mpich", path, os.Environ()); err == nil || !strings.Contains(err.Error(), "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE") {
					t.Errorf("bad value: err = %v", err)
				}
			},
		},
		{
			stack: "ucx", name: "ucx.conf",
			text: "# tuned\nUCX_RNDV_THRESH=16k\nUCX_TLS=sm,self\nUCX_FOOBAR=1\n[some CPU]\nUCX_MM_FIFO_SIZE=128\n",
			env:  "UCX_TLS=posix,self",
			rows: map[string][2]string{
				"UCX_RNDV_THRESH":  {"ok", "16K"},
				"UCX_TLS":          {"overridden", "posix,self"},
				"UCX_FOOBAR":       {"unknown", ""},
				"UCX_MM_FIFO_SIZE": {"ok", "128"},
			},
			version: "UCX ",
		},
		{
			stack: "mimalloc", name: "mimalloc.env",
			text: "MIMALLOC_DECOMMIT_DELAY=50\nMIMALLOC_PAGE_RESET=1\nMIMALLOC_PURGE_DELAY=10\n",
			env:  "MIMALLOC_PAGE_RESET=0",
			rows: map[string][2]string{
				"MIMALLOC_DECOMMIT_DELAY": {"ok", "50"},
				"MIMALLOC_PAGE_RESET":     {"differs", "1"},
				// mimalloc 2.1's name, unknown to Debian 12's 2.0.9.
				"MIMALLOC_PURGE_DELAY": {"unknown", ""},
			},
		},
	} {
		t.Run(tc.stack, func(t *testing.T) {
			r := checkInstalled(t, tc.stack, writeFile(t, tc.name, tc.text), append(os.Environ(), tc.env))
			wantRows(t, r, tc.rows)
			if tc.version != "" && (len(r.Warnings) != 2 || !strings.HasPrefix(r.Version, tc.version)) {
				t.Errorf("version %q, warnings %q", r.Version, r.Warnings)
			}
			if tc.more != nil {
				tc.more(t, r)
			}
		})
	}
}

// TestBuiltinListsReal: without a file every stack reports a value for the
// parameters gotune tunes.
func TestBuiltinListsReal(t *testing.T) {
	for _, stack := range Stacks() {
		t.Run(stack, func(t *testing.T) {
			r := checkInstalled(t, stack, "", os.Environ())
			if len(r.Rows) < 3 || r.Problems() {
				t.Errorf("%d rows, warnings %q", len(r.Rows), r.Warnings)
			}
		})
	}
}
