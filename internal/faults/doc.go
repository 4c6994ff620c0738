// Package faults holds gotune's fault campaign: its test runs the gotune
// binary as a user would (bench, probe, sweep) and, at a random moment,
// kills a rank, stops one (a hang, not a death), or kills the command
// itself, then checks what is left: rank processes, POSIX segments under
// /dev/shm, temporary directories, and for a sweep that --resume completes
// and gotune tune re-emits the profile the resumed run wrote.
//
// `make faults` runs the full campaign (GOTUNE_FAULT_RUNS, 200 by
// default) and writes one JSON line per run (GOTUNE_FAULT_REPORT); the
// ordinary test run, CI's included, runs a short form of every kind.
package faults
