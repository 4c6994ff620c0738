package sys

import (
	"testing"

	"golang.org/x/sys/unix"
)

// A lazy shared mapping commits no memory until touched; Populate commits
// the part it is given, whatever was written there stays, and the rest
// stays uncommitted (counted loosely: shmem may commit huge pages).
func TestLazySharedMappingAndPopulate(t *testing.T) {
	const size, part = 4 << 20, 1 << 20
	f, err := MemfdCreate("gotune-test", size)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	committed := func() int64 {
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	b, err := MapSharedLazy(f.Fd(), size)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	if got := committed(); got != 0 {
		t.Fatalf("a lazy mapping committed %d bytes", got)
	}
	b[PageSize+7] = 0x5a
	if got := committed(); got <= 0 || got >= size {
		t.Fatalf("one written byte committed %d bytes, want a page (or a huge one)", got)
	}
	if err := Populate(b[:part]); err != nil {
		t.Fatal(err)
	}
	if got := committed(); got < part || got >= size {
		t.Fatalf("populating %d of %d bytes committed %d", part, size, got)
	}
	if b[PageSize+7] != 0x5a {
		t.Fatal("Populate changed what was written")
	}
}
