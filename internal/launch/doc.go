// Package launch starts rank processes and bootstraps them.
//
// Locally, gotune re-executes its own binary once per rank. The launcher owns
// the job: it creates the shared segment (an anonymous memfd inherited by
// every rank, or a mode-0600 file under /dev/shm that is unlinked as soon as
// every rank has mapped it), a private unix socket for bootstrap, and a
// per-job random token that every rank must present. Ranks share one process
// group, die with the launcher (PR_SET_PDEATHSIG), and are killed as a group
// when any of them fails, so a hang or a crash never outlives its job and no
// segment is left behind.
//
// Inside a rank, the job's function (registered by kind) runs with a Rank
// handle: identity, peers' pids, the mapped segment, a barrier, the job's
// parameters and a heartbeat. With Job.Stall set, the launcher's watchdog
// treats a heartbeat that stays still past the deadline as a stall: it asks
// the stalled ranks for their stacks (SIGQUIT), kills the job and returns a
// *StallError carrying them.
package launch
