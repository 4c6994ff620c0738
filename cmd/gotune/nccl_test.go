package main

import (
	"debug/elf"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotune/gotune/profile/native/ncclplugin"
)

// gotune nccl plugin builds a library exporting every tuner ABI and says
// how to load it; a bad table is refused naming its line.
func TestNCCLPluginCommand(t *testing.T) {
	dir := t.TempDir()
	table := filepath.Join(dir, "tuner.table")
	if err := os.WriteFile(table, []byte("allreduce 0 65535 2 tree ll 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, "nccl", "plugin", "-o", dir, "--table", table)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	so := filepath.Join(dir, ncclplugin.FileName)
	for _, want := range []string{"table " + table + ": 1 rules", "NCCL_TUNER_PLUGIN=" + so, ncclplugin.TableEnv + "=" + table} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	f, err := elf.Open(so)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range ncclplugin.Symbols {
		if !slices.ContainsFunc(syms, func(s elf.Symbol) bool { return s.Name == want && s.Section != elf.SHN_UNDEF }) {
			t.Errorf("%s does not export %s", so, want)
		}
	}
	if err := os.WriteFile(table, []byte("# fine\nallreduce 0 65535 2 tree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, "nccl", "plugin", "-o", dir, "--table", table); code == 0 || !strings.Contains(stderr, table+":2:") {
		t.Errorf("a bad table: exit %d, stderr %q; want an error naming %s:2", code, stderr, table)
	}
}
