package importer

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"strconv"
	"strings"

	"github.com/gotune/gotune/bench"
	"github.com/gotune/gotune/internal/hostinfo"
)

// Helpers shared by the parsers: every parser reports bad input as a
// *LineError and reads sizes and values with the same rules.

// lineErrorf is a *LineError at line (1-based; 0: the whole file) of the
// file name.
func lineErrorf(name string, line int, format string, args ...any) error {
	return &LineError{File: name, Line: line, Err: fmt.Errorf(format, args...)}
}

// nonBlank yields each line that is not blank, trimmed, with its number
// (1-based).
func nonBlank(lines []string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		for i, l := range lines {
			if s := strings.TrimSpace(l); s != "" && !yield(i+1, s) {
				return
			}
		}
	}
}

// parseBytes reads a message size in bytes: a decimal integer, 0 or more,
// that fits an int.
func parseBytes(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a whole number of bytes", s)
	}
	return n, nil
}

// parseMeasure reads a measured value: a finite decimal number, 0 or
// more (tools print times and rates; a NaN or a negative one is a broken
// row, not a measurement).
func parseMeasure(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 0, fmt.Errorf("value %q: out of range", s)
		}
		return 0, fmt.Errorf("value %q: not a number", s)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("value %q: want a finite number, 0 or more", s)
	}
	return v, nil
}

// singleRunPoint is a size's point of a file that holds one run: the
// tool's one value is the only sample and the median (no interval: one
// sample has none).
func singleRunPoint(size int, unit string, v float64) bench.Point {
	return bench.Point{Size: size, Unit: unit, Samples: []float64{v}, Median: v}
}

// withLibrary returns p with Libraries[lib] = version in a map of its own,
// so that Results built from one header share no map.
func withLibrary(p hostinfo.Provenance, lib, version string) hostinfo.Provenance {
	libs := make(map[string]string, len(p.Libraries)+1)
	for k, v := range p.Libraries {
		libs[k] = v
	}
	if version != "" {
		libs[lib] = version
	}
	if len(libs) == 0 {
		libs = nil
	}
	p.Libraries = libs
	return p
}
