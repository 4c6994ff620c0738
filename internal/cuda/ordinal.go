package cuda

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseOrdinals reads a comma-separated list of device ordinals ("0,1").
func ParseOrdinals(s string) ([]int, error) {
	var ords []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("not a GPU ordinal: %q", f)
		}
		ords = append(ords, n)
	}
	return ords, nil
}

// FormatOrdinals writes ords as ParseOrdinals reads them ("0,1").
func FormatOrdinals(ords []int) string {
	f := make([]string, len(ords))
	for i, n := range ords {
		f[i] = strconv.Itoa(n)
	}
	return strings.Join(f, ",")
}

// OrdinalFor is the device a rank binds among count devices: the
// (rank mod n)-th of ords, or rank mod count when ords is empty. The bench's
// buffers and the cudaipc transport both follow it, so they agree.
func OrdinalFor(rank, count int, ords []int) int {
	if len(ords) > 0 {
		return ords[rank%len(ords)]
	}
	return rank % count
}
