package ib

// fifo is a queue that reuses its backing array.
type fifo[T any] struct {
	items []T
	head  int
}

func (q *fifo[T]) len() int { return len(q.items) - q.head }
func (q *fifo[T]) push(v T) { q.items = append(q.items, v) }
func (q *fifo[T]) peek() T  { return q.items[q.head] }
func (q *fifo[T]) pop() T {
	var zero T
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	return v
}
func (q *fifo[T]) all() []T { return q.items[q.head:] }
func (q *fifo[T]) reset()   { q.items, q.head = q.items[:0], 0 }

// opQueue holds work requests by value.
type opQueue = fifo[op]
