package output

import (
	"fmt"
	"io"
	"strconv"

	"github.com/gotune/gotune/bench"
)

// The multi-rank patterns' additions to the formats: their side values
// (messages/s of mbw_mr and incast, alltoall's fastest and slowest rank)
// and where their ranks ran.

// multiHeader names a multi-rank pattern's table columns after the
// statistics (none for a pair's pattern).
func multiHeader(p bench.Pattern) []any {
	switch p {
	case bench.MultiBandwidth, bench.Incast:
		return []any{"Messages/s"}
	case bench.AllToAll:
		return []any{"Fastest rank (us)", "Slowest rank (us)"}
	case bench.AllReduce, bench.AllGather, bench.ReduceScatter, bench.Broadcast:
		return []any{"Fastest rank (us)", "Slowest rank (us)", "algbw (GB/s)", "busbw (GB/s)"}
	}
	return nil
}

// multiCells are a point's cells under multiHeader.
func multiCells(p bench.Pattern, pt bench.Point) []any {
	switch p {
	case bench.MultiBandwidth, bench.Incast:
		return []any{strconv.FormatFloat(pt.MsgRate, 'f', 0, 64)}
	case bench.AllToAll:
		return []any{strconv.FormatFloat(pt.RankMin, 'f', 2, 64), strconv.FormatFloat(pt.RankMax, 'f', 2, 64)}
	case bench.AllReduce, bench.AllGather, bench.ReduceScatter, bench.Broadcast:
		return []any{strconv.FormatFloat(pt.RankMin, 'f', 2, 64), strconv.FormatFloat(pt.RankMax, 'f', 2, 64),
			strconv.FormatFloat(pt.AlgBW, 'f', 2, 64), strconv.FormatFloat(pt.BusBW, 'f', 2, 64)}
	}
	return nil
}

// ranksKey is the Go benchmark name key of a run of more than a pair
// ("/ranks=8"), so that benchstat never pools runs of different sizes.
func ranksKey(s bench.Spec) string {
	if s.Ranks == 0 {
		return ""
	}
	return "/ranks=" + strconv.Itoa(s.Ranks)
}

// osuMulti writes a multi-rank result's block. mbw_mr, multi_lat and
// alltoall carry OSU's own title and columns (osu_mbw_mr's, osu_multi_lat's
// and osu_alltoall's with -f), so that OSU's scripts and gotune import
// read them; the gotune label and the placement follow as "#" lines, which
// OSU's readers skip. Incast, which OSU lacks, has gotune's title; the
// collectives have OSU's titles and columns (osu_allreduce's, ...).
func osuMulti(w io.Writer, r bench.Result, title string) {
	s := r.Spec
	if s.Pattern == bench.Incast {
		fmt.Fprintf(w, "# gotune %s: %s\n", title, r.Label)
	} else {
		fmt.Fprintf(w, "# OSU MPI %s\n# %s\n", title, r.Label)
	}
	fmt.Fprintf(w, "# %s\n", s.Placement())
	switch s.Pattern {
	case bench.MultiBandwidth:
		fmt.Fprintf(w, "# [ pairs: %d ] [ window size: %d ]\n", s.RankCount()/2, s.Window)
	case bench.Incast:
		fmt.Fprintf(w, "# [ senders: %d ] [ window size: %d ]\n", s.RankCount()-1, s.Window)
	}
	switch s.Pattern {
	case bench.MultiBandwidth, bench.Incast:
		osuHeader(w, "MB/s", "Messages/s")
	case bench.AllToAll, bench.AllReduce, bench.AllGather, bench.ReduceScatter, bench.Broadcast:
		fmt.Fprintf(w, "%-*s%*s%*s%*s%*s\n", osuSizeWidth, "# Size", osuFieldWidth, "Avg Latency(us)",
			osuFieldWidth, "Min Latency(us)", osuFieldWidth, "Max Latency(us)", osuIterWidth, "Iterations")
	default:
		osuHeader(w, "Avg Latency(us)")
	}
	for _, p := range r.Points {
		switch s.Pattern {
		case bench.MultiBandwidth, bench.Incast:
			osuRow(w, p.Size, p.Median, p.MsgRate)
		case bench.AllToAll, bench.AllReduce, bench.AllGather, bench.ReduceScatter, bench.Broadcast:
			fmt.Fprintf(w, "%-*d%*.*f%*.*f%*.*f%*d\n", osuSizeWidth, p.Size, osuFieldWidth, osuPrecision, p.Median,
				osuFieldWidth, osuPrecision, p.RankMin, osuFieldWidth, osuPrecision, p.RankMax, osuIterWidth, p.Iters)
		default:
			osuRow(w, p.Size, p.Median)
		}
	}
}

// osuIterWidth is the width of OSU's Iterations column (-f).
const osuIterWidth = 12
