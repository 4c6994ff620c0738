package output

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"

	"github.com/gotune/gotune/bench"
)

// goos and goarch are the platform recorded in the Go benchmark format;
// variables so that tests can pin them.
var goos, goarch = runtime.GOOS, runtime.GOARCH

// writeBench writes the Go benchmark format that benchstat reads: a line
// per repetition sample, named like BenchmarkLatency/transport=sm/size=8
// (GPU runs add their memory kinds, GPUs and load before the size),
// so benchstat computes its own statistics. Provenance travels in
// configuration lines ("key: value"), which hold for the benchmark lines
// after them; a key is written again only when its value changes.
func writeBench(w io.Writer, results []bench.Result) error {
	if slices.ContainsFunc(results, func(r bench.Result) bool { return r.Spec.Pattern == bench.MsgRate }) {
		// benchstat knows that less ns/op and more MB/s is better, not msg/s.
		fmt.Fprintln(w, "Unit msg/s better=higher")
	}
	written := map[string]string{}
	for i, r := range results {
		name, ok := names[r.Spec.Pattern]
		if !ok {
			return fmt.Errorf("result %q: unknown pattern %q", r.Label, r.Spec.Pattern)
		}
		var changed []string
		for _, kv := range benchConfig(r) {
			key, value := kv[0], kv[1]
			if written[key] == value {
				continue
			}
			written[key] = value
			if value == "" {
				changed = append(changed, key+":") // deletes key
			} else {
				changed = append(changed, key+": "+value)
			}
		}
		if len(changed) > 0 && i > 0 {
			fmt.Fprintln(w)
		}
		for _, line := range changed {
			fmt.Fprintln(w, line)
		}
		for _, p := range r.Points {
			for _, s := range p.Samples {
				fmt.Fprintf(w, "Benchmark%s/transport=%s%s%s/size=%d %d%s\n",
					name.gobench, r.Spec.Transport, gpuKeys(r.Spec), ranksKey(r.Spec), p.Size, p.Iters, benchMetrics(r.Spec.Pattern, p.Size, s))
			}
		}
	}
	return nil
}

// gpuKeys are the name keys of a GPU run (none for a host run), so that
// benchstat never pools device and host samples: /mem=device,device/gpus=0,1/kernel=full.
func gpuKeys(s bench.Spec) string {
	k := ""
	if len(s.Mem) > 0 {
		k += "/mem=" + memKinds(s)
	}
	if len(s.GPUs) > 0 {
		k += "/gpus=" + bench.FormatGPUs(s.GPUs)
	}
	if s.GPULoad > 0 {
		k += "/kernel=" + bench.KernelName(s.GPULoad)
	}
	return k
}

// benchConfig lists a result's configuration keys and values, in order.
func benchConfig(r bench.Result) [][2]string {
	p := r.Provenance
	return [][2]string{
		{"goos", goos},
		{"goarch", goarch},
		{"pkg", "github.com/gotune/gotune"},
		{"cpu", p.CPUModel},
		{"label", r.Label},
		{"host", p.Host},
		{"kernel", p.Kernel},
		{"gotune", p.Gotune},
	}
}

// benchMetrics formats one sample v (in the pattern's unit) as Go benchmark
// measurements: the time per message (for latency the one-way time) as
// ns/op, then, for rates, the sample itself.
func benchMetrics(p bench.Pattern, size int, v float64) string {
	switch p.Unit() {
	case "us":
		return metric(v*1e3, "ns/op")
	case "msg/s":
		return metric(1e9/v, "ns/op") + metric(v, "msg/s")
	default: // MB/s: size bytes take size/(v*1e6) seconds
		return metric(float64(size)*1e3/v, "ns/op") + metric(v, "MB/s")
	}
}

// metric formats a value with 12 significant digits, far beyond what is
// measured but short of the rounding noise of derived values.
func metric(v float64, unit string) string {
	return " " + strconv.FormatFloat(v, 'g', 12, 64) + " " + unit
}
