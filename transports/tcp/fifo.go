package tcp

// fifo is a queue that reuses its array: popping moves a head index, and
// the queue rewinds when it empties, so a steady flow allocates nothing.
type fifo[T any] struct {
	items []T
	head  int
}

func (q *fifo[T]) len() int { return len(q.items) - q.head }
func (q *fifo[T]) push(v T) { q.items = append(q.items, v) }
func (q *fifo[T]) peek() T  { return q.items[q.head] }
func (q *fifo[T]) all() []T { return q.items[q.head:] }
func (q *fifo[T]) reset()   { clear(q.items); q.items, q.head = q.items[:0], 0 }
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
