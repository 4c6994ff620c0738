// Package queue holds the allocation-free containers the transports' per-
// message paths share: a FIFO that reuses its storage and a free list.
package queue

// FIFO is a queue that reuses its storage: popping advances a head index,
// an emptied queue rewinds and a half-consumed one compacts, so steady
// traffic allocates nothing (a slice consumed from the front would
// reallocate on every wrap) and storage stays bounded by the live items.
type FIFO[T any] struct {
	items []T
	head  int
}

// Len is the number of items queued.
func (q *FIFO[T]) Len() int { return len(q.items) - q.head }

// Push appends v.
func (q *FIFO[T]) Push(v T) { q.items = append(q.items, v) }

// Front is the oldest item; the queue must not be empty.
func (q *FIFO[T]) Front() T { return q.items[q.head] }

// All is the queued items, oldest first, valid until the next change.
func (q *FIFO[T]) All() []T { return q.items[q.head:] }

// Reset drops every item.
func (q *FIFO[T]) Reset() { clear(q.items); q.items, q.head = q.items[:0], 0 }

// Pop removes and returns the oldest item; the queue must not be empty.
func (q *FIFO[T]) Pop() T {
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

// FreeList recycles values of T, so that a per-message path allocates none
// once it has warmed up.
type FreeList[T any] []*T

// Get returns a zeroed T, a recycled one when there is one.
func (l *FreeList[T]) Get() *T {
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

// Put gives v back for a later Get.
func (l *FreeList[T]) Put(v *T) { *l = append(*l, v) }
