package queue

import "testing"

func TestFIFOKeepsOrderAndBoundsStorage(t *testing.T) {
	var q FIFO[int]
	next, want := 0, 0
	// Never empty: push two, pop one, for a long time.
	for range 10000 {
		q.Push(next)
		q.Push(next + 1)
		next += 2
		if got := q.Pop(); got != want {
			t.Fatalf("popped %d, want %d", got, want)
		}
		want++
	}
	if cap(q.items) > 4*q.Len() {
		t.Errorf("storage %d for %d live items: not compacted", cap(q.items), q.Len())
	}
	if got := q.All(); len(got) != q.Len() || got[0] != want || q.Front() != want {
		t.Errorf("All/Front disagree with the queue: %d items from %d, front %d, want %d", len(got), got[0], q.Front(), want)
	}
	for q.Len() > 0 {
		if got := q.Pop(); got != want {
			t.Fatalf("popped %d, want %d", got, want)
		}
		want++
	}
	if want != next {
		t.Errorf("drained %d items, pushed %d", want, next)
	}
	q.Push(1)
	q.Reset()
	if q.Len() != 0 {
		t.Errorf("%d items after Reset", q.Len())
	}
}

func TestFreeListRecyclesZeroed(t *testing.T) {
	var l FreeList[[4]int]
	a := l.Get()
	a[2] = 7
	l.Put(a)
	b := l.Get()
	if b != a || *b != [4]int{} {
		t.Errorf("got %p %v, want the recycled %p zeroed", b, *b, a)
	}
	if c := l.Get(); c == a {
		t.Error("an empty list returned a value still in use")
	}
}
