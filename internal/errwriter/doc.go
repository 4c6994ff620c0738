// Package errwriter owns Writer, which lets a renderer print line after
// line and check for a write error once, at the end.
package errwriter
