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

// freeList recycles values of T, so that the per-message path allocates
// none once it has warmed up.
type freeList[T any] []*T

// get returns a zeroed T, a recycled one when there is one.
func (l *freeList[T]) get() *T {
	n := len(*l)
	if n == 0 {
		return new(T)
	}
	v := (*l)[n-1]
	*l = (*l)[:n-1]
	var zero T
	*v = zero
	return v
}

// put gives v back for a later get.
func (l *freeList[T]) put(v *T) { *l = append(*l, v) }
