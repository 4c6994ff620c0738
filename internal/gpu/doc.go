// Package gpu owns the GPU topology facts gotune acts on: which NVIDIA GPUs a
// node has, how each pair is connected (NVLink, or the PCIe/SMP path that
// nvidia-smi topo -m prints as PIX/PXB/PHB/NODE/SYS), whether peer-to-peer
// access works between them, and which CPUs and NUMA node are local to each
// GPU. The benchmark uses the facts to pick the GPU pair to measure
// (Topology.BestPair) and the launcher to pin each rank NUMA-local to its GPU
// (Topology.CPUsNear).
//
// The facts come from a Source, a narrow interface over the few NVML queries
// gotune needs, so that tests run against a fake. OpenNVML is the real one: it
// loads libnvidia-ml.so.1 only when called, and where the library or the
// driver is missing it fails with an error matching ErrNotSupported. CPU and
// NUMA affinity are read from sysfs (/sys/bus/pci/devices/<bus id>/) where
// present, NVML's answer being the fallback.
package gpu
