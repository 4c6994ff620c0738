package ncclplugin

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The names the table uses, in NCCL's numbering (ncclFunc_t,
// NCCL_ALGO_*, NCCL_PROTO_*): the plugin maps them to those numbers.
var (
	Collectives = []string{"broadcast", "reduce", "allgather", "reducescatter", "allreduce"}
	Algorithms  = []string{"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}
	Protocols   = []string{"ll", "ll128", "simple"}
)

// Keep is the algorithm and protocol of a rule that leaves them to NCCL.
const Keep = "-"

// Rule is one line of the plugin's table: calls of Collective with Min to
// Max bytes (inclusive) on a communicator of Ranks ranks (0: any) take
// Algorithm with Protocol (both Keep: NCCL's) and Channels channels (0:
// NCCL's). The first matching rule decides a call.
type Rule struct {
	Collective          string
	Min, Max            int64
	Ranks               int
	Algorithm, Protocol string
	Channels            int
}

// check says what is wrong with r, if anything.
func (r Rule) check() error {
	switch {
	case !slices.Contains(Collectives, r.Collective):
		return fmt.Errorf("collective %q: want one of %s", r.Collective, strings.Join(Collectives, ", "))
	case r.Algorithm != Keep && !slices.Contains(Algorithms, r.Algorithm):
		return fmt.Errorf("algorithm %q: want one of %s, or %s", r.Algorithm, strings.Join(Algorithms, ", "), Keep)
	case r.Protocol != Keep && !slices.Contains(Protocols, r.Protocol):
		return fmt.Errorf("protocol %q: want one of %s, or %s", r.Protocol, strings.Join(Protocols, ", "), Keep)
	case (r.Algorithm == Keep) != (r.Protocol == Keep):
		return fmt.Errorf("algorithm %s with protocol %s: NCCL takes both or neither from a tuner", r.Algorithm, r.Protocol)
	case r.Min < 0 || r.Max < r.Min:
		return fmt.Errorf("bytes %d to %d: want 0 <= min <= max", r.Min, r.Max)
	case r.Ranks < 0 || r.Channels < 0:
		return fmt.Errorf("ranks %d, channels %d: want 0 (any, NCCL's) or more", r.Ranks, r.Channels)
	case r.Algorithm == Keep && r.Channels == 0:
		return fmt.Errorf("a rule that changes nothing")
	}
	return nil
}

func (r Rule) String() string {
	return fmt.Sprintf("%s %d %d %d %s %s %d", r.Collective, r.Min, r.Max, r.Ranks, r.Algorithm, r.Protocol, r.Channels)
}

// WriteTable writes rules as the plugin's table, after a comment header
// naming what the columns are and where the table came from.
func WriteTable(w io.Writer, origin string, rules []Rule) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# gotune's NCCL tuner table (%s): %s\n", FileName, origin)
	b.WriteString("# collective min_bytes max_bytes ranks(0: any) algorithm protocol channels(0: NCCL's); the first match decides\n")
	for i, r := range rules {
		if err := r.check(); err != nil {
			return fmt.Errorf("NCCL tuner table: rule %d: %w", i+1, err)
		}
		b.WriteString(r.String() + "\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ReadTable reads a table as the plugin does, but strictly: a line that
// is not a rule is an error naming name and the line.
func ReadTable(r io.Reader, name string) ([]Rule, error) {
	var rules []Rule
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 7 {
			return nil, fmt.Errorf("%s:%d: %d fields, want 7 (collective min max ranks algorithm protocol channels)", name, n, len(f))
		}
		var rule Rule
		var errs [5]error
		rule.Collective, rule.Algorithm, rule.Protocol = f[0], f[4], f[5]
		rule.Min, errs[0] = strconv.ParseInt(f[1], 10, 64)
		rule.Max, errs[1] = strconv.ParseInt(f[2], 10, 64)
		rule.Ranks, errs[2] = strconv.Atoi(f[3])
		rule.Channels, errs[3] = strconv.Atoi(f[6])
		errs[4] = rule.check()
		for _, err := range errs {
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %w", name, n, err)
			}
		}
		rules = append(rules, rule)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return rules, nil
}
