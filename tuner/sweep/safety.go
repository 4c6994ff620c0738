package sweep

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gotune/gotune/transports"
	"github.com/gotune/gotune/tuner/probe"
	"github.com/gotune/gotune/tuner/store"
)

// ProbeRecord is a stored verdict: in the run's store (evidence) and in the
// host's quarantine store (so a verdict is never re-run needlessly).
type ProbeRecord struct {
	Probe    string             `json:"probe"`
	Unsafe   bool               `json:"unsafe"`
	Config   string             `json:"config"` // digest of Options
	Options  transports.Options `json:"options,omitempty"`
	Versions map[string]string  `json:"versions"` // gotune, kernel, go
	Outcome  string             `json:"outcome"`
	Detail   string             `json:"detail"`
	Seconds  float64            `json:"seconds"`
}

// digest names a configuration: its sorted options.
func digest(o transports.Options) string {
	b, _ := json.Marshal(o) // encoding/json sorts map keys
	sum := sha256.Sum256(b)
	return "cfg:" + hex.EncodeToString(sum[:8])
}

func (r *Runner) versions() map[string]string {
	prov := r.meta.Provenance
	return map[string]string{"gotune": prov.Gotune, "kernel": prov.Kernel, "go": prov.GoVersion}
}

// probeOnce runs a probe variant on opts, or returns the verdict stored for
// the same probe, variant, configuration and versions.
func (r *Runner) probeOnce(p *probe.Probe, unsafe bool, opts transports.Options) (ProbeRecord, bool, error) {
	vers := r.versions()
	rec := ProbeRecord{Probe: p.ID, Unsafe: unsafe, Config: digest(opts), Options: opts, Versions: vers}
	vb, _ := json.Marshal(vers)
	key := fmt.Sprintf("verdict:%s:%v:%s:%x", p.ID, unsafe, rec.Config, sha256.Sum256(vb))
	for _, s := range []*store.Store{r.store, r.quarantine} {
		if stored, ok := s.Get(key); ok {
			if err := json.Unmarshal(stored.Data, &rec); err == nil {
				if s == r.quarantine && !r.store.Has(key) {
					r.store.Append(stored) // evidence of this run too
				}
				return rec, true, nil
			}
		}
	}
	if r.replayOnly {
		rec.Outcome, rec.Detail = "not run", "tune runs no probes and this verdict is not stored"
		return rec, false, nil
	}
	v := probe.RunWith(r.ctx, p, unsafe, r.plan.ProbeDeadline, opts)
	rec.Outcome, rec.Detail, rec.Seconds = v.Outcome.String(), v.Detail, v.Duration.Seconds()
	data, _ := json.Marshal(rec)
	record := store.Record{Key: key, Kind: "verdict", Time: time.Now().UTC(), Data: data}
	if err := r.store.Append(record); err != nil {
		return rec, false, err
	}
	if err := r.quarantine.Append(record); err != nil {
		return rec, false, err
	}
	variant := "safe"
	if unsafe {
		variant = "unsafe"
	}
	fmt.Fprintf(r.progress, "[%s] safety    %-3s %-6s %s (%.1fs)\n", fmtElapsed(time.Since(r.start)), p.ID, variant, rec.Outcome, rec.Seconds)
	return rec, false, nil
}

// Safety is the safety phase's result.
type Safety struct {
	Verdicts  []ProbeRecord // the safe forms on the emitted configuration
	Detectors []ProbeRecord // the unsafe forms: each must be caught
	Problems  []string      // why the configuration may not be emitted
	Warnings  []string
}

// safety probes the decided configuration. A configuration whose
// progress mode fails H8 switches to the progress thread and is probed
// again; any other failure blocks emission.
func (r *Runner) safety(out *Outcome) (Safety, error) {
	var s Safety
	for _, id := range r.plan.Probes {
		p, err := probe.Lookup(id)
		if err != nil {
			s.Warnings = append(s.Warnings, fmt.Sprintf("probe %s: not in this build (%v)", id, err))
			continue
		}
		det, _, err := r.probeOnce(p, true, nil)
		if err != nil {
			return s, err
		}
		s.Detectors = append(s.Detectors, det)
		if det.Outcome != probe.HazardDetected.String() {
			s.Problems = append(s.Problems, fmt.Sprintf("%s: the unsafe variant was not caught (%s: %s): the detector cannot be trusted", id, det.Outcome, det.Detail))
		}
		for attempt := 0; ; attempt++ {
			opts := r.emittedOptions(*out)
			v, _, err := r.probeOnce(p, false, opts)
			if err != nil {
				return s, err
			}
			if v.Outcome == probe.Passed.String() {
				s.Verdicts = append(s.Verdicts, v)
				break
			}
			if v.Outcome == probe.HazardDetected.String() && id == "H8" && out.SM.Progress != "thread" && attempt == 0 {
				s.Warnings = append(s.Warnings, fmt.Sprintf("H8 with sm.progress=%s: %s; the profile uses sm.progress=thread", out.SM.Progress, v.Detail))
				out.SM.Progress = "thread"
				continue
			}
			s.Problems = append(s.Problems, fmt.Sprintf("%s on %s: %s: %s", id, v.Config, v.Outcome, v.Detail))
			break
		}
	}
	return s, nil
}

// emittedOptions are the transport and allocator options the profile
// implies (what the probes run on).
func (r *Runner) emittedOptions(out Outcome) transports.Options {
	o := out.SM.options()
	o["alloc.purge"] = out.Alloc.Purge
	o["alloc.thp"] = onOff(out.Alloc.THP)
	o["alloc.cache"] = fmt.Sprint(out.Alloc.Cache)
	return o
}
