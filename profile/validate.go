package profile

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gotune/gotune/internal/bytesize"
)

// The values a profile may name.
var (
	transportNames = []string{"sm", "cma", "knem", "xpmem"}
	// singleCopy are the transports a rendezvous range may name: one copy
	// between the ranks' address spaces.
	singleCopy = []string{"cma", "knem", "xpmem"}
	protocols  = []string{"eager", "pipeline", "rendezvous"}
	copyModes  = []string{"auto", "go", "movsb"}
	progresses = []string{"", "poll", "thread"}
	purges     = []string{"immediate", "delayed", "never"}
)

// Passed is the only outcome a profile's verdicts may have.
const Passed = "passed"

// keyPattern is what a key may look like, map keys included: lower case
// (viper folds case, so "Host_Host" would not survive a load) and no '.'
// (viper's key delimiter).
var keyPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

var hashPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// keyError is a problem with one key of a profile.
type keyError struct {
	key, msg string
}

func (e *keyError) Error() string {
	if e.key == "" {
		return e.msg
	}
	return e.key + ": " + e.msg
}

type problems []*keyError

func (ps *problems) add(key, format string, args ...any) {
	*ps = append(*ps, &keyError{key: key, msg: fmt.Sprintf(format, args...)})
}

func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// Validate checks what a profile says: the format version, that every size
// range is routable and consistent with the thresholds, that sizes are
// positive, that enumerations hold known values, that stacks are known ones
// with a version and evidence only for their parameters, and that every
// verdict passed. The error names each offending key, one per line.
func Validate(p *Profile) error {
	return validate(p).err()
}

func validate(p *Profile) problems {
	var ps problems
	if p.Version != FormatVersion {
		ps.add("version", "%d, this gotune reads format version %d", p.Version, FormatVersion)
	}
	if p.Created != "" {
		if _, err := time.Parse(time.RFC3339, p.Created); err != nil {
			ps.add("created", "%q is not an RFC 3339 time", p.Created)
		}
	}
	if p.Hash != "" && !hashPattern.MatchString(p.Hash) {
		ps.add("hash", "%q is not sha256:<64 lower-case hex digits>", p.Hash)
	}

	if len(p.Scope.Hosts) == 0 {
		ps.add("scope.hosts", `empty: name the hosts ("*" for any)`)
	}
	for i, h := range p.Scope.Hosts {
		if h == "" {
			ps.add(fmt.Sprintf("scope.hosts[%d]", i), "empty pattern")
		} else if _, err := path.Match(h, ""); err != nil {
			ps.add(fmt.Sprintf("scope.hosts[%d]", i), "pattern %q: %v", h, err)
		}
	}
	nonNegative(&ps, "scope.cores", p.Scope.Cores)
	nonNegative(&ps, "fingerprint.cores", p.Fingerprint.Cores)
	nonNegative(&ps, "fingerprint.numa_nodes", p.Fingerprint.NUMANodes)

	for _, name := range slices.Sorted(maps.Keys(p.Libraries)) {
		key := "libraries." + name
		checkKey(&ps, key, name)
		if p.Libraries[name] == "" {
			ps.add(key, "empty version")
		}
	}

	nonNegative(&ps, "evidence.records", p.Evidence.Records)
	if m := p.Evidence.Measurements; m != "" && (filepath.IsAbs(m) || path.IsAbs(m)) {
		ps.add("evidence.measurements", "%q is absolute; it is a path relative to the profile", m)
	}

	if len(p.Decisions) == 0 {
		ps.add("decisions", "none")
	}
	for _, loc := range slices.Sorted(maps.Keys(p.Decisions)) {
		checkKey(&ps, "decisions."+loc, loc)
		if len(p.Decisions[loc]) == 0 {
			ps.add("decisions."+loc, "no memory pairs")
		}
		for _, pair := range slices.Sorted(maps.Keys(p.Decisions[loc])) {
			key := "decisions." + loc + "." + pair
			checkKey(&ps, key, pair)
			if loc == Internode {
				validateInternode(&ps, key, p.Decisions[loc][pair])
			} else {
				validateDecision(&ps, key, p.Decisions[loc][pair])
			}
		}
	}

	if p.Allocator.CacheBytes < 0 {
		ps.add("allocator.cache_bytes", "negative (%d)", p.Allocator.CacheBytes)
	}
	oneOf(&ps, "allocator.purge", p.Allocator.Purge, purges)
	if g := p.GPU; g != nil {
		nonNegative(&ps, "gpu.ipc_threshold", g.IPCThreshold)
		nonNegative(&ps, "gpu.pinned_threshold", g.PinnedThreshold)
		oneOf(&ps, "gpu.staging", g.Staging, []string{"async", "sync"})
		if g.Allocator != "" {
			oneOf(&ps, "gpu.allocator", g.Allocator, []string{"plain", "worker", "pool"})
		}
		if g.Copy != "" {
			oneOf(&ps, "gpu.copy", g.Copy, []string{"ce", "sm"})
		}
		if g.Completion != "" {
			oneOf(&ps, "gpu.completion", g.Completion, []string{"event", "flag", "sync"})
		}
		nonNegative(&ps, "gpu.relay", g.Relay)
		if g.Relay > 0 && g.Completion == "sync" {
			ps.add("gpu.relay", "%d with completion sync, which never waits for the relay's word (the transport refuses it)", g.Relay)
		}
		nonNegative(&ps, "gpu.ipc_cache", g.IPCCache)
	}

	for _, name := range slices.Sorted(maps.Keys(p.Stacks)) {
		validateStack(&ps, "stacks."+name, name, p.Stacks[name])
	}

	for i, v := range p.Safety {
		key := fmt.Sprintf("safety[%d]", i)
		if v.Probe == "" {
			ps.add(key+".probe", "empty")
		}
		if v.Config == "" {
			ps.add(key+".config", "empty")
		}
		if v.Outcome != Passed {
			ps.add(key+".outcome", "%q: a profile carries only passed verdicts", v.Outcome)
		}
	}
	return ps
}

func validateDecision(ps *problems, key string, d Decision) {
	for _, f := range []struct {
		name string
		v    int
	}{{"eager_limit", d.EagerLimit}, {"frag_size", d.FragSize}, {"frag_slots", d.FragSlots},
		{"fifo_depth", d.FIFODepth}, {"cell_size", d.CellSize}} {
		if f.v < 1 {
			ps.add(key+"."+f.name, "%d, must be at least 1", f.v)
		}
	}
	if d.FIFODepthRanks < 0 || d.FIFODepthRanks == 1 {
		ps.add(key+".fifo_depth_ranks", "%d, must be at least 2 (or omitted)", d.FIFODepthRanks)
	}
	oneOf(ps, key+".copy", d.Copy, copyModes)
	oneOf(ps, key+".progress", d.Progress, progresses)
	if d.Park != "" {
		if v, err := time.ParseDuration(d.Park); err != nil || v < 0 {
			ps.add(key+".park", "%q, must be a duration of 0 or more such as 50us (or omitted)", d.Park)
		}
	}

	if len(d.Ranges) == 0 {
		ps.add(key+".ranges", "empty: no size can be routed")
	}
	// Where ranges begin is only meaningful when they are in order.
	ordered := true
	for i := 1; i < len(d.Ranges); i++ {
		ordered = ordered && d.Ranges[i].Min > d.Ranges[i-1].Min
	}
	modes := map[string]string{} // handle-based transport → the first range's copy direction
	for i, r := range d.Ranges {
		rk := fmt.Sprintf("%s.ranges[%d]", key, i)
		switch {
		case i == 0 && r.Min != 0:
			ps.add(rk+".min", "%d, the first range starts at 0", r.Min)
		case i > 0 && r.Min <= d.Ranges[i-1].Min:
			ps.add(rk+".min", "%d, not above the previous range's %d", r.Min, d.Ranges[i-1].Min)
		}
		knownTransport := oneOf(ps, rk+".transport", r.Transport, transportNames)
		knownProtocol := oneOf(ps, rk+".protocol", r.Protocol, protocols)
		if r.Mode != "" {
			switch {
			case r.Protocol != "rendezvous":
				ps.add(rk+".mode", "%s on a %s range: a copy direction belongs to rendezvous ranges", r.Mode, r.Protocol)
			case !oneOf(ps, rk+".mode", r.Mode, []string{"pull", "push", "split"}):
			case r.Mode == "split" && r.Transport != "cma":
				ps.add(rk+".mode", "split on a %s range: only cma's ranges split (both ranks copy by address)", r.Transport)
			case r.Transport == "knem" && modes[r.Transport] != "" && modes[r.Transport] != r.Mode:
				ps.add(rk+".mode", "%s after %s for %s: a handle-based transport copies in one direction (the sender exports before the receiver routes)", r.Mode, modes[r.Transport], r.Transport)
			}
			if r.Transport == "knem" {
				modes[r.Transport] = cmp.Or(modes[r.Transport], r.Mode)
			}
		}
		if knownTransport && knownProtocol {
			switch {
			case r.Protocol == "rendezvous" && !slices.Contains(singleCopy, r.Transport):
				ps.add(rk, "rendezvous needs a single-copy transport (%s), not %s", strings.Join(singleCopy, ", "), r.Transport)
			case r.Protocol != "rendezvous" && r.Transport != "sm":
				ps.add(rk, "%s needs the copy-in/copy-out transport (sm), not %s", r.Protocol, r.Transport)
			}
		}
		if d.EagerLimit < 1 || !knownProtocol || !ordered {
			continue
		}
		last := i == len(d.Ranges)-1
		max := 0
		if !last {
			max = d.Ranges[i+1].Min - 1
		}
		switch {
		case r.Protocol == "eager" && (last || max > d.EagerLimit):
			ps.add(rk, "eager for sizes %s, beyond eager_limit %d", rangeLabel(r.Min, max, last), d.EagerLimit)
		case r.Protocol != "eager" && !last && max <= d.EagerLimit:
			ps.add(rk, "%s for sizes %s, all within eager_limit %d: they go eager",
				r.Protocol, rangeLabel(r.Min, max, last), d.EagerLimit)
		}
	}
}

// internodeTransports are the transports an inter-node decision may name.
var internodeTransports = []string{"tcp", "ib"}

// validateInternode checks a decision between nodes: one transport, eager
// up to its eager limit and rendezvous above, and only that transport's
// options (the sm fields are not used between nodes).
func validateInternode(ps *problems, key string, d Decision) {
	if d.EagerLimit < 1 {
		ps.add(key+".eager_limit", "%d, must be at least 1", d.EagerLimit)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"frag_size", d.FragSize}, {"frag_slots", d.FragSlots}, {"fifo_depth", d.FIFODepth}, {"fifo_depth_ranks", d.FIFODepthRanks}, {"cell_size", d.CellSize}} {
		if f.v != 0 {
			ps.add(key+"."+f.name, "%d: shared-memory channels do not connect nodes (omit it)", f.v)
		}
	}
	if len(d.Ranges) == 0 {
		ps.add(key+".ranges", "empty: no size can be routed")
		return
	}
	transport := d.Ranges[0].Transport
	for i, r := range d.Ranges {
		rk := fmt.Sprintf("%s.ranges[%d]", key, i)
		if i == 0 && r.Min != 0 {
			ps.add(rk+".min", "%d, the first range starts at 0", r.Min)
		}
		if i > 0 && r.Min <= d.Ranges[i-1].Min {
			ps.add(rk+".min", "%d, not above the previous range's %d", r.Min, d.Ranges[i-1].Min)
		}
		if !oneOf(ps, rk+".transport", r.Transport, internodeTransports) {
			continue
		}
		if r.Transport != transport {
			ps.add(rk+".transport", "%s after %s: one inter-node transport carries every size (messages of a pair stay in order on one)", r.Transport, transport)
		}
		want := "eager"
		if r.Min > d.EagerLimit {
			want = "rendezvous"
		}
		if oneOf(ps, rk+".protocol", r.Protocol, []string{"eager", "rendezvous"}) && r.Protocol != want && d.EagerLimit > 0 {
			ps.add(rk+".protocol", "%s from %d with eager_limit %d: want %s", r.Protocol, r.Min, d.EagerLimit, want)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(d.Options)) {
		checkKey(ps, key+".options."+k, k)
		if strings.ContainsAny(d.Options[k], "\n\r") {
			ps.add(key+".options."+k, "holds a line break")
		}
	}
	if e, ok := d.Options["eager"]; ok {
		if n, err := bytesize.Parse(e); err != nil || n != d.EagerLimit {
			ps.add(key+".options.eager", "%s, but eager_limit is %d", e, d.EagerLimit)
		}
	}
}

// validateStack checks one stack's decisions: a known stack, the version
// they were measured on, parameters a config file can hold (one line each),
// and evidence only for parameters it decides.
func validateStack(ps *problems, key, name string, st Stack) {
	checkKey(ps, key, name)
	if !slices.Contains(StackNames, name) {
		ps.add(key, "unknown stack %q: gotune tunes %s", name, strings.Join(StackNames, ", "))
	}
	if st.Version == "" {
		ps.add(key+".version", "empty: say which version of %s the decisions were measured on", name)
	}
	for _, param := range slices.Sorted(maps.Keys(st.Params)) {
		pk := key + ".params." + param
		checkKey(ps, pk, param)
		if strings.ContainsAny(st.Params[param], "\n\r") {
			ps.add(pk, "%s holds a line break: the stacks' config files are one value a line", quote(st.Params[param]))
		}
	}
	for _, param := range slices.Sorted(maps.Keys(st.Evidence)) {
		ek := key + ".evidence." + param
		checkKey(ps, ek, param)
		if _, ok := st.Params[param]; !ok {
			ps.add(ek, "evidence for %s, which is not among %s.params", param, key)
		}
	}
}

// checkKey reports a map key that would not survive a load.
func checkKey(ps *problems, key, name string) {
	if !keyPattern.MatchString(name) {
		ps.add(key, "invalid key %q: keys are lower-case letters, digits, '_' and '-'", name)
	}
}

func nonNegative(ps *problems, key string, v int) {
	if v < 0 {
		ps.add(key, "negative (%d)", v)
	}
}

// oneOf reports v not in set, and whether it is.
func oneOf(ps *problems, key, v string, set []string) bool {
	if slices.Contains(set, v) {
		return true
	}
	names := slices.DeleteFunc(slices.Clone(set), func(s string) bool { return s == "" })
	ps.add(key, "%q is not one of %s", v, strings.Join(names, "|"))
	return false
}

// rangeLabel is "0–4K", "4K+1–64K", "1M–∞".
func rangeLabel(min, max int, unbounded bool) string {
	if unbounded {
		return sizeLabel(min) + "–∞"
	}
	return sizeLabel(min) + "–" + sizeLabel(max)
}

// sizeLabel formats a size as bytesize.Format does, and one off a
// round size as the round size ±1 (range boundaries usually are).
func sizeLabel(n int) string {
	s := bytesize.Format(n)
	if n <= 1024 || n == math.MaxInt || !isDigits(s) {
		return s
	}
	if t := bytesize.Format(n - 1); !isDigits(t) {
		return t + "+1"
	}
	if t := bytesize.Format(n + 1); !isDigits(t) {
		return t + "-1"
	}
	return s
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
