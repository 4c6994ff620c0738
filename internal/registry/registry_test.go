package registry

import (
	"slices"
	"testing"
)

func TestRegistry(t *testing.T) {
	r := New[int]("test: duplicate ")
	for i, n := range []string{"b", "a", "c"} {
		r.Register(n, i)
	}
	for _, c := range []struct {
		name string
		want int
		ok   bool
	}{{"a", 1, true}, {"b", 0, true}, {"c", 2, true}, {"d", 0, false}} {
		if v, ok := r.Lookup(c.name); v != c.want || ok != c.ok {
			t.Errorf("Lookup(%q) = %d, %v; want %d, %v", c.name, v, ok, c.want, c.ok)
		}
	}
	if got := r.Names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Names() = %v", got)
	}
	defer func() {
		if p := recover(); p != "test: duplicate a" {
			t.Errorf("duplicate Register panicked with %v", p)
		}
	}()
	r.Register("a", 9)
}
