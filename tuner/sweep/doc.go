// Package sweep is gotune's tuner: it plans trials (a coarse ladder, then
// bisection around crossovers), runs each in fresh rank processes under the
// watchdog, stores every measurement append-only so that a killed sweep
// resumes where it stopped, decides the transport parameters from the
// stored measurements (so `gotune tune` can re-decide without measuring),
// runs the safety phase's hazard probes on what it decided, and emits the
// profile the runtime loads.
//
// A run directory (OUT/<host>/<run-id>/) holds meta.json (provenance
// and plan), measurements.jsonl (the store), measurements.bench (Go
// benchmark format, derived), summary (derived) and profile.yaml. Checked
// in as data of record, its store is compressed (measurements.jsonl.gz,
// which Open, and so resume and tune, read as the store's first part) and
// its measurements.bench left out: WriteBench (gotune tune --bench) makes
// it again from meta.json and the store.
package sweep
