// Package archtest holds the repository's architecture tests: which package
// may import which (imports point down: internal < profile < transports <
// bench < tuner < cmd), that raw system calls stay in internal/sys, and
// that an option key is spelt only by the transport package that reads it.
// It has no code of its own; the rules live in its tests so that
// `go test ./...` enforces them.
package archtest
