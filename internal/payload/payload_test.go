package payload

import "testing"

// Check finds a changed byte at its word, a message of another key at 0,
// and passes what Fill wrote, whole words and tail alike.
func TestFillCheck(t *testing.T) {
	for _, n := range []int{0, 1, 7, 8, 13, 4096, 4099} {
		b := make([]byte, n)
		Fill(b, 42)
		if k := Check(b, 42); k != -1 {
			t.Fatalf("n=%d: Check of what Fill wrote = %d", n, k)
		}
		if n == 0 {
			continue
		}
		if k := Check(b, 43); k != 0 {
			t.Errorf("n=%d: Check under another key = %d, want 0", n, k)
		}
		at := n - 1
		b[at] ^= 0x10
		want := at &^ 7
		if at >= n&^7 {
			want = at // a tail byte is checked alone
		}
		if k := Check(b, 42); k != want {
			t.Errorf("n=%d: byte %d changed: Check = %d, want %d", n, at, k, want)
		}
	}
}
