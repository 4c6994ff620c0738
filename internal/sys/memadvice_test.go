package sys

import (
	"errors"
	"testing"
)

func TestResidentFollowsTouchAndPurge(t *testing.T) {
	const size = 1 << 20
	b, err := MapAnon(size, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	steps := []struct {
		name string
		do   func() error
		want int
	}{
		{"fresh", func() error { return nil }, 0},
		{"first half touched", func() error {
			for i := 0; i < size/2; i += PageSize {
				b[i] = 1
			}
			return nil
		}, size / 2},
		{"purged", func() error { return Madvise(b, AdviseDontNeed) }, 0},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if n, err := Resident(b); err != nil || n != s.want {
			t.Errorf("%s: %d bytes resident (%v), want %d", s.name, n, err, s.want)
		}
	}
	if b[0] != 0 {
		t.Errorf("a purged page reads %d, want the kernel's zero fill", b[0])
	}
}

// The kernel refuses MADV_DONTNEED on locked pages: whoever pins memory
// must unpin it before an allocator purges it.
func TestLockedPagesCannotBePurged(t *testing.T) {
	b, err := MapAnon(64<<10, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	if err := Mlock(AddressOf(b), len(b)); err != nil {
		t.Fatal(err)
	}
	if n, _ := Resident(b); n != len(b) {
		t.Errorf("mlock faulted in %d of %d bytes", n, len(b))
	}
	if err := Madvise(b, AdviseDontNeed); err == nil {
		t.Error("purge of locked pages succeeded")
	}
	if err := Munlock(AddressOf(b), len(b)); err != nil {
		t.Fatal(err)
	}
	if err := Madvise(b, AdviseDontNeed); err != nil {
		t.Errorf("purge after munlock: %v", err)
	}
}

func TestMlockRefusedIsNotSupported(t *testing.T) {
	b, err := MapAnon(8192, false)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	inside := WithoutMlockPermission(func() error { return Mlock(AddressOf(b), len(b)) })
	if !errors.Is(inside, ErrNotSupported) {
		t.Fatalf("mlock without permission: %v, want ErrNotSupported", inside)
	}
	if err := Mlock(AddressOf(b), len(b)); err != nil {
		t.Errorf("mlock after permission was restored: %v", err)
	}
	Munlock(AddressOf(b), len(b))
}

func TestMapAnonHugeIsAlignedAndUnmaps(t *testing.T) {
	b, err := MapAnonHuge(3 << 20)
	if err != nil {
		t.Fatal(err)
	}
	addr := AddressOf(b)
	if addr%HugePage != 0 || len(b) != 3<<20 || cap(b) != 4<<20 {
		t.Errorf("MapAnonHuge(3M): %#x len %d cap %d; want 2M-aligned, cap 4M", addr, len(b), cap(b))
	}
	if err := Unmap(b); err != nil {
		t.Fatal(err)
	}
	if _, err := ResidentAt(addr, 4<<20); err == nil {
		t.Error("still mapped after Unmap")
	}
}
