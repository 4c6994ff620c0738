// Package torch measures PyTorch's NCCL send/recv with the GPU baselines
// script (scripts/gpu/baselines.py) as bench results, so that gotune
// stacks --gpu puts PyTorch beside gotune's GPU transports in one
// interleaved run. It owns the script's invocation and reading its JSON
// lines; the script owns the measurement.
package torch
