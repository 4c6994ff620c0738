// Package faults holds gotune's reliability campaigns, run against the
// gotune binary as a user runs it.
//
// The fault campaign (TestFaultCampaign) runs bench, probe, sweep and
// stacks commands and, at a random moment, kills a rank, stops one (a
// hang, not a death), or kills the command itself, then checks what is
// left: rank processes, POSIX segments under /dev/shm, temporary
// directories, and for a sweep that --resume completes and gotune tune
// re-emits the profile the resumed run wrote. `make faults` runs the full
// campaign (GOTUNE_FAULT_RUNS, 200 by default, one JSON line per run to
// GOTUNE_FAULT_REPORT).
//
// The soak (TestSoak) sends validated traffic through every transport and
// memory kind present for a set time and checks that no byte is wrong,
// that each run's descriptors, mappings and memory stay flat while its
// ranks run, and that nothing is left after it. `make soak` runs it for
// SOAK_TIME (10 minutes; GOTUNE_SOAK_REPORT gets a line per run).
//
// The ordinary test run, CI's included, runs a short form of both.
package faults
