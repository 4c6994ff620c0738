package sm

// queue is a FIFO that reuses its storage: popping advances a head index,
// an emptied queue rewinds and a half-consumed one compacts, so steady
// traffic allocates nothing (a slice consumed from the front would
// reallocate on every wrap).
type queue[T any] struct {
	items []T
	head  int
}

func (q *queue[T]) len() int { return len(q.items) - q.head }

func (q *queue[T]) push(v T) { q.items = append(q.items, v) }

func (q *queue[T]) front() T { return q.items[q.head] }

func (q *queue[T]) pop() T {
	v := q.items[q.head]
	var zero T
	q.items[q.head] = zero
	q.head++
	switch {
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
	case q.head >= 64 && q.head >= len(q.items)/2:
		// Never empty under sustained overlap: slide the live part down
		// so the storage stops growing with total traffic.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return v
}
