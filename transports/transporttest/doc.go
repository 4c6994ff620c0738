// Package transporttest is the transports' rank-test harness: it registers
// a test binary's rank functions and re-executes the binary as the ranks of
// a job (internal/launch), hands each rank its scenario and a transport
// environment, lays out and validates payloads, and bounds every job by a
// deadline whose ranks are killed when it passes. Only tests import it.
package transporttest
