package nccl

import (
	"fmt"
	"os"
	"strconv"

	"github.com/gotune/gotune/profile/native"
	"github.com/gotune/gotune/transports"
)

// knob is an nccl.* option and the NCCL variable it sets.
type knob struct {
	key, env, typ, help string
}

// knobs are the settings that matter between the GPUs of one node
// (docs/stacks.md, NCCL). Sizes are written to NCCL in bytes.
var knobs = []knob{
	{"nccl.algo", "NCCL_ALGO", "text", "collective algorithms NCCL may use (NCCL_ALGO: ring, tree, nvls, collnet..., or per function)"},
	{"nccl.proto", "NCCL_PROTO", "text", "protocols NCCL may use (NCCL_PROTO: ll, ll128, simple)"},
	{"nccl.min-ctas", "NCCL_MIN_CTAS", "int", "fewest CTAs (channels) NCCL uses (NCCL_MIN_CTAS)"},
	{"nccl.max-ctas", "NCCL_MAX_CTAS", "int", "most CTAs (channels) NCCL uses (NCCL_MAX_CTAS)"},
	{"nccl.min-p2p-nchannels", "NCCL_MIN_P2P_NCHANNELS", "int", "fewest channels point-to-point operations use (NCCL_MIN_P2P_NCHANNELS, undocumented; a peer over NVLink gets as many, up to twice its links)"},
	{"nccl.max-p2p-nchannels", "NCCL_MAX_P2P_NCHANNELS", "int", "most channels point-to-point operations use (NCCL_MAX_P2P_NCHANNELS, undocumented)"},
	{"nccl.nthreads", "NCCL_NTHREADS", "int", "threads per CTA (NCCL_NTHREADS: 64, 128, 256 or 512)"},
	{"nccl.buffsize", "NCCL_BUFFSIZE", "size", "buffer per channel and peer (NCCL_BUFFSIZE); NCCL couples it to the NVLink chunk size"},
	{"nccl.p2p-nvl-chunksize", "NCCL_P2P_NVL_CHUNKSIZE", "size", "point-to-point chunk over NVLink (NCCL_P2P_NVL_CHUNKSIZE)"},
	{"nccl.p2p-ll-threshold", "NCCL_P2P_LL_THRESHOLD", "size", "largest point-to-point message sent with the LL protocol (NCCL_P2P_LL_THRESHOLD)"},
	{"nccl.ll128-buffsize", "NCCL_LL128_BUFFSIZE", "size", "LL128 buffer (NCCL_LL128_BUFFSIZE): only 4915200 bytes times 2^k, k from -5 to 2"},
}

// Options documents the nccl.* options; the GPU a rank binds follows
// cudaipc.gpus, which benchmarks set from --gpus.
var Options = func() *transports.OptionSet {
	s := &transports.OptionSet{Name: "nccl"}
	for _, k := range knobs {
		s.Options = append(s.Options, transports.Option{Key: k.key, Type: k.typ, Help: k.help})
	}
	return s
}()

// Settings are the NCCL variables o sets, as NCCL reads them, each
// checked: NAME to VALUE.
func Settings(o transports.Options) (map[string]string, error) {
	out := map[string]string{}
	for _, k := range knobs {
		v, ok := o[k.key]
		if !ok {
			continue
		}
		switch k.typ {
		case "int":
			if _, err := strconv.Atoi(v); err != nil {
				return nil, fmt.Errorf("option %s=%q: want an integer", k.key, v)
			}
		case "size":
			n, err := o.Int(k.key, 0)
			if err != nil {
				return nil, err
			}
			v = strconv.Itoa(n)
		}
		if err := native.CheckNCCLSetting(k.env, v); err != nil {
			return nil, fmt.Errorf("option %s: %w", k.key, err)
		}
		out[k.env] = v
	}
	return out, nil
}

// OptionFor is the nccl.* option that sets NCCL's variable env
// (NCCL_P2P_NVL_CHUNKSIZE: nccl.p2p-nvl-chunksize); false for a variable
// the transport does not set.
func OptionFor(env string) (string, bool) {
	for _, k := range knobs {
		if k.env == env {
			return k.key, true
		}
	}
	return "", false
}

// applySettings puts the settings into the process's environment, where
// NCCL's first call reads them; a variable already set by the user is
// overridden, as the option is the more specific.
func applySettings(set map[string]string) error {
	for name, v := range set {
		if err := os.Setenv(name, v); err != nil {
			return fmt.Errorf("nccl: set %s: %w", name, err)
		}
	}
	return nil
}
