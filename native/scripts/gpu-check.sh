#!/usr/bin/env bash
# The one command to run on the GPU machine: builds vramscope with CUDA (Release) into /tmp/build,
# runs the GPU and CPU test suites, checks that no binary needs libcuda, runs the full benchmark,
# then every GPU test under compute-sanitizer. It keeps going after a failure, records it, and exits
# non-zero if anything failed.
#
#   native/scripts/gpu-check.sh [--no-sanitizer] [--quick-bench] [--no-bench]
#
# Writes $OUT/gpu-check.log (every step's full output), $OUT/bench.json and $OUT/bench.md (the
# tables for docs/benchmarks.md). Stdout stays short: one line a step, the tail of a failing step,
# the benchmark tables and a summary at the very end. Meant to finish well within 9 minutes on an
# H100 with 16 cores; steps are cut off before a fixed deadline (GPU_CHECK_BUDGET_S, default 500).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-/tmp/gpu-check-out}
BUILD=${VRAMSCOPE_GPU_BUILD:-/tmp/build}
JOBS=$(nproc 2>/dev/null || echo 4)
[ "$JOBS" -gt 16 ] && JOBS=16
BUDGET_S=${GPU_CHECK_BUDGET_S:-500}
BENCH_RESERVE_S=200  # kept free for the benchmark until it has run

SANITIZER=1
BENCH_ARGS=()
RUN_BENCH=1
for arg in "$@"; do
  case "$arg" in
    --no-sanitizer) SANITIZER=0 ;;
    --quick-bench) BENCH_ARGS+=(--quick) ;;
    --no-bench) RUN_BENCH=0 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "gpu-check.sh: unknown option $arg (--no-sanitizer, --quick-bench, --no-bench)" >&2; exit 2 ;;
  esac
done

mkdir -p "$OUT"
LOG=$OUT/gpu-check.log
: > "$LOG"
START=$(date +%s)
FAILED=0
SUMMARY=()

elapsed() { echo $(( $(date +%s) - START )); }
# Seconds a step may take: its own limit, but never past the deadline less what is kept for later.
limit_for() {
  local want=$1 keep=${2:-0}
  local left=$(( BUDGET_S - $(elapsed) - keep ))
  [ "$left" -lt "$want" ] && want=$left
  echo "$want"
}
record() {  # NAME STATUS SECONDS
  SUMMARY+=("$(printf '%-46s %-34s %5ss' "$1" "$2" "$3")")
}

# step NAME LIMIT_S COMMAND...: runs COMMAND with its output appended to the log; one status line on
# stdout, plus the last 30 lines of output when it fails.
step() {
  local name=$1 limit=$2
  shift 2
  if [ "$limit" -lt 5 ]; then
    # An incomplete check is not a passing one.
    echo "[$(elapsed)s] $name: FAIL (not run: time budget spent)"
    record "$name" "FAIL (not run: time budget spent)" 0
    { echo; echo "===== $name: not run, time budget spent"; } >> "$LOG"
    FAILED=1
    return 1
  fi
  local t0 tmp rc status
  t0=$(date +%s)
  tmp=$(mktemp)
  { echo; echo "===== $name ($(date -u +%H:%M:%S), limit ${limit}s): $*"; } >> "$LOG"
  timeout --kill-after=10 "$limit" "$@" > "$tmp" 2>&1
  rc=$?
  cat "$tmp" >> "$LOG"
  local dt=$(( $(date +%s) - t0 ))
  if [ "$rc" -eq 0 ]; then
    status=PASS
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    status="FAIL (timed out after ${limit}s)"
    FAILED=1
  else
    status="FAIL (exit $rc)"
    FAILED=1
  fi
  echo "===== $name: $status in ${dt}s" >> "$LOG"
  echo "[$(elapsed)s] $name: $status (${dt}s)"
  if [ "$rc" -ne 0 ]; then tail -n 30 "$tmp" | cut -c1-240 | sed 's/^/    | /'; fi
  record "$name" "$status" "$dt"
  rm -f "$tmp"
  return "$rc"
}

# --- machine ------------------------------------------------------------------------------------------
echo "gpu-check: $(date -u +%Y-%m-%dT%H:%M:%SZ), repository $ROOT, build $BUILD, out $OUT, -j$JOBS"
{
  echo "===== machine"
  nvidia-smi 2>&1
  nvcc --version 2>&1 | tail -2
  cmake --version 2>&1 | head -1
  (ninja --version 2>&1 | sed 's/^/ninja /') || true
  compute-sanitizer --version 2>&1 | head -2
  grep -m1 'model name' /proc/cpuinfo
  echo "cores: $(nproc)"
  (cd "$ROOT" && git log -1 --format='commit %H %s' 2>/dev/null) || true
} >> "$LOG" 2>&1
nvidia-smi 2>&1 | head -20
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')

# --- build -------------------------------------------------------------------------------------------
GENERATOR=()
command -v ninja > /dev/null && GENERATOR=(-G Ninja)
ARCH=()
# The default architectures are Hopper (sm_90 + PTX); another GPU gets its own machine code.
if [ -n "$CC" ] && [ "$CC" != "90" ]; then ARCH=(-DCMAKE_CUDA_ARCHITECTURES="${CC}-real"); fi
BUILT=0
if step "configure (CUDA, Release)" "$(limit_for 120 "$BENCH_RESERVE_S")" \
    cmake -S "$ROOT/native" -B "$BUILD" ${GENERATOR[@]+"${GENERATOR[@]}"} \
    -DCMAKE_BUILD_TYPE=Release -DVRAMSCOPE_CUDA=ON ${ARCH[@]+"${ARCH[@]}"}; then
  # Keep going past a target that fails, so every other test and the benchmark still get built.
  KEEP_GOING=(-k)
  [ ${#GENERATOR[@]} -gt 0 ] && KEEP_GOING=(-k 0)
  step "build -j$JOBS" "$(limit_for 300 "$BENCH_RESERVE_S")" \
    cmake --build "$BUILD" --parallel "$JOBS" -- "${KEEP_GOING[@]}"
  BUILT=1  # a partly failed build still has binaries to test; ctest reports the missing ones
fi

if [ "$BUILT" -eq 1 ]; then
  # --- no libcuda: the library must load where there is no NVIDIA driver
  # (docs/architecture.md#loading-without-a-gpu).
  check_no_libcuda() {
    local bad=0 f needed
    for f in "$1"/*; do
      [ -f "$f" ] && [ -x "$f" ] || continue
      head -c 4 "$f" | grep -q 'ELF' || continue
      needed=$(readelf -d "$f" | grep NEEDED | sed 's/.*\[\(.*\)\]/\1/' | tr '\n' ' ')
      echo "$(basename "$f"): $needed"
      if echo "$needed" | grep -Eq 'libcuda\.so|libcudart\.so'; then
        echo "  ^ needs the CUDA driver or a shared cudart: it would not load without a driver"
        bad=1
      fi
    done
    return $bad
  }
  export -f check_no_libcuda
  step "readelf -d: no libcuda / libcudart" "$(limit_for 30)" bash -c 'check_no_libcuda "$0"' "$BUILD"

  GPU_TESTS=$(cd "$BUILD" && ctest -L GPU -N 2>/dev/null | sed -n 's/^ *Test *#[0-9]*: *//p')
  step "ctest -L GPU" "$(limit_for 240 "$BENCH_RESERVE_S")" \
    bash -c 'cd "$0" && ctest -L GPU -V --output-on-failure' "$BUILD"

  if [ "$RUN_BENCH" -eq 1 ]; then
    if [ -x "$BUILD/vramscope_bench" ]; then
      step "benchmark ${BENCH_ARGS[*]:-(full)}" "$(limit_for 240)" \
        "$BUILD/vramscope_bench" ${BENCH_ARGS[@]+"${BENCH_ARGS[@]}"} --json "$OUT/bench.json" --markdown "$OUT/bench.md"
    else
      echo "[$(elapsed)s] benchmark: FAIL (vramscope_bench was not built)"
      record "benchmark" "FAIL (not built)" 0
      FAILED=1
    fi
  fi
  BENCH_RESERVE_S=0

  step "ctest -L CPU -j$JOBS" "$(limit_for 240)" \
    bash -c 'cd "$0" && ctest -L CPU -j "$1" --output-on-failure' "$BUILD" "$JOBS"

  if [ "$SANITIZER" -eq 1 ]; then
    SANITIZER_BIN=$(command -v compute-sanitizer || true)
    for candidate in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
      [ -z "$SANITIZER_BIN" ] && [ -x "$candidate" ] && SANITIZER_BIN=$candidate
    done
    if [ -z "$SANITIZER_BIN" ]; then
      echo "[$(elapsed)s] compute-sanitizer: FAIL (not on PATH nor in /usr/local/cuda)"
      record "compute-sanitizer" "FAIL (not found)" 0
      FAILED=1
    fi
    for t in $GPU_TESTS; do
      [ -n "$SANITIZER_BIN" ] || break
      if [ ! -x "$BUILD/$t" ]; then
        record "memcheck $t" "FAIL (not built)" 0
        FAILED=1
        continue
      fi
      step "memcheck $t" "$(limit_for 150)" \
        env VRAMSCOPE_SERIALIZED_LAUNCHES=1 "$SANITIZER_BIN" --tool memcheck --report-api-errors no --error-exitcode 99 --print-limit 20 "$BUILD/$t"
      # API errors are not reported: the suites provoke out-of-memory on purpose (exhaustion
      # tests), which memcheck would count as errors; what it must find none of is bad accesses.
      # The multi-stream workloads (kernels on streams that run at once) also go through racecheck.
      case "$t" in
        gpu_workloads|*stream*)
          step "racecheck $t" "$(limit_for 150)" \
            env VRAMSCOPE_SERIALIZED_LAUNCHES=1 "$SANITIZER_BIN" --tool racecheck --error-exitcode 99 --print-limit 20 "$BUILD/$t" ;;
      esac
    done
  else
    record "compute-sanitizer" "SKIPPED (--no-sanitizer)" 0
  fi
fi

# --- summary ------------------------------------------------------------------------------------------
if [ -f "$OUT/bench.md" ]; then
  echo
  echo "================ benchmark ($OUT/bench.md) ================"
  cat "$OUT/bench.md"
fi
{
  echo
  echo "================ summary ($(elapsed)s; full log $LOG) ================"
  for line in "${SUMMARY[@]}"; do echo "$line"; done
  if [ "$FAILED" -eq 0 ]; then echo "gpu-check: ALL PASSED"; else echo "gpu-check: FAILED (see above and $LOG)"; fi
} | tee -a "$LOG"
exit "$FAILED"
