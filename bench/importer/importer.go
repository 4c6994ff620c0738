package importer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/gotune/gotune/bench"
)

// Parser reads one tool's output.
type Parser struct {
	// Tool names the tool as results record it: "osu", "imb",
	// "nccl-tests", "ucx_perftest", "perftest".
	Tool string
	// Detect reports whether lines (a file's first lines, at most
	// headLines) are this tool's output.
	Detect func(lines []string) bool
	// Parse reads a whole file. name is the file's name for errors, which
	// are *LineError where a line is at fault.
	Parse func(name string, lines []string) ([]bench.Result, error)
}

// headLines is how many leading lines Detect sees.
const headLines = 40

var parsers []Parser

// register adds a parser; each tool's file registers its own.
func register(p Parser) { parsers = append(parsers, p) }

// Tools lists the tools Parse recognises.
func Tools() []string {
	var names []string
	for _, p := range parsers {
		names = append(names, p.Tool)
	}
	return names
}

// LineError is bad input at a line of a file (Line 0: the file as a whole).
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// ErrUnknownTool is returned for a file no parser recognises.
var ErrUnknownTool = errors.New("not the output of a known tool")

// ErrNoResults is returned for a file that is a known tool's output but
// holds no measurement.
var ErrNoResults = errors.New("no measurements")

// Parse detects the tool that wrote data and reads its results. name is
// used in errors.
func Parse(name string, data []byte) (tool string, results []bench.Result, err error) {
	lines, err := splitLines(data)
	if err != nil {
		return "", nil, &LineError{File: name, Err: err}
	}
	head := lines[:min(len(lines), headLines)]
	for _, p := range parsers {
		if !p.Detect(head) {
			continue
		}
		results, err := p.Parse(name, lines)
		if err != nil {
			return p.Tool, nil, err
		}
		if len(results) == 0 {
			return p.Tool, nil, &LineError{File: name, Err: fmt.Errorf("%s output: %w", p.Tool, ErrNoResults)}
		}
		return p.Tool, results, nil
	}
	return "", nil, &LineError{File: name, Err: fmt.Errorf("%w (want one of %s)", ErrUnknownTool, strings.Join(Tools(), ", "))}
}

// File reads and parses the file at path.
func File(path string) (tool string, results []bench.Result, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", nil, fmt.Errorf("import: %w", err)
	}
	return Parse(path, data)
}

// splitLines splits text into lines without their line ends; binary input
// (a NUL byte) is refused.
func splitLines(data []byte) ([]string, error) {
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, errors.New("binary data, not a tool's text output")
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, strings.TrimRight(sc.Text(), "\r"))
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return lines, nil
}
