// Package bench measures transports the way OSU Micro-Benchmarks does, with
// the statistics OSU lacks.
//
// It owns the patterns (latency: blocking ping-pong, RTT/2; bw: a window of
// non-blocking sends then a small acknowledgement; bibw: windows both ways;
// msgrate: messages per second through a window; and over Spec.Ranks ranks
// mbw_mr, multi_lat, incast and alltoall, placed by PlaceRanks), OSU's loop constants, the
// size ladders, payload validation, the per-point statistics (median with a
// 95% confidence interval over repetitions; p50/p90/p99 over iterations) and
// the provenance recorded with every result. The patterns run inside rank
// processes started by internal/launch; Result is what leaves them.
package bench
