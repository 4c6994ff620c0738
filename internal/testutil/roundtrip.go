package testutil

import (
	"reflect"
	"testing"
)

// RoundTrip checks that render is parse's inverse on vals: parse reads back
// each value from what render writes of it (a Params from its options).
func RoundTrip[O ~map[string]string, P any](t testing.TB, vals []P, render func(P) O, parse func(O) (P, error)) {
	t.Helper()
	for _, v := range vals {
		o := render(v)
		if got, err := parse(o); err != nil || !reflect.DeepEqual(got, v) {
			t.Errorf("parse(%v) = %+v, %v; want %+v", o, got, err, v)
		}
	}
}
