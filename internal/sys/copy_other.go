//go:build !amd64

package sys

// CopyMovsb falls back to copy where REP MOVSB does not exist.
func CopyMovsb(dst, src []byte) int { return copy(dst, src) }

// CopyStream falls back to copy where streaming stores are not wired up.
func CopyStream(dst, src []byte) int { return copy(dst, src) }
