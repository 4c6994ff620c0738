//go:build !amd64

package sys

// CopyMovsb falls back to copy where REP MOVSB does not exist.
func CopyMovsb(dst, src []byte) int { return copy(dst, src) }
