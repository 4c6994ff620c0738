package transports

import (
	"maps"
	"testing"
)

// With layers options without touching either set.
func TestOptionsWith(t *testing.T) {
	base := Options{"sm.eager": "4096", "sm.depth": "64"}
	over := Options{"sm.depth": "8", "cma.mode": "push"}
	got := base.With(over)
	want := Options{"sm.eager": "4096", "sm.depth": "8", "cma.mode": "push"}
	if !maps.Equal(got, want) {
		t.Errorf("With = %v, want %v", got, want)
	}
	if base["sm.depth"] != "64" || len(base) != 2 || len(over) != 2 {
		t.Errorf("With changed its inputs: %v, %v", base, over)
	}
	if got := Options(nil).With(nil); got == nil || len(got) != 0 {
		t.Errorf("nil.With(nil) = %#v, want an empty set", got)
	}
}
