package bench

import "fmt"

// WithSettle returns spec with one point of settle bytes, in spec's own
// pattern, before its sizes, to be dropped from the result with
// DropSettle; settle <= 0 returns spec as it is. Ranks launched a moment
// ago can copy slower for their first milliseconds, which a ladder would
// charge to its first sizes (an MPI stack's MPI_Init polls long enough to
// hide it; gotune's bootstrap does not; docs/tuner.md, The settling
// pass). The point also leaves every run in the state a
// mixed-size application is in after its first large message (a progress
// thread polling, rings touched), not that of a process that sent nothing.
func WithSettle(spec Spec, settle int) Spec {
	if settle <= 0 {
		return spec
	}
	spec.Sizes = append([]int{settle}, spec.Sizes...)
	return spec
}

// DropSettle removes the settling point WithSettle put first in res, and
// gives res back the sizes it was asked for.
func DropSettle(res *Result, settle int, sizes []int) error {
	if settle <= 0 {
		return nil
	}
	if len(res.Points) == 0 || res.Points[0].Size != settle {
		return fmt.Errorf("no settling point of %d bytes first", settle)
	}
	res.Points = res.Points[1:]
	res.Spec.Sizes = sizes
	return nil
}
