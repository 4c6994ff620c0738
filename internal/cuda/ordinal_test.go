package cuda

import "testing"

func TestOrdinalFor(t *testing.T) {
	for _, tc := range []struct {
		rank, count int
		gpus        []int
		want        int
	}{
		{0, 2, nil, 0}, {1, 2, nil, 1}, {2, 2, nil, 0}, {1, 1, nil, 0},
		{0, 8, []int{3, 5}, 3}, {1, 8, []int{3, 5}, 5}, {2, 8, []int{3, 5}, 3},
	} {
		if got := OrdinalFor(tc.rank, tc.count, tc.gpus); got != tc.want {
			t.Errorf("OrdinalFor(%d, %d, %v) = %d, want %d", tc.rank, tc.count, tc.gpus, got, tc.want)
		}
	}
}
