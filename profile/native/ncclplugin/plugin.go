package ncclplugin

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/gotune/gotune/internal/sys"
)

//go:embed csrc/tuner.c
var source []byte

// FileName is the plugin's file: NCCL_TUNER_PLUGIN names it by path.
const FileName = "libnccl-tuner-gotune.so"

// Symbols are the plugin structures it exports, one per NCCL tuner ABI:
// v4 (NCCL 2.24-2.27), v5 (2.28-2.29) and v6 (2.30).
var Symbols = []string{"ncclTunerPlugin_v4", "ncclTunerPlugin_v5", "ncclTunerPlugin_v6"}

// TableEnv names the table file the plugin reads (written by WriteTable),
// and StatsEnv a file its finalize appends one line of counts to.
const (
	TableEnv = "GOTUNE_NCCL_TABLE"
	StatsEnv = "GOTUNE_NCCL_TUNER_STATS"
)

// Build compiles the plugin with $CC (or cc) into dir/FileName, replacing
// it atomically, and returns its path. No compiler is sys.ErrNotSupported.
func Build(ctx context.Context, dir string) (string, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	compiler, err := exec.LookPath(cc)
	if err != nil {
		return "", fmt.Errorf("build NCCL tuner plugin: %w", sys.NotSupported("nccl-plugin", cc+" not found in PATH", err))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build NCCL tuner plugin: %w", err)
	}
	work, err := os.MkdirTemp(dir, ".nccl-plugin-")
	if err != nil {
		return "", fmt.Errorf("build NCCL tuner plugin: %w", err)
	}
	defer os.RemoveAll(work)
	src, obj := filepath.Join(work, "tuner.c"), filepath.Join(work, FileName)
	if err := os.WriteFile(src, source, 0o644); err != nil {
		return "", fmt.Errorf("build NCCL tuner plugin: %w", err)
	}
	cmd := exec.CommandContext(ctx, compiler, "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall", "-o", obj, src)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build NCCL tuner plugin with %s: %w\n%s", compiler, err, out)
	}
	dst := filepath.Join(dir, FileName)
	if err := os.Rename(obj, dst); err != nil {
		return "", fmt.Errorf("build NCCL tuner plugin: %w", err)
	}
	return dst, nil
}
