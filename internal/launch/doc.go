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
// handle: identity, peers' pids, the mapped segment, a barrier, an
// allgather, the job's parameters and a heartbeat. With Job.Stall set, the
// launcher's watchdog treats a heartbeat that stays still past the deadline
// as a stall: it asks the stalled ranks for their stacks (SIGQUIT), kills
// the job and returns a *StallError carrying them.
//
// # Several nodes
//
// Under mpirun or srun every launcher process runs gotune once. Launcher
// rank 0 coordinates (Coordinate): it listens on TCP, publishes its address
// and a fresh token in a mode-0600 rendezvous file on a shared file system
// (or both are given to every process), and waits for the others to join
// (Serve). Processes are grouped into nodes by host name; the lowest
// launcher rank on a node is its agent. A Job with Nodes > 1 then has its
// ranks spread over nodes in blocks: node 0's are this process's children,
// the others are children of their node's agent, which forwards their
// output, heartbeats and exit statuses and signals or kills them when the
// coordinator says. Every rank bootstraps with the coordinator over TCP with
// the job's own token, so the job's protocol (barrier, allgather, results,
// watchdog) is the same on one node and on many. Each node's ranks share a
// segment of their own; Rank.Hosts and Rank.Addr tell transports which
// peers share a node and where to listen.
package launch
