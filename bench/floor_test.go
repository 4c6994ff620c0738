package bench

import "testing"

func TestLineFloorRejects(t *testing.T) {
	for _, tc := range []struct {
		name        string
		cpus        []int
		runs, trips int
	}{
		{"one CPU", []int{0}, 1, 1},
		{"same CPU twice", []int{0, 0}, 1, 1},
		{"no runs", []int{0, 1}, 0, 1},
		{"no trips", []int{0, 1}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := LineFloor(tc.cpus, tc.runs, tc.trips); err == nil {
				t.Errorf("LineFloor(%v, %d, %d) accepted", tc.cpus, tc.runs, tc.trips)
			}
		})
	}
}

func TestLineFloorMeasures(t *testing.T) {
	cpus := DefaultCPUs(2)
	if cpus == nil {
		t.Skip("fewer than 2 CPUs allowed")
	}
	f, err := LineFloor(cpus, 3, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Runs) != 6 || f.Trips != 100 || f.Median <= 0 {
		t.Errorf("floor %+v: want 3 runs of each way of 100 round trips and a positive median", f)
	}
	if len(f.TwoRuns) != 3 || f.TwoLines <= 0 {
		t.Errorf("floor %+v: want 3 two-line runs and a positive median", f)
	}
}

func TestLineFloorReportsPinFailure(t *testing.T) {
	if _, err := LineFloor([]int{0, 1 << 20}, 1, 1); err == nil {
		t.Error("a CPU that does not exist: accepted")
	}
}
