// Package hostinfo owns provenance: what host, CPU, kernel, memory and
// gotune version a result was produced with. Bench results, sweep runs and
// the runtime's profile check all record it, so it sits below all of them.
package hostinfo
