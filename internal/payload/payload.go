package payload

import "encoding/binary"

// word is the 8-byte word at byte off of message key.
func word(key uint64, off int) uint64 { return uint64(off)*0x9E3779B97F4A7C15 ^ key }

// tail is the byte at off of message key past its last whole word.
func tail(key uint64, off int) byte { return byte(key + uint64(off)) }

// Fill writes message key's pattern into b.
func Fill(b []byte, key uint64) {
	k := 0
	for ; k+8 <= len(b); k += 8 {
		binary.LittleEndian.PutUint64(b[k:], word(key, k))
	}
	for ; k < len(b); k++ {
		b[k] = tail(key, k)
	}
}

// Check returns the offset of the first word (or tail byte) of b that is
// not message key's pattern, or -1 when all of b is.
func Check(b []byte, key uint64) int {
	k := 0
	for ; k+8 <= len(b); k += 8 {
		if binary.LittleEndian.Uint64(b[k:]) != word(key, k) {
			return k
		}
	}
	for ; k < len(b); k++ {
		if b[k] != tail(key, k) {
			return k
		}
	}
	return -1
}
