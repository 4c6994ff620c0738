// Package importer reads the output of other benchmark tools (OSU
// Micro-Benchmarks, IMB, nccl-tests, ucx_perftest, perftest) into gotune's
// result schema, so that they compare with gotune's own runs and each
// other. Units are normalised to gotune's: latency in µs, bandwidth in MB/s
// (10^6 bytes per second), message rate in msg/s.
package importer
