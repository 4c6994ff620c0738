package sys

import "unsafe"

// cacheLine is the x86-64 cache line size, the unit of a streaming store.
const cacheLine = 64

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

func copyStream(dst, src unsafe.Pointer, n uintptr)

// CopyStream copies min(len(dst), len(src)) bytes with non-temporal
// (streaming) stores: the destination lines go to memory without being read
// first and without displacing the cache. It pays off only for destinations
// much larger than the cache that nobody reads soon; the buffers must not
// overlap. It returns the number of bytes copied.
func CopyStream(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n < 4*cacheLine {
		return copy(dst[:n], src[:n])
	}
	head := int(-uintptr(unsafe.Pointer(&dst[0])) & (cacheLine - 1))
	copy(dst[:head], src[:head])
	body := (n - head) &^ (cacheLine - 1)
	copyStream(unsafe.Pointer(&dst[head]), unsafe.Pointer(&src[head]), uintptr(body))
	copy(dst[head+body:n], src[head+body:n])
	return n
}
