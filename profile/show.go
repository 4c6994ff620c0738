package profile

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/gotune/gotune/internal/bytesize"
	"github.com/gotune/gotune/internal/errwriter"
)

// Show writes p for people: where it applies and what it rests on, a table
// of size ranges per locality and memory pair with the parameters that go
// with them, the allocator, the stacks' decisions with their evidence and
// the safety verdicts.
func Show(w io.Writer, p *Profile) error {
	ew := errwriter.New(w)
	line := func(label, format string, args ...any) {
		ew.Printf("%-10s %s\n", label, fmt.Sprintf(format, args...))
	}
	if p.path != "" {
		line("profile", "%s", p.path)
	}
	line("hash", "%s", orNone(p.Hash))
	line("emitted", "by gotune %s at %s (format %d)", orNone(p.Gotune), orNone(p.Created), p.Version)
	scope := []string{"hosts " + strings.Join(p.Scope.Hosts, " ")}
	if p.Scope.CPUModel != "" {
		scope = append(scope, "CPU "+p.Scope.CPUModel)
	}
	if p.Scope.Cores > 0 {
		scope = append(scope, strconv.Itoa(p.Scope.Cores)+" cores")
	}
	line("scope", "%s", strings.Join(scope, "; "))
	f := p.Fingerprint
	line("measured", "on %s: %s, %d cores, %d NUMA nodes, kernel %s", orNone(f.Host), orNone(f.CPUModel), f.Cores, f.NUMANodes, orNone(f.Kernel))
	var libs []string
	for _, name := range slices.Sorted(maps.Keys(p.Libraries)) {
		libs = append(libs, name+" "+p.Libraries[name])
	}
	line("libraries", "%s", orNone(strings.Join(libs, ", ")))
	e := p.Evidence
	line("evidence", "run %s: %d records in %s; plan %s", orNone(e.Run), e.Records, orNone(e.Measurements), orNone(e.Plan))
	line("overrides", "%s", orNone(strings.Join(p.Overrides, " ")))

	for _, loc := range slices.Sorted(maps.Keys(p.Decisions)) {
		for _, pair := range slices.Sorted(maps.Keys(p.Decisions[loc])) {
			d := p.Decisions[loc][pair]
			ew.Printf("\n%s %s\n", loc, pair)
			ew.Do(func() error { return rangeTable(w, d.Ranges) })
			if loc == Internode {
				var opts []string
				for _, k := range slices.Sorted(maps.Keys(d.Options)) {
					opts = append(opts, k+"="+d.Options[k])
				}
				line("parameters", "eager_limit %s, options %s", bytesize.Format(d.EagerLimit), orNone(strings.Join(opts, " ")))
			} else {
				depth := strconv.Itoa(d.FIFODepth)
				if d.FIFODepthRanks > 0 {
					depth += fmt.Sprintf(" (for %d ranks; fewer take the built-in depth and ring where larger)", d.FIFODepthRanks)
				}
				line("parameters", "eager_limit %s, frag_size %s, frag_slots %d, fifo_depth %s, cell_size %s, copy %s, progress %s",
					bytesize.Format(d.EagerLimit), bytesize.Format(d.FragSize), d.FragSlots, depth,
					bytesize.Format(d.CellSize), orNone(d.Copy), cmpOr(d.Progress, "poll"))
				if d.Park != "" {
					line("park", "%s (sm.park)", d.Park)
				}
			}
			if d.Footprint != "" {
				line("footprint", "%s", d.Footprint)
			}
		}
	}

	a := p.Allocator
	thp := "off"
	if a.THP {
		thp = "on"
	}
	ew.Printf("\n")
	line("allocator", "cache %s, purge %s, THP %s", bytesize.Format(int(a.CacheBytes)), orNone(a.Purge), thp)
	showStacks(ew, p.Stacks)
	if len(p.Safety) == 0 {
		line("safety", "no verdicts: not checked for hazards")
		return ew.Err()
	}
	line("safety", "%d verdicts", len(p.Safety))
	ew.Do(func() error { return verdictTable(w, p.Safety) })
	return ew.Err()
}

// showStacks writes each stack's version, then its parameters, each with
// the evidence it rests on on the line below.
func showStacks(ew *errwriter.Writer, stacks map[string]Stack) {
	for _, name := range slices.Sorted(maps.Keys(stacks)) {
		st := stacks[name]
		ew.Printf("%-10s %s %s\n", "stack", name, orNone(st.Version))
		for _, param := range slices.Sorted(maps.Keys(st.Params)) {
			ew.Printf("%-10s   %s = %s\n", "", param, st.Params[param])
			if e, ok := st.Evidence[param]; ok {
				ew.Printf("%-10s     %s\n", "", e)
			}
		}
	}
}

func rangeTable(w io.Writer, ranges []Range) error {
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	t.Header("Sizes", "Transport", "Protocol")
	for i, r := range ranges {
		last := i == len(ranges)-1
		max := 0
		if !last {
			max = ranges[i+1].Min - 1
		}
		protocol := r.Protocol
		if r.Mode != "" {
			protocol += " (" + r.Mode + ")"
		}
		if err := t.Append(rangeLabel(r.Min, max, last), r.Transport, protocol); err != nil {
			return fmt.Errorf("range table: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("range table: %w", err)
	}
	return nil
}

func verdictTable(w io.Writer, verdicts []Verdict) error {
	t := tablewriter.NewTable(w, tablewriter.WithHeaderAutoFormat(tw.Off))
	t.Header("Probe", "Outcome", "Config", "Detail")
	for _, v := range verdicts {
		if err := t.Append(v.Probe, v.Outcome, v.Config, v.Detail); err != nil {
			return fmt.Errorf("verdict table: %w", err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("verdict table: %w", err)
	}
	return nil
}

func orNone(s string) string { return cmpOr(s, "-") }

func cmpOr(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// Diff writes each key whose value differs between a and b ("key: old → new",
// "(absent)" where one has no such key), then their Agreement over
// DefaultSizes, and reports whether they differ. The hash is left out: it
// differs whenever anything else does.
func Diff(w io.Writer, a, b *Profile) (bool, error) {
	ka, kb := flatten(a), flatten(b)
	va, vb := map[string]string{}, map[string]string{}
	for _, e := range ka {
		va[e.key] = e.value
	}
	for _, e := range kb {
		vb[e.key] = e.value
	}
	ew := errwriter.New(w)
	differ := false
	for _, key := range mergeKeys(ka, kb) {
		x, inA := va[key]
		y, inB := vb[key]
		if inA && inB && x == y {
			continue
		}
		differ = true
		if !inA {
			x = "(absent)"
		}
		if !inB {
			y = "(absent)"
		}
		ew.Printf("%s: %s → %s\n", key, x, y)
	}
	ew.Printf("%s\n", Compare(a, b, DefaultSizes()))
	return differ, ew.Err()
}

type keyValue struct{ key, value string }

// flatten lists p's keys and values in the order of its encoding; a list of
// ranges or hosts is one value.
func flatten(p *Profile) []keyValue {
	var kv []keyValue
	add := func(key string, v any) { kv = append(kv, keyValue{key, fmt.Sprint(v)}) }
	add("version", p.Version)
	add("gotune", strconv.Quote(p.Gotune))
	add("created", strconv.Quote(p.Created))
	hosts := make([]string, len(p.Scope.Hosts))
	for i, h := range p.Scope.Hosts {
		hosts[i] = strconv.Quote(h)
	}
	add("scope.hosts", "["+strings.Join(hosts, ", ")+"]")
	add("scope.cpu_model", strconv.Quote(p.Scope.CPUModel))
	add("scope.cores", p.Scope.Cores)
	f := p.Fingerprint
	add("fingerprint.host", strconv.Quote(f.Host))
	add("fingerprint.cpu_model", strconv.Quote(f.CPUModel))
	add("fingerprint.cores", f.Cores)
	add("fingerprint.numa_nodes", f.NUMANodes)
	add("fingerprint.kernel", strconv.Quote(f.Kernel))
	for _, name := range slices.Sorted(maps.Keys(p.Libraries)) {
		add("libraries."+name, strconv.Quote(p.Libraries[name]))
	}
	e := p.Evidence
	add("evidence.run", strconv.Quote(e.Run))
	add("evidence.measurements", strconv.Quote(e.Measurements))
	add("evidence.records", e.Records)
	add("evidence.plan", strconv.Quote(e.Plan))
	for _, loc := range slices.Sorted(maps.Keys(p.Decisions)) {
		for _, pair := range slices.Sorted(maps.Keys(p.Decisions[loc])) {
			d := p.Decisions[loc][pair]
			key := "decisions." + loc + "." + pair + "."
			var ranges []string
			for i, r := range d.Ranges {
				last := i == len(d.Ranges)-1
				max := 0
				if !last {
					max = d.Ranges[i+1].Min - 1
				}
				ranges = append(ranges, rangeLabel(r.Min, max, last)+" "+r.Transport+" "+r.Protocol)
			}
			add(key+"ranges", "["+strings.Join(ranges, ", ")+"]")
			add(key+"eager_limit", d.EagerLimit)
			add(key+"frag_size", d.FragSize)
			add(key+"frag_slots", d.FragSlots)
			add(key+"fifo_depth", d.FIFODepth)
			if d.FIFODepthRanks > 0 {
				add(key+"fifo_depth_ranks", d.FIFODepthRanks)
			}
			add(key+"cell_size", d.CellSize)
			add(key+"copy", strconv.Quote(d.Copy))
			add(key+"progress", strconv.Quote(d.Progress))
			if d.Park != "" {
				add(key+"park", strconv.Quote(d.Park))
			}
			add(key+"footprint", strconv.Quote(d.Footprint))
			for _, k := range slices.Sorted(maps.Keys(d.Options)) {
				add(key+"options."+k, strconv.Quote(d.Options[k]))
			}
		}
	}
	add("allocator.cache_bytes", p.Allocator.CacheBytes)
	add("allocator.purge", strconv.Quote(p.Allocator.Purge))
	add("allocator.thp", p.Allocator.THP)
	for _, name := range slices.Sorted(maps.Keys(p.Stacks)) {
		st := p.Stacks[name]
		key := "stacks." + name + "."
		add(key+"version", strconv.Quote(st.Version))
		for _, param := range slices.Sorted(maps.Keys(st.Params)) {
			add(key+"params."+param, strconv.Quote(st.Params[param]))
		}
		for _, param := range slices.Sorted(maps.Keys(st.Evidence)) {
			add(key+"evidence."+param, strconv.Quote(st.Evidence[param]))
		}
	}
	for i, v := range p.Safety {
		s := v.Probe + " " + v.Outcome + " config " + v.Config
		if v.Detail != "" {
			s += " (" + v.Detail + ")"
		}
		add(fmt.Sprintf("safety[%d]", i), strconv.Quote(s))
	}
	return kv
}

// mergeKeys is a's keys with b's other keys, each after the key it follows
// in b.
func mergeKeys(a, b []keyValue) []string {
	keys := make([]string, 0, len(a)+len(b))
	for _, e := range a {
		keys = append(keys, e.key)
	}
	at := 0 // where the next key of b goes
	for _, e := range b {
		if i := slices.Index(keys, e.key); i >= 0 {
			at = i + 1
			continue
		}
		keys = slices.Insert(keys, at, e.key)
		at++
	}
	return keys
}
