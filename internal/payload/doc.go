// Package payload owns the self-checking byte patterns that probes, tests
// and selftest send: every 8-byte word is a function of its offset and of a
// key naming the message, so a byte of another message, of another offset
// or of a stale copy is caught where it lands.
package payload
