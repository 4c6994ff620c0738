// Package transports defines the contract every gotune transport implements
// (ordered point-to-point messages between rank processes, blocking and
// non-blocking), the environment a rank hands a transport at start-up, and the
// registry through which the CLI, the benchmark engine and the launcher find
// transports by name.
//
// Implementations live in sub-packages (sm, cma, ...) and register themselves
// from init; importing transports/all links every one of them.
package transports
