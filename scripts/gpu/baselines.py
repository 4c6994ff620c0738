#!/usr/bin/env python3
"""GPU transfer baselines for gotune, measured with PyTorch (and NCCL through
torch.distributed) on the machine gotune's GPU transports run on.

Measurements (GB = 1e9 bytes, bytes counted once; every figure is the median
over --reps repetitions, each timed with CUDA events after a warm-up):

  torch_peer_copy      dst(cuda:1).copy_(src(cuda:0), non_blocking=True), GB/s
  torch_h2d_pinned     cuda:D .copy_(pinned host), GB/s
  torch_h2d_pageable   cuda:D .copy_(pageable host), GB/s
  torch_d2h_pinned     pinned host .copy_(cuda:D), GB/s
  torch_d2h_pageable   pageable host .copy_(cuda:D), GB/s
  nccl_sendrecv_bw     2 processes, rank 0 (cuda:0) sends to rank 1 (cuda:1):
                       per iteration a window of back-to-back isend/irecv,
                       then a 4-byte ack back (as OSU osu_bw), GB/s
  nccl_sendrecv_lat    ping-pong, each message synchronized by the host
                       (as OSU osu_xccl_latency), one-way = RTT/2, us
  nccl_sendrecv_lat_stream
                       the same ping-pong enqueued without host syncs
                       (device-side latency, launch overhead hidden), us
  nccl_all_reduce, nccl_all_gather, nccl_reduce_scatter, nccl_broadcast
                       2 processes call the collective and synchronize
                       once per iteration (as gotune bench -p all_reduce
                       ... -t nccl does); size is nccl-tests' (the whole
                       buffer; float32 sums), us per call

One JSON object per measurement and size goes to --out (JSON lines); a table
goes to stdout. Exit status 1 when any measurement failed.
"""
import os

# NVLink multicast (NVLS) must stay off: it can take the shared host's GPUs
# down. Forced (not just defaulted) before anything can initialize CUDA or
# NCCL; spawned ranks re-import this module and get the same.
_SAFE_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


def _force_safe_env():
    for k, v in _SAFE_ENV.items():
        old = os.environ.get(k)
        if old is not None and old != v:
            print(f"baselines: overriding {k}={old} with {v} (NVLink multicast stays off)", flush=True)
        os.environ[k] = v


_force_safe_env()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
GB = 1e9

DEFAULT_SIZES = "1K,1M,16M,256M"
DEFAULT_LAT_SIZES = "8,1K"
GROUPS = {
    "peer": ["torch_peer_copy"],
    "h2d": ["torch_h2d_pinned", "torch_h2d_pageable"],
    "d2h": ["torch_d2h_pinned", "torch_d2h_pageable"],
    "nccl": ["nccl_sendrecv_bw", "nccl_sendrecv_lat", "nccl_sendrecv_lat_stream"],
    "nccl_coll": ["nccl_all_reduce", "nccl_all_gather", "nccl_reduce_scatter", "nccl_broadcast"],
}
ALL_NAMES = [n for g in GROUPS.values() for n in g]

# Automatic iteration counts: each timed region moves about COPY_TARGET bytes
# (>= ~1 ms even at 400 GB/s), within [lo, hi] operations.
COPY_TARGET = 2 * GiB
COPY_ITERS = (5, 1000)
NCCL_TARGET = 4 * GiB
NCCL_WINDOWS = (1, 20)
LAT_ITERS = 1000
LAT_WARMUP = 100


def parse_size(s):
    t = s.strip().upper().removesuffix("IB").removesuffix("B")
    mult = 1
    for suf, m in (("K", KiB), ("M", MiB), ("G", GiB)):
        if t.endswith(suf):
            t, mult = t[:-1], m
            break
    try:
        n = int(t) * mult
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad size {s!r}: want e.g. 8, 1K, 16M, 1G") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"bad size {s!r}: must be > 0")
    return n


def parse_sizes(s):
    sizes = [parse_size(x) for x in s.split(",") if x.strip()]
    if not sizes:
        raise argparse.ArgumentTypeError("empty size list")
    return sizes


def human(n):
    for suf, m in (("G", GiB), ("M", MiB), ("K", KiB)):
        if n >= m and n % m == 0:
            return f"{n // m}{suf}"
    return str(n)


def clamp_iters(size, target, lo, hi):
    return max(lo, min(hi, math.ceil(target / size)))


def sig(x):
    """x to 6 significant digits (JSON stays short, small values keep precision)."""
    return float(f"{x:.6g}")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Reporter:
    """Writes JSON lines (flushed one by one, so a killed run keeps what it
    measured) and the stdout table."""

    HEAD = f"{'name':<26} {'size':>6} {'unit':>5} {'median':>11} {'min':>11} {'max':>11} {'iters':>6} {'reps':>4}"

    def __init__(self, path, common):
        self.f = open(path, "w") if path else None
        self.common = common
        self.rows = 0

    def emit(self, name, size, unit, vals, iters, window=None, method=""):
        rec = {
            "name": name, "size": size, "unit": unit,
            "median": sig(statistics.median(vals)), "min": sig(min(vals)), "max": sig(max(vals)),
            "reps": len(vals),
        }
        rec.update(self.common)
        rec.update({"iters": iters, "window": window, "method": method})
        if self.f:
            self.f.write(json.dumps(rec) + "\n")
            self.f.flush()
        if self.rows % 20 == 0:
            print(self.HEAD, flush=True)
        self.rows += 1
        print(f"{name:<26} {human(size):>6} {unit:>5} {rec['median']:>11.4g} {rec['min']:>11.4g} "
              f"{rec['max']:>11.4g} {iters:>6} {len(vals):>4}", flush=True)

    def close(self):
        if self.f:
            self.f.close()


# --------------------------------------------------------------- one process


def time_copies(torch, dst, src, stream, iters, warmup, reps, devices):
    """Seconds per rep of `iters` dst.copy_(src, non_blocking=True), timed by
    events on `stream` (the stream the copies are enqueued on)."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    for _ in range(warmup):
        dst.copy_(src, non_blocking=True)
    secs = []
    for _ in range(reps):
        for d in devices:
            torch.cuda.synchronize(d)
        start.record(stream)
        for _ in range(iters):
            dst.copy_(src, non_blocking=True)
        end.record(stream)
        end.synchronize()
        secs.append(start.elapsed_time(end) * 1e-3)
    for d in devices:
        torch.cuda.synchronize(d)
    return secs


def run_copy(torch, rep, name, method, dst_full, src_full, stream, devices, args):
    for size in args.sizes:
        dst, src = dst_full[:size], src_full[:size]
        iters = args.iters or clamp_iters(size, COPY_TARGET, *COPY_ITERS)
        warmup = args.warmup if args.warmup is not None else min(iters, 100)
        secs = time_copies(torch, dst, src, stream, iters, warmup, args.reps, devices)
        rep.emit(name, size, "GB/s", [size * iters / s / GB for s in secs], iters, method=method)


def run_peer(torch, rep, args):
    ngpu = torch.cuda.device_count()
    if ngpu < 2:
        raise RuntimeError(f"needs 2 GPUs, have {ngpu}")
    maxsz = max(args.sizes)
    src = torch.empty(maxsz, dtype=torch.uint8, device="cuda:0").fill_(1)
    dst = torch.empty(maxsz, dtype=torch.uint8, device="cuda:1").fill_(0)
    peer = torch.cuda.can_device_access_peer(0, 1)
    # torch enqueues a cross-device copy on the source device's current
    # stream (with event barriers against the destination's current stream),
    # so the events go on cuda:0's current stream.
    s0 = torch.cuda.current_stream(0)
    run_copy(torch, rep, "torch_peer_copy", f"copy_ cuda:0->cuda:1 peer_access={peer}",
             dst, src, s0, [0, 1], args)
    del src, dst
    torch.cuda.empty_cache()


def run_host(torch, rep, name, args):
    """One of torch_{h2d,d2h}_{pinned,pageable} on --device."""
    d, maxsz = args.device, max(args.sizes)
    pinned = name.endswith("_pinned")
    kind = "pinned" if pinned else "pageable"
    gbuf = torch.empty(maxsz, dtype=torch.uint8, device=torch.device("cuda", d)).fill_(2)
    hbuf = torch.empty(maxsz, dtype=torch.uint8, pin_memory=pinned)
    hbuf.fill_(3)  # fault every page in before timing
    # A host<->device copy is enqueued on the GPU's current stream.
    s = torch.cuda.current_stream(d)
    if name.startswith("torch_h2d"):
        run_copy(torch, rep, name, f"copy_ host({kind})->cuda:{d}", gbuf, hbuf, s, [d], args)
    else:
        run_copy(torch, rep, name, f"copy_ cuda:{d}->host({kind})", hbuf, gbuf, s, [d], args)
    del gbuf, hbuf
    torch.cuda.empty_cache()


# ------------------------------------------------------------- two processes


def _nccl_worker(rank, cfg, q):
    _force_safe_env()
    try:
        _nccl_rank(rank, cfg, q)
    except BaseException:
        q.put(("error", f"rank {rank}: {traceback.format_exc()}"))
        raise


def _nccl_rank(rank, cfg, q):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(cfg["port"])
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=2, device_id=dev,
                            timeout=timedelta(seconds=cfg["timeout"]))
    peer = 1 - rank
    want = cfg["want"]
    maxsz = max(cfg["sizes"] + cfg["lat_sizes"])
    buf = torch.empty(maxsz, dtype=torch.uint8, device=dev).fill_(rank + 1)
    tok = torch.zeros(4, dtype=torch.uint8, device=dev)
    cs = torch.cuda.current_stream(dev)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)

    def align():
        # A 4-byte ping-pong, then both sides drain: the ranks start a rep
        # within about one latency of each other.
        if rank == 0:
            dist.send(tok, peer)
            dist.recv(tok, peer)
        else:
            dist.recv(tok, peer)
            dist.send(tok, peer)
        torch.cuda.synchronize(dev)

    def bw(b, window, windows):
        # osu_bw: a window of messages in flight, then the receiver acks.
        for _ in range(windows):
            if rank == 0:
                works = [dist.isend(b, peer) for _ in range(window)]
                for w in works:
                    w.wait()  # the current stream waits for the NCCL stream
                dist.recv(tok, peer)
            else:
                works = [dist.irecv(b, peer) for _ in range(window)]
                for w in works:
                    w.wait()
                dist.send(tok, peer)

    def pingpong(b, n, host_sync):
        for _ in range(n):
            if rank == 0:
                dist.send(b, peer)
                if host_sync:
                    cs.synchronize()
                dist.recv(b, peer)
            else:
                dist.recv(b, peer)
                if host_sync:
                    cs.synchronize()
                dist.send(b, peer)
            if host_sync:
                cs.synchronize()

    def timed(fn, *a):
        align()
        start.record(cs)
        fn(*a)
        end.record(cs)
        end.synchronize()
        return start.elapsed_time(end) * 1e-3

    align()  # creates the communicator outside any timing
    reps, window = cfg["reps"], cfg["window"]
    if "nccl_sendrecv_bw" in want:
        for size in cfg["sizes"]:
            b = buf[:size]
            windows = cfg["iters"] or clamp_iters(size, NCCL_TARGET / window, *NCCL_WINDOWS)
            warm = cfg["warmup"] if cfg["warmup"] is not None else max(1, min(windows, 4))
            bw(b, window, warm)
            secs = [timed(bw, b, window, windows) for _ in range(reps)]
            if rank == 0:
                q.put(("result", dict(name="nccl_sendrecv_bw", size=size, unit="GB/s",
                                      vals=[size * window * windows / s / GB for s in secs],
                                      iters=windows, window=window,
                                      method=f"isend x{window} + 4 B ack per iteration, rank0 cuda:0 -> rank1 cuda:1")))
    for name, host_sync in (("nccl_sendrecv_lat", True), ("nccl_sendrecv_lat_stream", False)):
        if name not in want:
            continue
        for size in cfg["lat_sizes"]:
            b = buf[:size]
            n = cfg["iters"] or LAT_ITERS
            warm = cfg["warmup"] if cfg["warmup"] is not None else LAT_WARMUP
            pingpong(b, warm, host_sync)
            secs = [timed(pingpong, b, n, host_sync) for _ in range(reps)]
            if rank == 0:
                how = "host synchronizes every message" if host_sync else "enqueued, no host sync"
                q.put(("result", dict(name=name, size=size, unit="us",
                                      vals=[s / (2 * n) * 1e6 for s in secs], iters=n, window=None,
                                      method=f"send/recv ping-pong, one-way = RTT/2, {how}")))
    for name in ("nccl_all_reduce", "nccl_all_gather", "nccl_reduce_scatter", "nccl_broadcast"):
        if name not in want:
            continue
        for size in cfg["sizes"]:
            call = _collective(torch, dist, name, size, dev)
            if call is None:
                continue  # too small to give each rank an element

            def calls(k):
                for _ in range(k):
                    call()
                    cs.synchronize()
            n = cfg["iters"] or (100 if size > 8192 else 1000)
            calls(cfg["warmup"] if cfg["warmup"] is not None else 10)
            secs = [timed(calls, n) for _ in range(reps)]
            if rank == 0:
                q.put(("result", dict(name=name, size=size, unit="us", vals=[s / n * 1e6 for s in secs],
                                      iters=n, window=None,
                                      method="one call, then the host synchronizes, per iteration")))
    torch.cuda.synchronize(dev)
    dist.destroy_process_group()
    if rank == 0:
        q.put(("done", None))


def _collective(torch, dist, name, size, dev, n=2):
    """One call of the collective on nccl-tests' size (the whole buffer),
    or None when the size gives a rank no element."""
    if name == "nccl_all_reduce":
        if size < 4:
            return None
        x = torch.ones(size // 4, device=dev)
        return lambda: dist.all_reduce(x)
    if name == "nccl_all_gather":
        if size < n:
            return None
        y = torch.ones(size // n, dtype=torch.uint8, device=dev)
        o = torch.empty(size // n * n, dtype=torch.uint8, device=dev)
        return lambda: dist.all_gather_into_tensor(o, y)
    if name == "nccl_reduce_scatter":
        per = size // (4 * n)
        if per == 0:
            return None
        y = torch.ones(per * n, device=dev)
        o = torch.empty(per, device=dev)
        return lambda: dist.reduce_scatter_tensor(o, y)
    x = torch.ones(size, dtype=torch.uint8, device=dev)
    return lambda: dist.broadcast(x, 0)


def _nccl_available():
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return dist.is_available() and dist.is_nccl_available()


def run_nccl(rep, want, args, errors):
    import torch.multiprocessing as mp

    cfg = dict(port=free_port(), sizes=args.sizes, lat_sizes=args.lat_sizes, reps=args.reps,
               iters=args.iters, warmup=args.warmup, window=args.window, want=want,
               timeout=args.nccl_timeout)
    q = mp.get_context("spawn").SimpleQueue()
    deadline = time.monotonic() + args.nccl_timeout
    pc = mp.spawn(_nccl_worker, args=(cfg, q), nprocs=2, join=False, start_method="spawn")
    done = False

    def drain():
        nonlocal done
        while not q.empty():
            kind, item = q.get()
            if kind == "result":
                rep.emit(item["name"], item["size"], item["unit"], item["vals"], item["iters"],
                         window=item["window"], method=item["method"])
            elif kind == "error":
                errors.append(f"nccl: {item}")
            elif kind == "done":
                done = True

    try:
        while True:
            drain()
            try:
                if pc.join(timeout=1):
                    break
            except Exception as e:  # a rank failed; spawn terminated the other
                errors.append(f"nccl: {type(e).__name__}: {e}")
                break
            if time.monotonic() > deadline:
                errors.append(f"nccl: not done after --nccl-timeout {args.nccl_timeout}s; ranks killed")
                break
    finally:
        drain()
        for p in pc.processes:
            if p.is_alive():
                p.terminate()
                p.join(5)
            if p.is_alive():
                p.kill()
                p.join(5)
    if not done and not any(e.startswith("nccl") for e in errors):
        errors.append("nccl: ranks exited without finishing")


# ---------------------------------------------------------------------- main


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="PyTorch/NCCL GPU transfer baselines for gotune (CUDA events, median over reps).",
        epilog="Measurements: " + ", ".join(ALL_NAMES) + ". Groups for --only: " + ", ".join(GROUPS),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--sizes", type=parse_sizes, default=DEFAULT_SIZES,
                   help="bandwidth sizes, comma-separated, K/M/G = 2^10/2^20/2^30")
    p.add_argument("--lat-sizes", type=parse_sizes, default=DEFAULT_LAT_SIZES, help="NCCL latency sizes")
    p.add_argument("--reps", type=int, default=10, help="timed repetitions per point (median/min/max over them)")
    p.add_argument("--iters", type=int, default=0,
                   help="timed operations per rep: copies, NCCL windows, or round trips (0: scaled by size "
                        f"so a rep moves ~{COPY_TARGET // GiB} GiB, copies {COPY_ITERS[0]}..{COPY_ITERS[1]}; "
                        f"NCCL bw ~{NCCL_TARGET // GiB} GiB, windows {NCCL_WINDOWS[0]}..{NCCL_WINDOWS[1]}; "
                        f"latency {LAT_ITERS})")
    p.add_argument("--warmup", type=int, default=None,
                   help=f"untimed operations before each point (default: min(iters,100) copies, "
                        f"up to 4 NCCL windows, {LAT_WARMUP} round trips)")
    p.add_argument("--window", type=int, default=64, help="NCCL bw: messages in flight per iteration (OSU: 64)")
    p.add_argument("--device", type=int, default=0, help="GPU for the host<->device copies")
    p.add_argument("--only", default="", help="comma-separated measurement names or groups (default: all)")
    p.add_argument("--nccl-timeout", type=int, default=180, help="seconds before the NCCL ranks are killed")
    p.add_argument("--out", default="", help="write JSON lines here (the file is replaced)")
    a = p.parse_args(argv)
    if a.reps < 1 or a.iters < 0 or a.window < 1 or (a.warmup is not None and a.warmup < 0):
        p.error("--reps and --window must be >= 1, --iters and --warmup >= 0")
    want = []
    for tok in [t.strip() for t in a.only.split(",") if t.strip()] or list(GROUPS):
        if tok in GROUPS:
            want += GROUPS[tok]
        elif tok in ALL_NAMES:
            want.append(tok)
        else:
            p.error(f"--only {tok!r}: want one of {', '.join(list(GROUPS) + ALL_NAMES)}")
    a.want = [n for n in ALL_NAMES if n in want]
    return a


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # SIGTERM (e.g. from timeout(1)) unwinds like Ctrl-C, so spawned ranks are reaped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        import torch
    except ImportError as e:
        print(f"baselines: PyTorch is not importable: {e}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("baselines: torch.cuda.is_available() is False", file=sys.stderr)
        return 2
    ngpu = torch.cuda.device_count()
    nccl = None
    try:
        import torch.cuda.nccl

        v = torch.cuda.nccl.version()
        nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:
        pass
    common = {"torch": torch.__version__, "gpus": [torch.cuda.get_device_name(i) for i in range(ngpu)],
              "host": socket.gethostname(), "cuda": torch.version.cuda, "nccl": nccl}
    print(f"# torch {common['torch']} cuda {common['cuda']} nccl {nccl} host {common['host']}")
    for i, g in enumerate(common["gpus"]):
        print(f"# cuda:{i} {g}")
    print("# env " + " ".join(f"{k}={os.environ[k]}" for k in _SAFE_ENV), flush=True)
    rep = Reporter(args.out, common)
    errors = []
    t0 = time.monotonic()
    try:
        for name in args.want:
            if name.startswith("nccl"):
                continue
            try:
                if name == "torch_peer_copy":
                    run_peer(torch, rep, args)
                else:
                    run_host(torch, rep, name, args)
            except Exception as e:
                traceback.print_exc()
                errors.append(f"{name}: {type(e).__name__}: {e}")
        nc = [n for n in args.want if n.startswith("nccl")]
        if nc:
            if ngpu < 2:
                errors.append(f"nccl: needs 2 GPUs, have {ngpu}")
            elif not _nccl_available():
                errors.append("nccl: torch.distributed with NCCL is not available")
            else:
                run_nccl(rep, nc, args, errors)
    finally:
        rep.close()
    print(f"# {rep.rows} measurements in {time.monotonic() - t0:.1f}s", flush=True)
    for e in errors:
        print(f"baselines: FAILED {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
