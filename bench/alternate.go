package bench

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gotune/gotune/internal/launch"
	"github.com/gotune/gotune/transports"
)

// Alternate is one of the transports a pair of ranks measures side by
// side (Spec.Alternates). Two configurations compared in separate pairs
// differ by whatever sets a fresh pair's speed for its life (on some
// hosts two streaming modes 1.4x apart, docs/performance.md); measured in
// one pair, repetition by repetition, they differ by their own paths.
type Alternate struct {
	Name      string             `json:"name"`
	Transport string             `json:"transport"`
	Options   transports.Options `json:"options,omitempty"`
}

// regionAlign is where each alternate's part of the segment starts: a huge
// page boundary, so that no two share a page.
const regionAlign = 2 << 20

// alternateRegions are the bounds of each alternate's part of a job's
// segment: part i is [bounds[i], bounds[i+1]), what its transport
// declares for ranks ranks under its options, and the last bound is the
// segment's size.
func alternateRegions(ranks int, alts []Alternate) (bounds []int, err error) {
	bounds = []int{0}
	for _, a := range alts {
		d, err := transports.Lookup(a.Transport)
		if err != nil {
			return nil, fmt.Errorf("alternate %s: %w", a.Name, err)
		}
		n, err := d.SharedBytes(ranks, a.Options)
		if err != nil {
			return nil, fmt.Errorf("alternate %s: %w", a.Name, err)
		}
		bounds = append(bounds, bounds[len(bounds)-1]+(n+regionAlign-1)/regionAlign*regionAlign)
	}
	return bounds, nil
}

// alternateNames lists the alternates' names, as a label.
func alternateNames(alts []Alternate) string {
	names := make([]string, len(alts))
	for i, a := range alts {
		names[i] = a.Name
	}
	return strings.Join(names, " | ")
}

// normalizeAlternates checks a spec with alternates: a pair of ranks on
// one node, host buffers, named and known transports; Transport becomes
// the first alternate's (what the rest of the engine looks up).
func (s *Spec) normalizeAlternates() error {
	switch {
	case s.Pattern.MultiRank() || s.Ranks > 2:
		return fmt.Errorf("alternates: pattern %s with %d ranks: only a pair's patterns run alternates", s.Pattern, s.Ranks)
	case s.InterNode():
		return fmt.Errorf("alternates: a pair on one node only")
	case s.UsesGPU() || s.GPULoad > 0:
		return fmt.Errorf("alternates: host buffers only")
	case s.Transport != "" && s.Transport != s.Alternates[0].Transport:
		return fmt.Errorf("alternates: transport %s is not the first alternate's (%s)", s.Transport, s.Alternates[0].Transport)
	}
	var seen []string
	for i, a := range s.Alternates {
		if a.Name == "" || slices.Contains(seen, a.Name) {
			return fmt.Errorf("alternates[%d]: name %q: each needs a name of its own", i, a.Name)
		}
		seen = append(seen, a.Name)
		if _, err := transports.Lookup(a.Transport); err != nil {
			return fmt.Errorf("alternate %s: %w", a.Name, err)
		}
		if err := checkOptions(a.Options); err != nil {
			return fmt.Errorf("alternate %s: %w", a.Name, err)
		}
	}
	s.Transport = s.Alternates[0].Transport
	return nil
}

// rankAlternates is the body of a rank measuring spec's alternates: each
// transport opened in its own part of the segment, one arena of buffers
// for all (the same pages under every alternate), then the sizes.
func rankAlternates(r *launch.Rank, spec Spec, st *stepper) (any, error) {
	bounds, err := alternateRegions(r.Size, spec.Alternates)
	if err != nil {
		return nil, err
	}
	if total := bounds[len(bounds)-1]; len(r.Segment) < total {
		return nil, fmt.Errorf("alternates: segment of %d bytes, need %d", len(r.Segment), total)
	}
	ts := make([]transports.Transport, 0, len(spec.Alternates))
	var unhooks []func()
	release := func(err error) error {
		for _, u := range unhooks {
			u()
		}
		for i, t := range ts {
			if cerr := t.Close(); cerr != nil {
				keepFirst(&err, fmt.Errorf("alternate %s: %w", spec.Alternates[i].Name, cerr))
			}
		}
		return err
	}
	for i, a := range spec.Alternates {
		st.start("starting transport %s (alternate %s)", a.Transport, a.Name)
		t, err := openIn(r, a.Transport, a.Options, r.Segment[bounds[i]:bounds[i+1]:bounds[i+1]])
		if err != nil {
			return nil, release(fmt.Errorf("alternate %s: %w", a.Name, err))
		}
		ts = append(ts, t)
	}
	st.start("allocating %s", buffersWhat(spec, r.ID))
	a, err := newArena(spec, r.ID, nil)
	if err != nil {
		return nil, release(err)
	}
	defer a.free() // after the transports' Close
	for _, t := range ts {
		unhooks = append(unhooks, a.hookInvalidation(t))
	}
	holdCollector()
	var out rankOutput
	points, err := measureAlternating(ts, spec, r.ID, a, r.Beat, st)
	if r.ID == 0 {
		out.Alternates = points
	}
	for i, t := range ts {
		for _, why := range gaveUp(t) {
			out.GaveUp = append(out.GaveUp, spec.Alternates[i].Name+": "+why)
		}
	}
	st.start("closing the alternates' transports")
	return out, release(err)
}

// measureAlternating measures every size through each transport of ts:
// repetition k of a size runs once through each, starting at alternate
// k mod len(ts), so that each runs first, and after each other, alike.
// The points carry the repetitions' values only (no per-iteration pass).
func measureAlternating(ts []transports.Transport, spec Spec, rank int, a *arena, beat func(), st *stepper) ([][]Point, error) {
	for i, t := range ts {
		if err := settlePass(t, rank, spec, a, beat, st); err != nil {
			return nil, fmt.Errorf("alternate %s: %w", spec.Alternates[i].Name, err)
		}
	}
	out := make([][]Point, len(ts))
	for si, size := range spec.Sizes {
		st.measure(spec, si)
		loops := make([]*loop, len(ts))
		elapsed := make([][]int64, len(ts))
		for i, t := range ts {
			loops[i] = newLoop(t, rank, spec, size, a)
		}
		for rep := range spec.Reps {
			for j := range ts {
				i := (rep + j) % len(ts)
				beat()
				ns, err := loops[i].timedPass()
				if err != nil {
					return nil, fmt.Errorf("alternate %s at %d bytes: %w", spec.Alternates[i].Name, size, err)
				}
				elapsed[i] = append(elapsed[i], ns)
			}
		}
		for i, l := range loops {
			out[i] = append(out[i], l.point(elapsed[i], nil))
		}
	}
	return out, nil
}
