#!/usr/bin/env python3
"""Print gotune's GPU results side by side with the PyTorch/NCCL baselines.

usage: summarize.py GOTUNE.jsonl BASELINES.jsonl

GOTUNE.jsonl is `gotune bench --format json` output ("run" lines, each
followed by its "point" lines); BASELINES.jsonl is scripts/gpu/baselines.py
--out. Standard library only. gotune's bandwidth (MB/s, 1e6 B/s as OSU) is
shown in GB/s (1e9 B/s) like the baselines; "x" is gotune / baseline, so
above 1 is better for GB/s and below 1 is better for us.
"""
import json
import sys

MiB = 1 << 20

# Figures measured on the two-H200 machine before these scripts existed: a
# baseline far from its figure says the run (or the machine) is off.
KNOWN = {
    ("torch_peer_copy", 256 * MiB): 387.0,
    ("nccl_sendrecv_bw", 256 * MiB): 359.0,
    ("nccl_sendrecv_lat", 1024): 28.0,
    ("torch_h2d_pinned", 256 * MiB): 55.0,
    ("torch_h2d_pageable", 256 * MiB): 20.0,
}

DEVICE_KINDS = {"device", "pool"}

# --kernel's names for the load fractions (bench.KernelName).
LOAD_NAMES = {0.0: "none", 0.5: "partial", 1.0: "full"}


def load_label(spec, point):
    """The load a point was measured beside: "load none", "load full", and
    "stalled" when a step waited for the kernel (load_stalled)."""
    f = float(spec.get("gpu_load") or 0)
    label = "load " + LOAD_NAMES.get(f, f"{f:g}")
    if point.get("load_stalled"):
        label += " stalled"
    return label


def human(n):
    for suf, m in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= m and n % m == 0:
            return f"{n // m}{suf}"
    return str(n)


def load(path):
    rows = []
    try:
        with open(path) as f:
            for i, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    print(f"{path}:{i}: not JSON ({e}); line skipped")
    except FileNotFoundError:
        print(f"{path}: missing")
    return rows


def comparable(pattern, mem):
    """Baseline names measuring what a gotune point with this pattern and
    these buffer kinds (rank 0 = sender, rank 1 = receiver) measures."""
    kinds = list(mem or ["host"])
    if len(kinds) == 1:
        kinds *= 2
    src, dst = kinds[0], kinds[1]
    dev_src, dev_dst = src in DEVICE_KINDS, dst in DEVICE_KINDS
    if pattern == "latency":
        return ["nccl_sendrecv_lat", "nccl_sendrecv_lat_stream"] if dev_src and dev_dst else []
    if pattern != "bw":
        return []
    if dev_src and dev_dst:
        return ["torch_peer_copy", "nccl_sendrecv_bw"]
    if dev_dst and src in ("pinned", "host"):
        return ["torch_h2d_pinned" if src == "pinned" else "torch_h2d_pageable"]
    if dev_src and dst in ("pinned", "host"):
        return ["torch_d2h_pinned" if dst == "pinned" else "torch_d2h_pageable"]
    return []


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2])
        return 2
    gotune, base = load(argv[1]), load(argv[2])
    bl = {(b["name"], b["size"]): b for b in base if "name" in b and "size" in b}

    print("Baselines (PyTorch/NCCL, median over reps; known = earlier figure on this machine)")
    if base:
        b0 = base[0]
        print(f"  torch {b0.get('torch')} cuda {b0.get('cuda')} nccl {b0.get('nccl')} gpus {b0.get('gpus')}")
    print(f"  {'name':<26} {'size':>6} {'unit':>5} {'median':>10} {'min':>10} {'max':>10} {'known':>7}")
    for b in base:
        k = KNOWN.get((b["name"], b["size"]))
        flag = ""
        if k is not None:
            flag = f"{k:>7g}" + ("  (!)" if abs(b["median"] - k) > 0.15 * k else "")
        print(f"  {b['name']:<26} {human(b['size']):>6} {b['unit']:>5} {b['median']:>10.4g} "
              f"{b['min']:>10.4g} {b['max']:>10.4g} {flag:>7}")
    if not base:
        print("  (none)")

    print()
    print("gotune (median; x = gotune / baseline at the same size; load: the GPU load kernel beside the\n"
          "  timed passes, stalled: a step waited for the kernel to end, so the median measures the kernel)")
    run = {}
    n = 0
    for r in gotune:
        if r.get("type") == "run":
            run = r.get("spec", {})
            continue
        if r.get("type") != "point":
            continue
        n += 1
        pattern = r.get("pattern") or run.get("pattern")
        mem = run.get("mem") or []
        unit, med = r.get("unit"), r.get("median", 0.0)
        if unit == "MB/s":
            unit, med = "GB/s", med / 1000
        opts = ",".join(f"{k}={v}" for k, v in sorted((run.get("options") or {}).items()))
        what = (f"{r.get('transport')} {pattern} mem={'/'.join(mem) or 'host'} {load_label(run, r)}"
                + (f" {opts}" if opts else ""))
        cmp = []
        for name in comparable(pattern, mem):
            b = bl.get((name, r.get("size")))
            if b and b["unit"] == unit and b["median"]:
                cmp.append(f"{name} {b['median']:.4g} x{med / b['median']:.3g}")
        print(f"  {what:<44} {human(r.get('size', 0)):>6} {med:>10.4g} {unit:<5} " + ("  ".join(cmp) or "-"))
        for w in dict.fromkeys(r.get("warnings") or []):
            print(f"      warning: {w}")
    if n == 0:
        print("  (no gotune points)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
