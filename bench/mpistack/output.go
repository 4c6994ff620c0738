package mpistack

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// sizeOutput is what anchor.c printed for one message size.
type sizeOutput struct {
	size, iters, warmup int
	reps                []float64 // one value per repetition
	perIter             []float64 // one value per iteration of the distribution pass
}

// parser checks anchor.c's output line by line against what was asked.
type parser struct {
	sizes []int // requested, in order
	reps  int   // requested per size
	out   []sizeOutput
	ended bool
}

// parseOutput reads anchor.c's output for the given sizes and repetitions.
// Every size must appear in order, complete, followed by the end marker; the
// first line that breaks the format is reported with its number.
func parseOutput(r io.Reader, sizes []int, reps int) ([]sizeOutput, error) {
	p := &parser{sizes: sizes, reps: reps}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		if err := p.line(sc.Text()); err != nil {
			return nil, fmt.Errorf("anchor output line %d: %w: %q", n, err, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read anchor output after line %d: %w", n, err)
	}
	if !p.ended {
		if err := p.complete(); err != nil {
			return nil, fmt.Errorf("anchor output ends at line %d: %w", n, err)
		}
		return nil, fmt.Errorf("anchor output ends at line %d without its end marker: missing sizes %v",
			n, p.sizes[len(p.out):])
	}
	return p.out, nil
}

func (p *parser) line(text string) error {
	if p.ended {
		return fmt.Errorf("text after the end marker")
	}
	f := strings.Fields(text)
	if len(f) == 0 {
		return fmt.Errorf("empty line")
	}
	switch f[0] {
	case "size":
		return p.sizeLine(f)
	case "rep":
		return p.repLine(f)
	case "iter":
		return p.iterLine(f)
	case "end":
		if len(f) != 1 {
			return fmt.Errorf("end marker with arguments")
		}
		if err := p.complete(); err != nil {
			return err
		}
		if len(p.out) < len(p.sizes) {
			return fmt.Errorf("end marker before sizes %v", p.sizes[len(p.out):])
		}
		p.ended = true
		return nil
	default:
		return fmt.Errorf("unknown record %q", f[0])
	}
}

// sizeLine: size SIZE ITERS WARMUP.
func (p *parser) sizeLine(f []string) error {
	if len(f) != 4 {
		return fmt.Errorf("size record wants 3 fields, has %d", len(f)-1)
	}
	v, err := ints(f[1:])
	if err != nil {
		return err
	}
	if err := p.complete(); err != nil {
		return err
	}
	if len(p.out) == len(p.sizes) {
		return fmt.Errorf("size %d was not asked for", v[0])
	}
	if want := p.sizes[len(p.out)]; v[0] != want {
		return fmt.Errorf("size %d where size %d was expected", v[0], want)
	}
	if v[1] < 1 {
		return fmt.Errorf("size %d: %d iterations", v[0], v[1])
	}
	p.out = append(p.out, sizeOutput{size: v[0], iters: v[1], warmup: v[2],
		reps: make([]float64, 0, p.reps), perIter: make([]float64, 0, v[1])})
	return nil
}

// repLine: rep SIZE REP VALUE.
func (p *parser) repLine(f []string) error {
	cur, err := p.record(f, 3)
	if err != nil {
		return err
	}
	rep, err := strconv.Atoi(f[2])
	if err != nil {
		return fmt.Errorf("repetition number: %w", err)
	}
	if rep != len(cur.reps) || rep >= p.reps {
		return fmt.Errorf("repetition %d out of order (next is %d of %d)", rep, len(cur.reps), p.reps)
	}
	return appendMeasurement(&cur.reps, f[3])
}

// iterLine: iter SIZE VALUE.
func (p *parser) iterLine(f []string) error {
	cur, err := p.record(f, 2)
	if err != nil {
		return err
	}
	if len(cur.perIter) == cur.iters {
		return fmt.Errorf("more than %d iterations", cur.iters)
	}
	return appendMeasurement(&cur.perIter, f[2])
}

// record checks that the record f has fields fields after its name, and
// returns the size being read, which its first field must name.
func (p *parser) record(f []string, fields int) (*sizeOutput, error) {
	if len(f) != fields+1 {
		return nil, fmt.Errorf("%s record wants %d fields, has %d", f[0], fields, len(f)-1)
	}
	return p.current(f[1])
}

// appendMeasurement appends the measurement in field to values.
func appendMeasurement(values *[]float64, field string) error {
	v, err := measurement(field)
	if err != nil {
		return err
	}
	*values = append(*values, v)
	return nil
}

// current returns the size being read, which field must name.
func (p *parser) current(field string) (*sizeOutput, error) {
	size, err := strconv.Atoi(field)
	if err != nil {
		return nil, fmt.Errorf("size: %w", err)
	}
	if len(p.out) == 0 {
		return nil, fmt.Errorf("record before any size record")
	}
	cur := &p.out[len(p.out)-1]
	if size != cur.size {
		return nil, fmt.Errorf("record for size %d inside size %d", size, cur.size)
	}
	return cur, nil
}

// complete checks that the size being read, if any, has all its values.
func (p *parser) complete() error {
	if len(p.out) == 0 {
		return nil
	}
	cur := p.out[len(p.out)-1]
	if len(cur.reps) != p.reps {
		return fmt.Errorf("size %d has %d of %d repetitions", cur.size, len(cur.reps), p.reps)
	}
	if len(cur.perIter) != cur.iters {
		return fmt.Errorf("size %d has %d of %d iteration values", cur.size, len(cur.perIter), cur.iters)
	}
	return nil
}

func ints(fields []string) ([]int, error) {
	v := make([]int, len(fields))
	for i, s := range fields {
		n, err := strconv.Atoi(s)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, fmt.Errorf("negative count %d", n)
		}
		v[i] = n
	}
	return v, nil
}

// measurement parses a value, which must be finite and not negative.
func measurement(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("value %v is not a finite, non-negative measurement", v)
	}
	return v, nil
}
