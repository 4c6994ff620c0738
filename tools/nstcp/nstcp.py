#!/usr/bin/env python3
"""gotune tcp beside Open MPI's btl tcp between two namespace-hosts, with
iperf3 as the ceiling, in interleaved rounds.

usage: nstcp.py ROUNDS SIZES OUT.jsonl

Every round runs, in an order that rotates with the round: Open MPI's
reference benchmark (anchor, built with mpicc.openmpi) over
`--mca pml ob1 --mca btl tcp,self`, gotune's `bench -t tcp` started by the
same mpirun with `--launcher mpirun`, both for bandwidth at SIZES and 8-byte
latency, and one iperf3 run from host 2 to host 1. Each record goes to
OUT.jsonl as it is measured; the end prints, per size, the median over
rounds of the round's gotune/Open MPI ratio (medians of the repetitions)
with its range, and the iperf3 ceiling against both.

Binding: namespace-hosts share one machine's CPUs, and Open MPI binds the
first rank of every "host" to core 0, so two busy-polling ranks would share
a core and each message would wait a scheduler tick (4 ms at HZ=250). As
on a real cluster each rank gets a core of its own: Open MPI's anchor
through a rankfile (rank i on slot i of host i+1), gotune with
`--bind-to none` so that its launcher pins rank i to the i-th CPU itself.

Environment: NSHOSTS (the nshosts command, default nshosts), SLOT (its
cluster, default 0), GOTUNE (the gotune binary), ANCHOR (the anchor
binary), REPS (repetitions per size, default 5), OPTS (extra gotune bench
arguments, e.g. "--opt tcp.conns=2").
"""
import json
import os
import shlex
import statistics
import subprocess
import sys


def run(argv):
    # mpirun forwards stdin to rank 0: give it none, or a caller's stdin
    # that never closes keeps the job from ending.
    try:
        p = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           timeout=float(os.environ.get("STEP_TIMEOUT", "300")))
    except subprocess.TimeoutExpired as e:
        sys.exit("nstcp: %s timed out after %ss:\n%s" % (" ".join(argv), e.timeout, e.stderr or ""))
    if p.returncode != 0:
        sys.exit("nstcp: %s failed (%d):\n%s%s" % (" ".join(argv), p.returncode, p.stdout, p.stderr))
    return p.stdout


def mpirun_args(nshosts, slot):
    return shlex.split(run([nshosts, "mpirun-args", "-slot", slot]))


def nbytes(s):
    """A size as gotune writes it (64K, 16M) in bytes: the anchor takes plain counts."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:].upper(), 1)
    return str(int(s[:-1] if mult > 1 else s) * mult)


def rankfile(base, path):
    """Writes a rankfile putting rank i on slot i of the hostfile's host i+1."""
    with open(base[base.index("--hostfile") + 1]) as f:
        hosts = [line.split()[0] for line in f if line.strip() and not line.startswith("#")]
    with open(path, "w") as f:
        for i, h in enumerate(hosts[:2]):
            f.write("rank %d=%s slot=%d\n" % (i, h, i))
    return path


def ompi(base, anchor, pattern, sizes, reps):
    sizes = ",".join(nbytes(s) for s in sizes.split(","))
    rf = rankfile(base, os.path.join(os.environ.get("TMPDIR", "/tmp"), "nstcp-rankfile"))
    argv = ["mpirun"] + base + ["-np", "2", "--rankfile", rf, "--mca", "pml", "ob1", "--mca", "btl", "tcp,self",
                                anchor, pattern, sizes, str(reps), "0", "0", "64" if pattern == "bw" else "1"]
    out = {}
    for line in run(argv).splitlines():
        f = line.split()
        if len(f) == 4 and f[0] == "rep":
            out.setdefault(int(f[1]), []).append(float(f[3]))
    return {s: statistics.median(v) for s, v in out.items()}


def gotune(base, exe, pattern, sizes, reps, opts):
    argv = ["mpirun"] + base + ["-np", "2", "--map-by", "node", "--bind-to", "none", exe, "bench", "--launcher", "mpirun",
                                "-t", "tcp", "-p", pattern, "-s", sizes, "--reps", str(reps), "-f", "json", "-q"] + opts
    out = {}
    for line in run(argv).splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("type") == "point":
            out[int(rec["size"])] = statistics.median(rec["samples"])
    return out


def iperf(nshosts, slot):
    out = run([nshosts, "iperf3", "-slot", slot, "-t", "3", "2", "1"])
    for tok, nxt in zip(out.split(), out.split()[1:]):
        if nxt.startswith("Gbit/s"):
            return float(tok) * 1e3 / 8  # MB/s (10^6 bytes)
    sys.exit("nstcp: no Gbit/s in iperf3's output:\n" + out)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    rounds, sizes, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    nshosts, slot = os.environ.get("NSHOSTS", "nshosts"), os.environ.get("SLOT", "0")
    exe, anchor = os.environ.get("GOTUNE", "gotune"), os.environ.get("ANCHOR", "anchor")
    reps, opts = int(os.environ.get("REPS", "5")), shlex.split(os.environ.get("OPTS", ""))
    base = mpirun_args(nshosts, slot)
    jobs = {
        "ompi": lambda: (ompi(base, anchor, "bw", sizes, reps), ompi(base, anchor, "latency", "8", reps)),
        "gotune": lambda: (gotune(base, exe, "bw", sizes, reps, opts), gotune(base, exe, "latency", "8", reps, opts)),
        "iperf3": lambda: ({0: iperf(nshosts, slot)}, {}),
    }
    order = list(jobs)
    recs = []
    with open(path, "a") as f:
        for r in range(rounds):
            for name in order[r % len(order):] + order[:r % len(order)]:
                bw, lat = jobs[name]()
                rec = {"round": r, "who": name, "bw": {str(k): v for k, v in bw.items()}, "lat": {str(k): v for k, v in lat.items()}}
                recs.append(rec)
                f.write(json.dumps(rec) + "\n")
                f.flush()
    report(recs, rounds)


def report(recs, rounds):
    by = {(r["round"], r["who"]): r for r in recs}
    sizes = sorted(int(s) for s in by[(0, "gotune")]["bw"])

    def line(label, ratios):
        ratios.sort()
        print("%8s %.3f [%.3f-%.3f]" % (label, statistics.median(ratios), ratios[0], ratios[-1]))

    print("gotune tcp / Open MPI btl tcp, bandwidth (round-paired medians, %d rounds):" % rounds)
    for s in sizes:
        line(s, [by[(r, "gotune")]["bw"][str(s)] / by[(r, "ompi")]["bw"][str(s)] for r in range(rounds)])
    print("latency 8 B, gotune / Open MPI (below 1 is faster):")
    line(8, [by[(r, "gotune")]["lat"]["8"] / by[(r, "ompi")]["lat"]["8"] for r in range(rounds)])
    big = str(sizes[-1])
    print("largest size against iperf3 (the ceiling):")
    line("gotune", [by[(r, "gotune")]["bw"][big] / by[(r, "iperf3")]["bw"]["0"] for r in range(rounds)])
    line("ompi", [by[(r, "ompi")]["bw"][big] / by[(r, "iperf3")]["bw"]["0"] for r in range(rounds)])


if __name__ == "__main__":
    main()
