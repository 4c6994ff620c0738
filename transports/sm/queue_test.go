package sm

import "testing"

func TestQueueKeepsOrderAndBoundsStorage(t *testing.T) {
	var q queue[int]
	next, want := 0, 0
	// Never empty: push two, pop one, for a long time.
	for range 10000 {
		q.push(next)
		q.push(next + 1)
		next += 2
		if got := q.pop(); got != want {
			t.Fatalf("popped %d, want %d", got, want)
		}
		want++
	}
	if cap(q.items) > 4*q.len() {
		t.Errorf("storage %d for %d live items: not compacted", cap(q.items), q.len())
	}
	for q.len() > 0 {
		if got := q.pop(); got != want {
			t.Fatalf("popped %d, want %d", got, want)
		}
		want++
	}
	if want != next {
		t.Errorf("drained %d items, pushed %d", want, next)
	}
}
