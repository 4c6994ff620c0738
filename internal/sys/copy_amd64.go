package sys

import "unsafe"

func copyMovsb(dst, src unsafe.Pointer, n uintptr)

// CopyMovsb copies min(len(dst), len(src)) bytes with the string-move
// instruction (REP MOVSB). On CPUs with fast short string moves (FSRM,
// ERMS) it can beat Go's vector copy loop for cache-to-cache copies; the
// buffers must not overlap. It returns the number of bytes copied.
func CopyMovsb(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n > 0 {
		copyMovsb(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), uintptr(n))
	}
	return n
}
