package gpuload

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// The PTX is text the driver compiles at run time; here, with no driver,
// check what can be checked: header, entry, parameters, structure.
func TestPTXSanity(t *testing.T) {
	for _, want := range []string{
		".version 7.8", ".target sm_70", ".address_size 64",
		".visible .entry " + Entry + "(",
		"%globaltimer", "ld.volatile.global.u32", "atom.global.add.u32", "bar.sync",
	} {
		if !strings.Contains(PTX, want) {
			t.Errorf("PTX lacks %q", want)
		}
	}
	if got := len(regexp.MustCompile(`\.param \.u64 `).FindAllString(PTX, -1)); got != 3 {
		t.Errorf("%d u64 parameters, want 3 (flag, duration, done)", got)
	}
	if strings.Count(PTX, "{") != strings.Count(PTX, "}") || strings.Count(PTX, "(") != strings.Count(PTX, ")") {
		t.Error("unbalanced braces or parentheses")
	}
	// Every branch target is a label defined once.
	labels := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^(\$\w+):`).FindAllStringSubmatch(PTX, -1) {
		labels[m[1]]++
	}
	for _, m := range regexp.MustCompile(`bra(?:\.uni)?\s+(\$\w+);`).FindAllStringSubmatch(PTX, -1) {
		if labels[m[1]] != 1 {
			t.Errorf("branch to %s, defined %d times", m[1], labels[m[1]])
		}
	}
	// Registers used stay within the declared ranges.
	decl := map[string]int{}
	for _, m := range regexp.MustCompile(`\.reg \.\w+\s+%(\w+)<(\d+)>;`).FindAllStringSubmatch(PTX, -1) {
		n := 0
		for _, c := range m[2] {
			n = n*10 + int(c-'0')
		}
		decl[m[1]] = n
	}
	for _, m := range regexp.MustCompile(`%(p|r|rd)(\d+)\b`).FindAllStringSubmatch(PTX, -1) {
		n := 0
		for _, c := range m[2] {
			n = n*10 + int(c-'0')
		}
		if limit, ok := decl[m[1]]; !ok || n >= limit {
			t.Errorf("register %%%s%s outside its declaration %%%s<%d>", m[1], m[2], m[1], limit)
		}
	}
}

func TestGrid(t *testing.T) {
	for _, tc := range []struct {
		fraction         float64
		sms, perSM, want int
	}{
		{Full, 132, 16, 2112},    // H200: every slot of every SM
		{Partial, 132, 16, 1056}, // half the slots
		{None, 132, 16, 0},
		{0.3, 100, 10, 300}, // 0.3×1000 is 300.00000000000006 in floating point
		{0.001, 132, 16, 3}, // ceil(2.112)
		{1e-9, 132, 16, 1},  // any load is at least one block
		{0.5, 1, 1, 1},
		{1.5, 10, 2, 20}, // clamped
		{Full, 0, 16, 0},
		{Full, 132, 0, 0},
	} {
		if got := Grid(tc.fraction, tc.sms, tc.perSM); got != tc.want {
			t.Errorf("Grid(%v, %d, %d) = %d, want %d", tc.fraction, tc.sms, tc.perSM, got, tc.want)
		}
	}
}

func TestParseFraction(t *testing.T) {
	for in, want := range map[string]float64{
		"none": 0, "NONE": 0, "0": 0, "partial": 0.5, "full": 1, " Full ": 1,
		"0.25": 0.25, "1": 1, "25%": 0.25, "100%": 1,
	} {
		got, err := ParseFraction(in)
		if err != nil || got != want {
			t.Errorf("ParseFraction(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "most", "1.5", "-0.1", "150%", "NaN"} {
		if v, err := ParseFraction(bad); err == nil {
			t.Errorf("ParseFraction(%q) = %v, want an error", bad, v)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		ok   bool
	}{
		{Spec{Fraction: Full, Duration: time.Second}, true},
		{Spec{Fraction: Partial, Duration: time.Millisecond, Flag: 0x1000}, true},
		{Spec{Fraction: None, Duration: time.Second}, true},
		{Spec{Fraction: Full}, false},                            // unbounded
		{Spec{Fraction: Full, Duration: -time.Second}, false},    // unbounded
		{Spec{Fraction: Full, Duration: time.Hour}, false},       // over MaxDuration
		{Spec{Fraction: 1.01, Duration: time.Second}, false},     // over 1
		{Spec{Fraction: -0.01, Duration: time.Second}, false},    // under 0
		{Spec{Fraction: Full, Duration: MaxDuration}, true},      // the bound itself
		{Spec{Fraction: Full, Duration: MaxDuration + 1}, false}, // just over
	} {
		if err := tc.spec.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v, want ok=%v", tc.spec, err, tc.ok)
		}
	}
}
