package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/gotune/gotune/transports/all"
	"github.com/gotune/gotune/tuner/sweep"
)

// optionsDoc is the checked-in reference that gotune options --markdown
// writes (make docs).
const optionsDoc = "../../docs/options.md"

// docs/options.md is what the code says today.
func TestOptionsDocIsCurrent(t *testing.T) {
	var got bytes.Buffer
	if err := writeOptions(&got, true); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(optionsDoc, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(optionsDoc)
	if err != nil {
		t.Fatalf("%v (make docs writes it)", err)
	}
	if !bytes.Equal(got.Bytes(), want) {
		t.Errorf("docs/options.md is stale: run make docs (or go test ./cmd/gotune -run OptionsDoc -update)")
	}
}

// Every option and plan key says what it is; the plan keys are the ones a
// plan file may set.
func TestOptionsAreDocumented(t *testing.T) {
	n := 0
	for _, s := range all.OptionSets() {
		for _, o := range s.Options {
			n++
			if o.Type == "" || o.Help == "" {
				t.Errorf("%s: type %q, help %q", o.Key, o.Type, o.Help)
			}
		}
	}
	if n < 29 {
		t.Errorf("%d transport options listed; sm, cma, cudaipc, gpu, alloc and auto have at least 29", n)
	}
	keys := planKeys()
	for _, k := range keys {
		if k.help == "" || k.typ == "" || len(k.values) != len(builtInPlans) {
			t.Errorf("plan key %s: type %q, help %q, values %q", k.key, k.typ, k.help, k.values)
		}
	}
	plan := writePlanFile(t, keys)
	if _, err := sweep.LoadPlan(plan); err != nil {
		t.Errorf("a plan file setting every listed key to the quick plan's value: %v", err)
	}
}

// writePlanFile writes a plan that sets every key to the quick plan's
// value, as the reference prints it.
func writePlanFile(t *testing.T, keys []planKey) string {
	t.Helper()
	var b strings.Builder
	gpu := false
	for _, k := range keys {
		v := k.values[0]
		if v == "-" {
			continue
		}
		name, isGPU := strings.CutPrefix(k.key, "gpu.")
		if isGPU && !gpu {
			b.WriteString("gpu:\n")
			gpu = true
		}
		if isGPU {
			b.WriteString("  ")
		}
		if !strings.HasPrefix(v, "[") && k.typ != "int" && k.typ != "bool" {
			v = `"` + v + `"`
		}
		b.WriteString(name + ": " + v + "\n")
	}
	path := t.TempDir() + "/every-key.yaml"
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
