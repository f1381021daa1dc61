#!/usr/bin/env bash
# The GPU batch of issue 6 (recording), for the H100 machine: builds with CUDA into /tmp/build-rec,
# then
#   1. the interposer's ctest against the fake driver, and its overhead beside an un-intercepted call;
#   2. every workload on every strategy under compute-sanitizer memcheck (--small sizes), racecheck
#      for the multi-stream ones;
#   3. the interposer on a plain CUDA program (static and shared cudart) and on a PyTorch loop (with
#      and without PYTORCH_NO_CUDA_MEMORY_CACHING=1), counts checked against what they say they did
#      and against torch.cuda.memory_stats(); a program killed with SIGKILL leaves whole records;
#   4. with Node (.gpu-carry/node/bin/node and node_modules): `vramscope record` of workloads and
#      programs, record -> file -> replay round trips, kill -9 of a recording, the GPU running out
#      of memory inside a workload and inside a PyTorch program (scripts/gpu/oom-check.ts), the samples meant
#      for resources/samples/ (< 2 MB each);
#   5. every workload at its default size on every strategy, as time allows.
# Keeps going after a failure and exits non-zero if anything failed. Everything lands in
# $OUT/gpu-record.tar.gz (logs, JSON lines, recordings, samples) plus $OUT/gpu-record.log and
# $OUT/summary.txt. Budget: GPU_RECORD_BUDGET_S (default 450 s); steps are cut off before it.
#
#   OUT=/tmp/out native/scripts/gpu-record.sh
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-/tmp/gpu-record-out}
BUILD=${VRAMSCOPE_GPU_BUILD:-/tmp/build-rec}
WORK=$OUT/work  # tarred at the end
JOBS=$(nproc 2>/dev/null || echo 4)
[ "$JOBS" -gt 16 ] && JOBS=16
BUDGET_S=${GPU_RECORD_BUDGET_S:-450}
mkdir -p "$OUT" "$WORK/samples"
LOG=$OUT/gpu-record.log
: > "$LOG"
START=$(date +%s)
FAILED=0
SUMMARY=()

elapsed() { echo $(( $(date +%s) - START )); }
limit_for() {  # WANT [KEEP]: seconds a step may take, never past the budget less KEEP
  local want=$1 keep=${2:-0}
  local left=$(( BUDGET_S - $(elapsed) - keep ))
  [ "$left" -lt "$want" ] && want=$left
  echo "$want"
}
record() { SUMMARY+=("$(printf '%-58s %-30s %5ss' "$1" "$2" "$3")"); }

# step NAME LIMIT COMMAND...: output appended to the log (and to $WORK/NAME.txt); one status line.
step() {
  local name=$1 limit=$2
  shift 2
  if [ "$limit" -lt 5 ]; then
    echo "[$(elapsed)s] $name: FAIL (not run: time budget spent)"
    record "$name" "FAIL (not run: budget spent)" 0
    FAILED=1
    return 1
  fi
  local t0 tmp rc status file
  t0=$(date +%s)
  file=$WORK/$(echo "$name" | tr -c 'A-Za-z0-9_.-' '_').txt
  { echo; echo "===== $name ($(date -u +%H:%M:%S), limit ${limit}s): $*"; } >> "$LOG"
  timeout --kill-after=10 "$limit" "$@" > "$file" 2>&1
  rc=$?
  cat "$file" >> "$LOG"
  local dt=$(( $(date +%s) - t0 ))
  if [ "$rc" -eq 0 ]; then status=PASS
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then status="FAIL (timed out after ${limit}s)"; FAILED=1
  else status="FAIL (exit $rc)"; FAILED=1; fi
  echo "===== $name: $status in ${dt}s" >> "$LOG"
  echo "[$(elapsed)s] $name: $status (${dt}s)"
  if [ "$rc" -ne 0 ]; then tail -n 15 "$file" | cut -c1-240 | sed 's/^/    | /'; fi
  record "$name" "$status" "$dt"
  return "$rc"
}
note() { echo "[$(elapsed)s] $*"; echo "NOTE: $*" >> "$LOG"; SUMMARY+=("note: $*"); }

# --- machine ----------------------------------------------------------------------------------------
echo "gpu-record: $(date -u +%Y-%m-%dT%H:%M:%SZ), repository $ROOT, build $BUILD, out $OUT, -j$JOBS"
{
  echo "===== machine"
  nvidia-smi 2>&1 | head -15
  nvcc --version 2>&1 | tail -2
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' 2>&1
  compute-sanitizer --version 2>&1 | head -2
  (cd "$ROOT" && git log -1 --format='commit %H %s' 2>/dev/null) || true
} >> "$LOG" 2>&1
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
NODE=""
for candidate in "$ROOT/.gpu-carry/node/bin/node" "$(command -v node || true)"; do
  [ -n "$candidate" ] && [ -x "$candidate" ] && NODE=$candidate && break
done
if [ -n "$NODE" ] && [ -d "$ROOT/node_modules/tsx" ] && [ -d "$ROOT/node_modules/cmake-js" ]; then
  note "node: $NODE ($("$NODE" --version)); the vramscope record steps run"
else
  note "node or node_modules absent (.gpu-carry/node/bin/node, node_modules/tsx, node_modules/cmake-js): the vramscope record, round-trip and sample steps are skipped; the interposer is checked from its raw logs with Python"
  NODE=""
fi
SANITIZER=$(command -v compute-sanitizer || true)
[ -z "$SANITIZER" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && SANITIZER=/usr/local/cuda/bin/compute-sanitizer

# --- build --------------------------------------------------------------------------------------------
GENERATOR=()
command -v ninja > /dev/null && GENERATOR=(-G Ninja)
ARCH=()
if [ -n "$CC" ] && [ "$CC" != "90" ]; then ARCH=(-DCMAKE_CUDA_ARCHITECTURES="${CC}-real"); fi
step "configure (CUDA, Release)" "$(limit_for 90)" \
  cmake -S "$ROOT/native" -B "$BUILD" ${GENERATOR[@]+"${GENERATOR[@]}"} -DCMAKE_BUILD_TYPE=Release -DVRAMSCOPE_CUDA=ON -DVRAMSCOPE_BENCH=OFF ${ARCH[@]+"${ARCH[@]}"}
step "build -j$JOBS (workloads, interposer, its tests)" "$(limit_for 240)" \
  cmake --build "$BUILD" --parallel "$JOBS" --target vramscope_workload vramscope_intercept intercept_test vramscope_intercept_bench
if [ -n "$NODE" ]; then
  # The addon (and the interposer beside it) for `vramscope record`: build/Release of this copy.
  step "addon build (cmake-js)" "$(limit_for 240)" env PATH="$(dirname "$NODE"):$PATH" VRAMSCOPE_CUDA=ON "$NODE" "$ROOT/scripts/dev/build-addon.mjs"
fi
WL=$BUILD/vramscope_workload

# --- 1. the interposer without a GPU in the way --------------------------------------------------------
step "interposer ctest (fake driver)" "$(limit_for 60)" "$BUILD/intercept_test"
step "interposer overhead (<= 200 ns a call)" "$(limit_for 60)" "$BUILD/vramscope_intercept_bench" 2000000

# --- 2. workloads under compute-sanitizer --------------------------------------------------------------
WORKLOADS=$("$WL" --list 2>/dev/null | awk '{print $1}')
MULTI=$("$WL" --list 2>/dev/null | awk '/multi-stream/ {print $1}')
if [ -z "$SANITIZER" ]; then
  note "compute-sanitizer not found: memcheck/racecheck not run"
  FAILED=1
else
  for w in $WORKLOADS; do
    step "memcheck $w (every strategy, --small)" "$(limit_for 60 60)" \
      "$SANITIZER" --tool memcheck --report-api-errors no --error-exitcode 99 --print-limit 10 "$WL" "$w" --strategy all --small
  done
  for w in $MULTI; do
    step "racecheck $w (caching, --small)" "$(limit_for 60 60)" \
      "$SANITIZER" --tool racecheck --error-exitcode 99 --print-limit 10 "$WL" "$w" --strategy caching --small
  done
fi

# --- 3. the interposer on real programs, checked from its raw logs -----------------------------------------
INTERCEPT=$BUILD/libvramscope_intercept.so
PLAIN_DIR=$WORK/plain
mkdir -p "$PLAIN_DIR"
ARCH_FLAG=()
[ -n "$CC" ] && ARCH_FLAG=(-arch=sm_"$CC")
step "nvcc plain CUDA program (static and shared cudart)" "$(limit_for 90)" bash -c "
  nvcc -O2 ${ARCH_FLAG[*]} -o '$PLAIN_DIR/plain_static' '$ROOT/scripts/gpu/record-plain-cuda.cu' &&
  nvcc -O2 ${ARCH_FLAG[*]} -cudart shared -o '$PLAIN_DIR/plain_shared' '$ROOT/scripts/gpu/record-plain-cuda.cu'"
for kind in static shared; do
  [ -x "$PLAIN_DIR/plain_$kind" ] || continue
  # Run under the preload, then compare the log with what the program says it did.
  step "interposer on plain CUDA ($kind cudart)" "$(limit_for 60)" bash -c "
    rm -f '$PLAIN_DIR/$kind.log'
    expect=\$(LD_PRELOAD='$INTERCEPT' VRAMSCOPE_INTERCEPT_LOG='$PLAIN_DIR/$kind.log' '$PLAIN_DIR/plain_$kind' | sed -n 's/^expect //p')
    echo \"program says: \$expect\"
    python3 '$ROOT/scripts/gpu/intercept_log.py' '$PLAIN_DIR/$kind.log' --expect \"\$expect\""
done
if [ -x "$PLAIN_DIR/plain_static" ]; then
  step "kill -9 of a program under the interposer leaves whole records" "$(limit_for 30)" bash -c "
    rm -f '$PLAIN_DIR/killed.log'
    LD_PRELOAD='$INTERCEPT' VRAMSCOPE_INTERCEPT_LOG='$PLAIN_DIR/killed.log' '$PLAIN_DIR/plain_static' loop > '$PLAIN_DIR/killed.out' &
    pid=\$!; sleep 2; kill -9 \$pid; wait \$pid 2>/dev/null
    python3 '$ROOT/scripts/gpu/intercept_log.py' '$PLAIN_DIR/killed.log' | tee /dev/stderr | python3 -c 'import json,sys; r=json.load(sys.stdin); sys.exit(0 if r[\"records\"] > 0 and r[\"sequencesConsecutive\"] else 1)'"
fi
TORCH_DIR=$WORK/torch
mkdir -p "$TORCH_DIR"
if python3 -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then
  for mode in caching nocaching; do
    envs=()
    [ "$mode" = nocaching ] && envs=(PYTORCH_NO_CUDA_MEMORY_CACHING=1)
    step "interposer on PyTorch ($mode): counts vs memory_stats" "$(limit_for 120)" bash -c "
      rm -f '$TORCH_DIR/$mode.log'
      env ${envs[*]} LD_PRELOAD='$INTERCEPT' VRAMSCOPE_INTERCEPT_LOG='$TORCH_DIR/$mode.log' python3 '$ROOT/scripts/gpu/record_torch_loop.py' '$TORCH_DIR/$mode-stats.json' &&
      python3 '$ROOT/scripts/gpu/intercept_log.py' '$TORCH_DIR/$mode.log' > '$TORCH_DIR/$mode-log.json'
      python3 - '$TORCH_DIR/$mode-log.json' '$TORCH_DIR/$mode-stats.json' '$mode' '$TORCH_DIR/caching-stats.json' <<'PY'
import json, os, sys
log = json.load(open(sys.argv[1])); stats = json.load(open(sys.argv[2])); mode = sys.argv[3]
# Caching off, memory_stats() counts nothing (the allocator is bypassed): the tensor count is the
# caching run's allocation.all.allocated, the same seeded loop with the same shapes.
if mode == 'nocaching':
    cached = json.load(open(sys.argv[4])) if os.path.exists(sys.argv[4]) else {}
    stats = dict(stats, **{'allocation.all.allocated': cached.get('allocation.all.allocated', 0)})
cuda_malloc = log['ops'].get('1', 0)
segments = stats.get('segment.all.allocated', 0); allocations = stats.get('allocation.all.allocated', 0)
print(json.dumps({'mode': mode, 'interposer_cudaMalloc': cuda_malloc, 'interposer_allocs': log['allocs'], 'interposer_frees': log['frees'],
                  'torch_segment_allocated': segments, 'torch_allocation_allocated': allocations, 'torch': stats.get('torch_version')}))
# Caching on: each segment is one cudaMalloc; a few more come from libraries outside the allocator
# (cuBLAS/cuDNN handles). Caching off: every tensor is a cudaMalloc.
want = segments if mode == 'caching' else allocations
ok = want > 0 and want <= cuda_malloc <= want + 16
print('counts agree' if ok else 'counts DISAGREE', '(interposer cudaMalloc %d, torch %s %d)' % (cuda_malloc, 'segments' if mode == 'caching' else 'allocations', want))
sys.exit(0 if ok else 1)
PY"
  done
else
  note "PyTorch with CUDA not importable: the PyTorch interposer steps are not run"
  FAILED=1
fi

# --- 4. vramscope record (Node) ------------------------------------------------------------------------------
if [ -n "$NODE" ]; then
  VS=("$NODE" "$ROOT/bin/vramscope.mjs")
  REC=$WORK/recordings
  mkdir -p "$REC"
  export VRAMSCOPE_INTERCEPT=$ROOT/build/Release/libvramscope_intercept.so
  [ -f "$VRAMSCOPE_INTERCEPT" ] || export VRAMSCOPE_INTERCEPT=$INTERCEPT
  # Round trips: deterministic strategies, single-stream workloads (growable_buffer has no seed: it
  # draws nothing at random, and a parameter it does not have is refused).
  for pair in "slab_mix slab -p seed=11" "buddy_mix buddy -p seed=11" "arena_steps arena -p seed=11" "growable_buffer vmm_growable" "training caching:preset=pytorch -p seed=11" "fragmentation caching:preset=pytorch -p seed=11"; do
    set -- $pair
    name="$1-$(echo "$2" | tr ':=' '__')"
    extra="${*:3}"
    step "record $1 on $2, replay: same layout" "$(limit_for 60 40)" bash -c "
      '${VS[0]}' '${VS[1]}' record --workload $1 --strategy '$2' $extra -o '$REC/$name.vramscope' &&
      '$NODE' --import tsx '$ROOT/scripts/gpu/record-roundtrip.ts' '$REC/$name.vramscope'"
  done
  step "record a program (static cudart) and open it" "$(limit_for 60 40)" bash -c "
    '${VS[0]}' '${VS[1]}' record -o '$REC/plain.vramscope' -- '$PLAIN_DIR/plain_static' && '${VS[0]}' '${VS[1]}' info '$REC/plain.vramscope'"
  step "kill -9 of vramscope record mid-run: the file opens" "$(limit_for 40 30)" bash -c "
    '${VS[0]}' '${VS[1]}' record -o '$REC/killed.vramscope' -- python3 '$ROOT/scripts/gpu/record_torch_loop.py' '$REC/killed-stats.json' loop > '$REC/killed.out' 2>&1 &
    pid=\$!
    for i in \$(seq 60); do grep -q started '$REC/killed.out' && break; sleep 0.5; done
    sleep 1
    program=\$(cat /proc/\$pid/task/*/children 2>/dev/null | tr ' ' '\\n' | head -1)
    kill -9 \$pid; wait \$pid 2>/dev/null
    [ -n \"\$program\" ] && kill -9 \"\$program\"
    '${VS[0]}' '${VS[1]}' info '$REC/killed.vramscope'"
  step "GPU out-of-memory inside a workload and a PyTorch program: nothing recorded is lost" "$(limit_for 120 30)" \
    "$NODE" --import tsx "$ROOT/scripts/gpu/oom-check.ts" "$REC/oom"
  # Samples for resources/samples/ (the lead commits them): small, real, each < 2 MB.
  step "sample: training on caching (pytorch preset)" "$(limit_for 60 20)" \
    "${VS[@]}" record --workload training --strategy caching:preset=pytorch -p steps=12 -p layers=6 -o "$WORK/samples/h100-training-caching.vramscope"
  step "sample: inference server on buddy" "$(limit_for 60 20)" \
    "${VS[@]}" record --workload inference --strategy buddy -p requests=120 -o "$WORK/samples/h100-inference-buddy.vramscope"
  step "sample: PyTorch loop through the interposer" "$(limit_for 90 20)" \
    "${VS[@]}" record -o "$WORK/samples/h100-pytorch-interposer.vramscope" -- python3 "$ROOT/scripts/gpu/record_torch_loop.py" "$WORK/samples/h100-pytorch-interposer.memory_stats.json"
  step "sample: PyTorch tensors through the interposer (no caching)" "$(limit_for 90 20)" \
    env PYTORCH_NO_CUDA_MEMORY_CACHING=1 "${VS[@]}" record -o "$WORK/samples/h100-pytorch-tensors.vramscope" -- python3 "$ROOT/scripts/gpu/record_torch_loop.py" "$WORK/samples/h100-pytorch-tensors.memory_stats.json"
  step "samples are under 2 MB and open" "$(limit_for 30)" bash -c "
    for f in '$WORK'/samples/*.vramscope; do
      size=\$(stat -c %s \"\$f\"); echo \"\$f: \$size bytes\"; [ \"\$size\" -lt 2000000 ] || exit 1
      '${VS[0]}' '${VS[1]}' info \"\$f\" --json > \"\${f%.vramscope}.info.json\" || exit 1
    done"
fi

# --- 5. workloads at their default size, as time allows ----------------------------------------------------
for w in $WORKLOADS; do
  left=$(limit_for 45)
  if [ "$left" -lt 10 ]; then note "default-size run of $w and later ones skipped: time budget"; break; fi
  step "workload $w (every strategy, default size)" "$left" "$WL" "$w" --strategy all
done

# --- summary and the tarball ----------------------------------------------------------------------------------
{
  echo "================ gpu-record summary ($(elapsed)s; full log $LOG) ================"
  for line in "${SUMMARY[@]}"; do echo "$line"; done
  if [ "$FAILED" -eq 0 ]; then echo "gpu-record: ALL PASSED"; else echo "gpu-record: FAILED (see above and $LOG)"; fi
} | tee "$OUT/summary.txt"
rm -f "$PLAIN_DIR"/plain_static "$PLAIN_DIR"/plain_shared
tar -czf "$OUT/gpu-record.tar.gz" -C "$OUT" work summary.txt 2> /dev/null && rm -rf "$WORK"
ls -la "$OUT"
exit "$FAILED"
