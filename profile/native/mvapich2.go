package native

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gotune/gotune/profile"
)

// An mv2Source is a decision of Open MPI or MPICH that carries over to an
// MVAPICH2 parameter: convert gives the MVAPICH2 value, or false where the
// value has no counterpart.
type mv2Source struct {
	stack, param string
	convert      func(string) (string, bool)
}

// mv2Mappings are the MVAPICH2 2.3 parameters (user guide 2.3.7, sections
// 6.3 and 11) that gotune's Open MPI and MPICH decisions map onto soundly,
// each from the first of its sources the profile has.
var mv2Mappings = []struct {
	name, meaning string
	sources       []mv2Source
}{
	{"MV2_SMP_EAGERSIZE", "intra-node switch from eager to rendezvous, in bytes", []mv2Source{
		{"openmpi", "btl_vader_eager_limit", same},
		{"openmpi", "btl_sm_eager_limit", same},
	}},
	{"MV2_SMP_USE_CMA", "CMA single copy for intra-node messages on (1) or off (0)", []mv2Source{
		{"openmpi", "btl_vader_single_copy_mechanism", ompiSingleCopy},
		{"mpich", "ch4_cma_enable", boolean},
	}},
}

// mv2NoCounterpart explains parameters gotune tunes that have none.
var mv2NoCounterpart = map[string]string{
	"mpich.ch4_ipc_cma_p2p_threshold": "MVAPICH2 2.3's guide names no single-copy threshold: its CMA carries the " +
		"intra-node rendezvous, which starts above MV2_SMP_EAGERSIZE",
}

func same(v string) (string, bool) { return v, v != "" }

// ompiSingleCopy maps Open MPI's single-copy mechanism: CMA is MVAPICH2's
// too; none is copy-in/copy-out; xpmem, knem and emulated have no
// counterpart MVAPICH2 switches by this parameter.
func ompiSingleCopy(v string) (string, bool) {
	switch v {
	case "cma":
		return "1", true
	case "none":
		return "0", true
	}
	return "", false
}

func boolean(v string) (string, bool) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return "1", true
	case "0", "false", "no", "off":
		return "0", true
	}
	return "", false
}

func renderMVAPICH2(p *profile.Profile) ([]byte, error) {
	var w writer
	w.comment("mvapich2.conf: MVAPICH2 parameters derived by gotune from Open MPI and MPICH decisions.")
	w.blank()
	w.paragraph("UNVERIFIED: ", "MVAPICH2 is not in Debian, so gotune has neither measured these values with MVAPICH2 "+
		"nor checked that MVAPICH2 reads them as intended. Each is carried over from a decision measured with "+
		"another stack where MVAPICH2 2.3's user guide documents a parameter of the same meaning; measure before "+
		"relying on it.")
	w.paragraph("Where it goes: ", "/etc/mvapich2.conf (system), $HOME/.mvapich2.conf (user), or any path named by "+
		"MV2_USER_CONFIG=FILE; lines are VARIABLE = VALUE, # starts a comment line (user guide 6.3):")
	w.commands([]string{"MV2_USER_CONFIG=$PWD/mvapich2.conf mpirun_rsh -n 2 host1 host2 ./app"})
	w.paragraph("What overrides it: ", "MV2_IGNORE_USER_CONFIG=1 and MV2_IGNORE_SYSTEM_CONFIG=1 skip the files; "+
		"the guide does not say how a file ranks against the environment, so check with MV2_SHOW_ENV_INFO=1. The "+
		"SMP parameters apply to the OFA-IB-CH3 and OFA-iWARP-CH3 interfaces.")
	w.blank()
	provenance(&w, p)
	var from []string
	for _, s := range []string{"openmpi", "mpich"} {
		if st, ok := p.Stacks[s]; ok {
			from = append(from, specs[s].display+" "+st.Version)
		}
	}
	w.comment("Derived from decisions measured with " + strings.Join(from, " and ") + "; not measured with MVAPICH2.")

	used := map[string]bool{}
	for _, m := range mv2Mappings {
		var chosen, passed []string
		value := ""
		for _, src := range m.sources {
			st, ok := p.Stacks[src.stack]
			v, has := st.Params[src.param]
			if !ok || !has {
				continue
			}
			used[src.stack+"."+src.param] = true
			mv, ok := src.convert(v)
			desc := fmt.Sprintf("%s %s = %s", specs[src.stack].display, src.param, v)
			switch {
			case !ok:
				passed = append(passed, desc+" has no counterpart in "+m.name)
			case chosen == nil:
				value = mv
				chosen = []string{desc, st.Evidence[src.param]}
			default:
				passed = append(passed, desc+" also maps here; the first source above is used")
			}
		}
		if chosen == nil && passed == nil {
			continue
		}
		w.blank()
		if chosen != nil {
			w.paragraph(m.name+": ", m.meaning+"; from "+chosen[0]+".")
			w.evidence("evidence", chosen[1])
		}
		for _, note := range passed {
			w.paragraph("", "Not carried over: "+note+".")
		}
		if chosen != nil {
			line, err := confLine(" = ")(m.name, value)
			if err != nil {
				return nil, fmt.Errorf("rendering mvapich2 for profile %s: %s: %w", profileName(p), m.name, err)
			}
			w.line(line)
		}
	}

	var rest []string
	for _, s := range []string{"openmpi", "mpich"} {
		for _, param := range slices.Sorted(maps.Keys(p.Stacks[s].Params)) {
			key := s + "." + param
			if used[key] {
				continue
			}
			why := mv2NoCounterpart[key]
			if why == "" {
				why = "no MVAPICH2 parameter known to gotune means the same"
			}
			rest = append(rest, fmt.Sprintf("%s %s (%s)", specs[s].display, param, why))
		}
	}
	if len(rest) > 0 {
		w.blank()
		w.paragraph("Not carried over: ", strings.Join(rest, "; ")+".")
	}
	return w.bytes(), nil
}
