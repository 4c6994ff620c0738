package sm

import (
	"testing"
	"time"
)

// The busy sleep climbs from its first step to its cap while the
// application keeps communicating, and a goroutine coming from a short
// sleep (the application was away) starts again at the first step.
func TestBusySleepDoublesToItsCap(t *testing.T) {
	for _, c := range []struct{ from, want time.Duration }{
		{progressMinSleep, progressBusySleep},
		{progressMaxSleep, progressBusySleep},
		{progressBusySleep, 2 * progressBusySleep},
		{progressBusyMaxSleep / 2, progressBusyMaxSleep},
		{progressBusyMaxSleep*3/4 + 1, progressBusyMaxSleep},
		{progressBusyMaxSleep, progressBusyMaxSleep},
	} {
		if got := busier(c.from); got != c.want {
			t.Errorf("busier(%v) = %v, want %v", c.from, got, c.want)
		}
	}
}
