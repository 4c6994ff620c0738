#!/usr/bin/env bash
# Device-side runner for gotune's GPU work: topology, the GPU packages' test
# binaries, gotune's GPU benchmarks and the PyTorch/NCCL baselines, in one run
# on one machine. It needs no Go: `make gpu-build` builds bin/ beforehand.
#
#   OUT=dir GOTUNE_GPU_BENCH=$'--transport X --pattern bw --sizes 1K,1M,16M,256M\n...' scripts/gpu/run.sh
#
# Files under $OUT (default results/gpu/<UTC date>):
#   topo.txt           nvidia-smi, topology, gotune topo
#   gpu-tests.log      every bin/*.test -test.v, in its package directory
#   floors.log         the one-process floors of GPU messages (GPU_FLOORS), Go
#                      benchmarks of the test binaries
#   gotune.jsonl       gotune bench --format json of every GOTUNE_GPU_BENCH line
#   gotune-bench.log   gotune bench's stderr/stdout
#   probes.txt         gotune probe ID and ID --unsafe for GOTUNE_GPU_PROBES
#   baselines.jsonl    scripts/gpu/baselines.py --out
#   baselines.txt      its table
#   summary.txt        step status and gotune side by side with the baselines
#
# Every step runs under a time limit and the run goes on past a failure; the
# exit status is 1 when any step failed (or was skipped for lack of time).
#
# Environment (all optional):
#   GOTUNE_GPU_BENCH      newline-separated argument lines for `bin/gotune bench`
#                         (a leading "bin/gotune bench" is dropped; '#' lines are
#                         comments); --format json --out $OUT/gotune.jsonl and a
#                         --timeout are appended
#   GOTUNE_GPU_PROBES     probe IDs to run, safe and unsafe ("H2 H4")
#   GOTUNE_GPU_SWEEP      a sweep plan to run (gpu; none by default), its
#                         files under $OUT/sweep (profile and compressed
#                         store copied to $OUT/sweep-*), its log in sweep.log
#   GPU_SWEEP_TIMEOUT     seconds for the sweep (420)
#   GPU_RUN_BUDGET        seconds for the whole run (360)
#   GPU_TEST_TIMEOUT      seconds per test binary (240)
#   GPU_TEST_ARGS         extra test flags, e.g. "-test.run TestIPC" (none)
#   GPU_FLOORS            test binary:benchmark regexp pairs, space-separated
#                         (the host-to-GPU signal, a small copy noticed, the
#                         relay, pinned uploads; empty: none)
#   GPU_BENCH_TIMEOUT     seconds per gotune bench line (90)
#   GPU_BASELINE_TIMEOUT  seconds for baselines.py, reserved out of the budget (150)
#   GPU_BASELINE_ARGS     extra baselines.py arguments (none)
#   GOTUNE_REQUIRE        capabilities whose absence fails a test instead of
#                         skipping it (cuda,gpu)
set -u -o pipefail

# NVLink multicast (NVLS) stays off for everything started from here: it can
# take the shared host's GPUs down.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export GOTUNE_REQUIRE="${GOTUNE_REQUIRE-cuda,gpu}"

cd "$(dirname "$0")/../.." || exit 1
ROOT=$PWD
OUT="${OUT:-results/gpu/$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)

BUDGET=${GPU_RUN_BUDGET:-360}
TEST_TIMEOUT=${GPU_TEST_TIMEOUT:-240}
BENCH_TIMEOUT=${GPU_BENCH_TIMEOUT:-90}
BASELINE_TIMEOUT=${GPU_BASELINE_TIMEOUT:-150}

TOPO=$OUT/topo.txt
TESTLOG=$OUT/gpu-tests.log
FLOORLOG=$OUT/floors.log
GOTUNE_JSON=$OUT/gotune.jsonl
BENCHLOG=$OUT/gotune-bench.log
BASE_JSON=$OUT/baselines.jsonl
BASE_TXT=$OUT/baselines.txt
SUMMARY=$OUT/summary.txt
PROBELOG=$OUT/probes.txt
: >"$TOPO"; : >"$TESTLOG"; : >"$GOTUNE_JSON"; : >"$BENCHLOG"; : >"$BASE_TXT"; : >"$SUMMARY"; : >"$PROBELOG"

START=$(date +%s)
DEADLINE=$((START + BUDGET))
FAILED=0
STATUS=()

note() { STATUS+=("$(printf '%-8s %5s  %s' "$1" "$2" "$3")"); }

# step NAME LOG LIMIT DEADLINE DIR FILTER -- CMD...
# Runs CMD in DIR under min(LIMIT, DEADLINE-now) seconds (timeout(1) signals
# the whole process group, spawned ranks included). The output goes to LOG;
# stdout gets all of it (FILTER ""), none (FILTER -) or the lines matching the
# regex FILTER.
step() {
	local name=$1 log=$2 limit=$3 deadline=$4 dir=$5 filter=$6
	shift 7
	local now left rc t0 secs
	now=$(date +%s)
	left=$((deadline - now))
	((limit > left)) && limit=$left
	if ((limit < 5)); then
		echo "==== SKIPPED $name: out of time (budget ${BUDGET}s) ====" | tee -a "$log"
		note SKIPPED - "$name (out of time)"
		FAILED=1
		return
	fi
	printf '\n==== [%s +%ss, limit %ss] %s ====\n' "$(date -u +%H:%M:%S)" "$((now - START))" "$limit" "$name" | tee -a "$log"
	t0=$(date +%s)
	# stdin from /dev/null: the caller may be reading its own input.
	if [ -z "$filter" ]; then
		(cd "$dir" && exec timeout -k 10 "$limit" "$@") </dev/null 2>&1 | tee -a "$log"
		rc=${PIPESTATUS[0]}
	elif [ "$filter" = - ]; then
		(cd "$dir" && exec timeout -k 10 "$limit" "$@") </dev/null >>"$log" 2>&1
		rc=$?
	else
		(cd "$dir" && exec timeout -k 10 "$limit" "$@") </dev/null 2>&1 | tee -a "$log" | grep --line-buffered -E "$filter"
		rc=${PIPESTATUS[0]}
	fi
	secs=$(($(date +%s) - t0))
	if ((rc == 0)); then
		note PASS "${secs}s" "$name"
	elif ((rc == 124 || rc == 137)); then
		note TIMEOUT "${secs}s" "$name (limit ${limit}s)"
		FAILED=1
	else
		note "FAIL($rc)" "${secs}s" "$name"
		FAILED=1
	fi
	echo "---- $name: rc=$rc ${secs}s" | tee -a "$log"
}

# pkgdir_for bin/internal_cuda.test -> internal/cuda: the test binary's name is
# its package path with "/" written "_" (make gpu-build names them so).
pkgdir_for() {
	local name d
	name=$(basename "$1" .test)
	if [ -d "${name//_//}" ]; then
		echo "${name//_//}"
		return 0
	fi
	# A directory whose own name holds "_": compare every path spelled that way.
	while IFS= read -r d; do
		d=${d#./}
		if [ "${d//\//_}" = "$name" ]; then
			echo "$d"
			return 0
		fi
	done < <(find . -name .git -prune -o -name results -prune -o -name testdata -prune -o -type d -print)
	return 1
}

PRE_DEADLINE=$((DEADLINE - BASELINE_TIMEOUT)) # what the steps before the baselines may use
NOW=$(date +%s)
((PRE_DEADLINE < NOW + 30)) && PRE_DEADLINE=$((NOW + 30))

echo "gotune GPU run: $(date -u +%FT%TZ) on $(hostname), OUT=$OUT, budget ${BUDGET}s"
echo "env: NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS GOTUNE_REQUIRE=$GOTUNE_REQUIRE"

# ---- 1. topology
step "nvidia-smi -L" "$TOPO" 30 "$PRE_DEADLINE" . "" -- nvidia-smi -L
step "nvidia-smi topo -m" "$TOPO" 30 "$PRE_DEADLINE" . "" -- nvidia-smi topo -m
step "nvidia-smi" "$TOPO" 30 "$PRE_DEADLINE" . "^\| NVIDIA-SMI" -- nvidia-smi
step "nvidia-smi nvlink --status" "$TOPO" 30 "$PRE_DEADLINE" . "^GPU" -- nvidia-smi nvlink --status
step "host (uname, glibc, CPUs, NUMA)" "$TOPO" 30 "$PRE_DEADLINE" . "^(Linux|ldd|Model name|NUMA node)" -- \
	sh -c 'uname -a; ldd --version 2>&1 | head -1; lscpu | grep -E "^(Model name|Socket|Core|Thread|NUMA)"; command -v numactl >/dev/null && numactl -H || true'
step "bin/gotune version" "$TOPO" 30 "$PRE_DEADLINE" . "" -- bin/gotune version
step "bin/gotune topo" "$TOPO" 30 "$PRE_DEADLINE" . "" -- bin/gotune topo
step "bin/gotune topo --format json" "$TOPO" 30 "$PRE_DEADLINE" . - -- bin/gotune topo --format json

# ---- 2. the GPU packages' tests, each from its package directory
shopt -s nullglob
TESTS=(bin/*.test)
shopt -u nullglob
if ((${#TESTS[@]} == 0)); then
	echo "no bin/*.test: run make gpu-build first" | tee -a "$TESTLOG"
	note FAIL - "tests: no bin/*.test"
	FAILED=1
fi
read -r -a TEST_ARGS <<<"${GPU_TEST_ARGS:-}"
for t in "${TESTS[@]}"; do
	if ! dir=$(pkgdir_for "$t"); then
		echo "==== SKIPPED $t: no package directory spells $(basename "$t" .test) (stale binary?) ====" | tee -a "$TESTLOG"
		note SKIPPED - "$t (no package directory)"
		continue
	fi
	# -test.timeout a little under the step's limit: Go then prints every
	# goroutine's stack before timeout(1) would kill it silently.
	now=$(date +%s)
	lim=$TEST_TIMEOUT
	((lim > PRE_DEADLINE - now)) && lim=$((PRE_DEADLINE - now))
	((lim > 15)) && tt=$((lim - 10)) || tt=$lim
	step "$t -test.v (in $dir)" "$TESTLOG" "$TEST_TIMEOUT" "$PRE_DEADLINE" "$dir" \
		'^\s*--- (FAIL|SKIP)|^(PASS|FAIL|ok|panic)|^==== ' -- \
		"$ROOT/$t" -test.v -test.count=1 -test.timeout="${tt}s" "${TEST_ARGS[@]}"
done

# ---- 2b. the floors of GPU messages, one process each (docs/performance.md, GPU)
read -r -a FLOORS <<<"${GPU_FLOORS-internal_cuda:GPUSignal|SmallCopyDone|PinnedUpload transports_cudaipc:Relay}"
for f in "${FLOORS[@]}"; do
	t=bin/${f%%:*}.test
	if [ ! -x "$t" ] || ! dir=$(pkgdir_for "$t"); then
		echo "==== SKIPPED floors of $t: no such test binary ====" | tee -a "$FLOORLOG"
		note SKIPPED - "floors of $t (no binary)"
		continue
	fi
	step "$t -test.bench '${f#*:}' (in $dir)" "$FLOORLOG" 120 "$PRE_DEADLINE" "$dir" '^(Benchmark|FAIL|ok|panic)' -- \
		"$ROOT/$t" -test.run '^$' -test.bench "${f#*:}" -test.benchtime 1s -test.count 2
done

# ---- 3. gotune's GPU benchmarks
n=0
while IFS= read -r line; do
	line=${line%%#*}
	read -r -a args <<<"$line"
	((${#args[@]} == 0)) && continue
	case ${args[0]} in bin/gotune | ./bin/gotune | gotune) args=("${args[@]:1}") ;; esac
	[ "${args[0]:-}" = bench ] && args=("${args[@]:1}")
	n=$((n + 1))
	now=$(date +%s)
	lim=$BENCH_TIMEOUT
	((lim > PRE_DEADLINE - now)) && lim=$((PRE_DEADLINE - now))
	((lim > 15)) && gt=$((lim - 10)) || gt=$lim
	step "gotune bench #$n: ${args[*]}" "$BENCHLOG" "$BENCH_TIMEOUT" "$PRE_DEADLINE" . "" -- \
		bin/gotune bench "${args[@]}" --format json --out "$GOTUNE_JSON" --timeout "${gt}s"
done <<<"${GOTUNE_GPU_BENCH:-}"
if ((n == 0)); then
	echo "GOTUNE_GPU_BENCH is empty: no gotune GPU benchmarks run" | tee -a "$BENCHLOG"
	note NONE - "gotune bench (GOTUNE_GPU_BENCH empty)"
fi

# ---- 3b. GPU hazard probes: each ID's safe form, then its unsafe form
# (`gotune probe` exits 0 passed, 3 hazard detected); every verdict line
# goes to probes.txt and the run goes on whatever they say.
for id in ${GOTUNE_GPU_PROBES-H2 H4}; do
	for variant in "" --unsafe; do
		step "gotune probe $id $variant" "$PROBELOG" 60 "$PRE_DEADLINE" . "" -- \
			bash -c 'GOTUNE_PROBE_VERBOSE=1 bin/gotune probe "$@" --deadline 3s; echo "exit status $?"; exit 0' probe "$id" $variant
	done
done

# ---- 3c. a GPU sweep (GOTUNE_GPU_SWEEP names the plan, e.g. gpu): its
# run directory, summary and profile go under $OUT/sweep.
if [ -n "${GOTUNE_GPU_SWEEP:-}" ]; then
	step "gotune sweep --plan $GOTUNE_GPU_SWEEP" "$OUT/sweep.log" "${GPU_SWEEP_TIMEOUT:-420}" "$PRE_DEADLINE" . "" -- \
		bin/gotune sweep --plan "$GOTUNE_GPU_SWEEP" --out "$OUT/sweep"
	# The run directory sits four levels down; its profile and store are
	# copied up beside the summary, where a shallow fetch finds them, the
	# store compressed as the catalogue keeps it (gotune tune --bench writes the
	# run's .bench again, so the run directory's copy goes).
	run=$(ls -d "$OUT"/sweep/*/*/ 2>/dev/null | tail -n 1)
	if [ -n "$run" ]; then
		[ -f "$run/profile.yaml" ] && cp "$run/profile.yaml" "$OUT/sweep-profile.yaml"
		[ -f "$run/measurements.jsonl" ] && gzip -9n -c "$run/measurements.jsonl" >"$OUT/sweep-measurements.jsonl.gz"
		rm -f "$run/measurements.bench"
	fi
fi

# ---- 4. baselines
read -r -a BARGS <<<"${GPU_BASELINE_ARGS:-}"
step "scripts/gpu/baselines.py" "$BASE_TXT" "$BASELINE_TIMEOUT" "$DEADLINE" . "" -- \
	python3 scripts/gpu/baselines.py --out "$BASE_JSON" --nccl-timeout $((BASELINE_TIMEOUT * 2 / 3)) "${BARGS[@]}"

# ---- summary
{
	echo "gotune GPU run $(date -u +%FT%TZ) on $(hostname), $(($(date +%s) - START))s, OUT=$OUT"
	echo
	printf '%s\n' "${STATUS[@]}"
	echo
	python3 scripts/gpu/summarize.py "$GOTUNE_JSON" "$BASE_JSON" 2>&1 || echo "(summarize.py failed)"
} >"$SUMMARY"
echo
echo "==================== summary ($SUMMARY)"
cat "$SUMMARY"
if ((FAILED)); then
	echo "RESULT: FAILED (see the steps above)"
	exit 1
fi
echo "RESULT: OK"
