#!/bin/bash
# The full-node set on this node, in one run: the shared memory sm's channels
# take at N ranks (doctor), the hazard probes H5 and H8 at N ranks (safe forms
# must pass, unsafe twins must be caught), incast with N-1 senders validated,
# and gotune's multi-rank patterns beside the MPI stacks on PATH (gotune
# stacks --ranks N). Each step's log, summary.txt and the stacks' tables go
# under OUT; the exit status is 1 when a step did not end as it must.
#
#   scripts/fullnode/run.sh [GOTUNE]
#
# Environment: RANKS (an even N, or node: one per CPU of this cpuset; default
# node), REPS (interleaved rounds of stacks, default 5), OUT (default
# results/fullnode/<host>-<UTC time>), TRANSPORTS (gotune transports beside sm
# in stacks, default cma), PROFILE (a profile: gotune auto joins, the
# reference), STACKS_ARGS (more flags for gotune stacks, e.g. --osu DIR).
set -uo pipefail
G=${1:-bin/gotune}
N=${RANKS:-node}
[ "$N" = node ] && N=$(nproc)
REPS=${REPS:-5}
OUT=${OUT:-results/fullnode/$(hostname)-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT" || exit 1
S=$OUT/summary.txt
failed=0

# step NAME WANT CMD...: runs CMD with its output in NAME.log and says in the
# summary whether it exited WANT (0: passed; 3: a probe's hazard caught).
step() {
	local name=$1 want=$2
	shift 2
	printf '==== %s: %s\n' "$name" "$*" | tee -a "$S"
	"$@" >"$OUT/$name.log" 2>&1 </dev/null
	local rc=$?
	if [ "$rc" = "$want" ]; then
		echo "ok (exit $rc)" | tee -a "$S"
	else
		echo "FAILED: exit $rc, want $want (see $name.log)" | tee -a "$S"
		failed=1
	fi
}

echo "full node: $N ranks on $(hostname), $(nproc) CPUs, $("$G" version 2>/dev/null | head -1)" | tee "$S"
step doctor 0 "$G" doctor --ranks "$N"
grep -h '^sm memory' "$OUT/doctor.log" | tee -a "$S"
step h5 0 "$G" probe H5 --ranks "$N" -q
step h5-unsafe 3 "$G" probe H5 --ranks "$N" --unsafe -q
step h8 0 "$G" probe H8 --ranks "$N" -q
step h8-unsafe 3 "$G" probe H8 --ranks "$N" --unsafe -q
step incast 0 "$G" bench --ranks "$N" -t sm -p incast -s 8,64K --reps 3 --validate -q
prof=()
[ -n "${PROFILE:-}" ] && prof=(--profile "$PROFILE" --reference "gotune auto")
# shellcheck disable=SC2086 # STACKS_ARGS is flags, split on purpose
step stacks 0 "$G" stacks --ranks "$N" --reps "$REPS" --bw-sizes 8,4K,64K,1M --alltoall-sizes 1K,64K \
	--transports "${TRANSPORTS:-cma}" "${prof[@]}" --out "$OUT" ${STACKS_ARGS:-}
cat "$OUT"/stacks-*.txt 2>/dev/null | tee -a "$S"
echo "results: $OUT" | tee -a "$S"
exit $failed
