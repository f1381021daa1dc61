#!/usr/bin/env bash
# The GPU batch of the field recordings, for the H100/H200 machine, in one call:
#   1. native/scripts/gpu-check.sh --quick-bench (build with CUDA, ctest -L GPU and CPU,
#      compute-sanitizer, the quick benchmark);
#   2. scripts/gpu/app-record-check.ts (a recording's cancel reaching the native loop, in both
#      recorder modes), with Node;
#   3. `vramscope record --pytorch` of the programs of scripts/gpu/field_programs.py: a GPT-2's
#      steps under three PYTORCH_ALLOC_CONF settings, the same with a ring too small for them
#      (--max-entries), a recording begun after the model was loaded (the program's own), an
#      out-of-memory under a memory fraction, a ~60 GB Llama step under two settings, the GPT-2
#      under torch.profiler (profile_memory=True), a 2-rank torchrun job, a kill -9 mid-run; and
#      Nsight Systems with --cuda-memory-usage=true where nsys is found;
#   4. the fidelity table (scripts/bench/fidelity.ts --dir) on those recordings, and the field
#      shape's own figures (info, top, whatif on the ~60 GB snapshot, timed).
# Node comes from .gpu-carry (node.xz from ../shared/tools/pack-node.sh, nm.tar.xz: the
# node_modules the CLI needs) and the addon from build/Release (built on the CPU machine with
# CUDA), both carried. Everything lands in $OUT: summary.txt, fidelity.md, gpu-check.log,
# bench.md, and the recordings as small.tgz.part-* (all but the ~60 GB run's snapshots) and
# big.tgz.part-* (those), split at 15 MB. Budget: FIELD_BUDGET_S (default 560 s).
#
#   OUT=/tmp/out bash scripts/gpu/field-runs.sh
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-/tmp/field-out}
W=${FIELD_WORK:-/tmp/field}
BUDGET_S=${FIELD_BUDGET_S:-560}
mkdir -p "$OUT" "$W/logs" "$W/rec" "$W/suite"
START=$(date +%s)
SUMMARY=()
elapsed() { echo $(($(date +%s) - START)); }
limit_for() { # WANT [KEEP]
  local want=$1 keep=${2:-0} left
  left=$((BUDGET_S - $(elapsed) - keep))
  [ "$left" -lt "$want" ] && want=$left
  echo "$want"
}
# step NAME LIMIT COMMAND...: output to $W/logs/NAME.txt; one line in the summary.
step() {
  local name=$1 limit=$2 file rc t0 status
  shift 2
  file=$W/logs/$(echo "$name" | tr -c 'A-Za-z0-9_.-' '_').txt
  if [ "$limit" -lt 5 ]; then
    SUMMARY+=("$(printf '%-52s %s' "$name" 'NOT RUN (budget spent)')")
    echo "[$(elapsed)s] $name: NOT RUN (budget spent)"
    return 1
  fi
  t0=$(date +%s)
  # Through bash, so COMMAND may be one of the exported functions below.
  timeout --kill-after=10 "$limit" bash -c '"$@"' step "$@" >"$file" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ]; then status=PASS; elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then status="FAIL (timed out at ${limit}s)"; else status="FAIL (exit $rc)"; fi
  SUMMARY+=("$(printf '%-52s %-26s %4ss' "$name" "$status" "$(($(date +%s) - t0))")")
  echo "[$(elapsed)s] $name: $status ($(($(date +%s) - t0))s)"
  [ "$rc" -ne 0 ] && tail -n 12 "$file" | cut -c1-220 | sed 's/^/    | /'
  return "$rc"
}

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
echo "field-runs: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)' 2>&1

# --- Node, carried ------------------------------------------------------------------------------------
if [ -f "$ROOT/.gpu-carry/node.xz" ]; then
  mkdir -p /tmp/nodebin && xz -dc "$ROOT/.gpu-carry/node.xz" >/tmp/nodebin/node && chmod +x /tmp/nodebin/node
  export PATH=/tmp/nodebin:$PATH
fi
[ -d "$ROOT/node_modules/tsx" ] || { [ -f "$ROOT/.gpu-carry/nm.tar.xz" ] && tar xJf "$ROOT/.gpu-carry/nm.tar.xz" -C "$ROOT"; }
export VRAMSCOPE_INTERCEPT=$ROOT/build/Release/libvramscope_intercept.so
export VS="node $ROOT/bin/vramscope.mjs" P=$ROOT/scripts/gpu/field_programs.py W ROOT

# --- 1. the native GPU check --------------------------------------------------------------------------
[ "${FIELD_SKIP_GPU_CHECK:-0}" = 1 ] || step "gpu-check.sh --quick-bench" "$(limit_for 200)" env OUT="$W/gpu-check" GPU_CHECK_BUDGET_S=190 bash "$ROOT/native/scripts/gpu-check.sh" --quick-bench
cp "$W/gpu-check/gpu-check.log" "$W/gpu-check/bench.md" "$OUT/" 2>/dev/null
grep -E '^(configure|build|readelf|ctest|benchmark|memcheck|racecheck|gpu-check)' "$W/gpu-check/gpu-check.log" | tail -14 >"$W/logs/gpu-check-summary.txt"

# --- 2. the addon on the GPU, and a recording's cancel -------------------------------------------------
step "addon loads with CUDA and sees the GPU" 30 node -e 'const a=require(process.argv[1]); const d=a.cudaDeviceAvailable(); console.log(a.builtWithCuda(), JSON.stringify(d)); process.exit(a.builtWithCuda() && d.available ? 0 : 1)' "$ROOT/build/Release/vramscope.node"
step "app-record-check.ts (cancel)" "$(limit_for 90 300)" node --import tsx "$ROOT/scripts/gpu/app-record-check.ts" "$W/app-record"

# --- 3. recordings ------------------------------------------------------------------------------------
rec() { # NAME CONF [record options...] -- PROGRAM ARGS: record --pytorch into $W/rec/NAME under PYTORCH_ALLOC_CONF=CONF
  local name=$1 conf=$2
  shift 2
  env PYTORCH_ALLOC_CONF="$conf" $VS record --pytorch ${FIELD_RECORD_FLAGS:-} -o "$W/rec/$name" "$@" || return
  # The program's own exit decides (the recorder exits 0 whatever the program did); oom__* must fail.
  python3 -c 'import json, sys; code = json.load(open(sys.argv[1]))["exit"]["code"]; print("program exit", code); sys.exit(0 if (code != 0) == sys.argv[2].startswith("oom__") else 1)' "$W/rec/$name/job.json" "$name"
}
export -f rec
# The ~60 GB run beside the small ones (one process each; the GPU has room for all).
(
  step "record big__default (~60 GB Llama step)" "$(limit_for 150 120)" rec big__default "" -- python3 "$P" big
  step "record big__expandable" "$(limit_for 150 100)" rec big__expandable "expandable_segments:True" -- python3 "$P" big
) >"$W/logs/big-group.txt" 2>&1 &
BIG=$!
for s in default:"" expandable:"expandable_segments:True" msplit128:"max_split_size_mb:128"; do
  step "record gpt__${s%%:*}" "$(limit_for 90 120)" rec "gpt__${s%%:*}" "${s#*:}" -- python3 "$P" gpt
done
for s in default:"" expandable:"expandable_segments:True"; do
  step "record gpt_overflow__${s%%:*} (--max-entries 3000)" "$(limit_for 90 120)" rec "gpt_overflow__${s%%:*}" "${s#*:}" --max-entries 3000 -- python3 "$P" gpt
done
for s in default:"" msplit128:"max_split_size_mb:128"; do
  mkdir -p "$W/rec/late__${s%%:*}"
  step "late__${s%%:*} (recording begun after the model)" "$(limit_for 90 120)" env PYTORCH_ALLOC_CONF="${s#*:}" python3 "$P" late "$W/rec/late__${s%%:*}"
done
step "record oom__default (memory fraction)" "$(limit_for 90 120)" rec oom__default "" -- python3 "$P" oom
step "record profile (torch.profiler, profile_memory)" "$(limit_for 90 120)" rec profile "" -- python3 "$P" profile "$W/rec"
step "record ddp (torchrun, 2 ranks)" "$(limit_for 120 120)" rec ddp "" -- python3 -m torch.distributed.run --standalone --nproc-per-node 2 "$P" ddp
# A kill -9 mid-run: the periodic snapshot (every 2 s) is whole.
kill9() {
  rm -rf "$W/rec/killed" "$W/pid"
  mkdir -p "$W/killed-pid"
  $VS record --pytorch ${FIELD_RECORD_FLAGS:-} --snapshot-every 2 -o "$W/rec/killed" -- python3 "$P" sleep "$W/killed-pid" &
  local recorder=$! i
  for i in $(seq 1 600); do [ -f "$W/killed-pid/pid" ] && [ -f "$W/rec/killed/snapshot.pickle" ] && break; sleep 0.1; done
  sleep 2.5
  kill -9 "$(cat "$W/killed-pid/pid")"
  wait "$recorder"
  $VS info "$W/rec/killed/snapshot.pickle"
}
export -f kill9
step "record killed (kill -9 mid-run, snapshot opens)" "$(limit_for 90 120)" kill9
if command -v nsys >/dev/null 2>&1 || ls /opt/nvidia/nsight-systems*/bin/nsys >/dev/null 2>&1; then
  NSYS=$(command -v nsys || ls /opt/nvidia/nsight-systems*/bin/nsys | head -1)
  step "nsys --cuda-memory-usage=true (gpt)" "$(limit_for 90 120)" bash -c "'$NSYS' profile --cuda-memory-usage=true --force-overwrite=true -o '$W/rec/nsys-gpt' python3 '$P' gpt && '$NSYS' export --type sqlite --force-overwrite=true -o '$W/rec/nsys-gpt.sqlite' '$W/rec/nsys-gpt.nsys-rep'"
else
  SUMMARY+=("nsys: not on this machine (no nsys on PATH, none under /opt/nvidia/nsight-systems*)")
fi
wait "$BIG"
cat "$W/logs/big-group.txt"
SUMMARY+=("$(grep -h 'record big' "$W/logs/big-group.txt" | sed 's/^\[[0-9]*s\] //')")

# --- 4. the fidelity table and the field shape's figures ------------------------------------------------
gather() { # PROGRAM__SETTING directories -> $W/suite/PROGRAM__SETTING.{pickle,stats.json}
  local d name base
  for d in "$W"/rec/*__*; do
    name=$(basename "$d")
    for base in snapshot late; do
      if [ -f "$d/$base.pickle" ]; then
        cp "$d/$base.pickle" "$W/suite/$name.pickle"
        cp "$d/$base.stats.json" "$W/suite/$name.stats.json"
      fi
    done
  done
  for r in 0 1; do
    [ -f "$W/rec/ddp/rank$r.pickle" ] && cp "$W/rec/ddp/rank$r.pickle" "$W/suite/ddp_rank${r}__default.pickle" && cp "$W/rec/ddp/rank$r.stats.json" "$W/suite/ddp_rank${r}__default.stats.json"
  done
  ls -la "$W/suite"
}
export -f gather
step "gather the runs" 30 gather
step "fidelity.ts --dir (the field recordings)" "$(limit_for 200 20)" bash -c "node --import tsx '$ROOT/scripts/bench/fidelity.ts' --dir '$W/suite' > '$OUT/fidelity.md'"
if [ -f "$W/suite/big__default.pickle" ]; then
  shape() {
    local f=$W/suite/big__default.pickle t0
    ls -la "$f"
    for c in info top whatif; do
      t0=$(date +%s%N)
      $VS "$c" "$f" >"$W/logs/big-$c.txt" 2>&1
      echo "$c: exit $? in $((($(date +%s%N) - t0) / 1000000)) ms"
      head -40 "$W/logs/big-$c.txt"
    done
  }
  export -f shape
  step "the ~60 GB snapshot: info, top, whatif (timed)" "$(limit_for 120 15)" shape
fi

# --- pack ------------------------------------------------------------------------------------------------
{
  echo "field-runs: $(elapsed)s"
  for line in "${SUMMARY[@]}"; do echo "$line"; done
  echo
  cat "$W/logs/gpu-check-summary.txt" 2>/dev/null
} | tee "$OUT/summary.txt"
rm -rf "$W/rec"/*/pid "$W/killed-pid"
tar czf "$W/small.tgz" -C "$W" --exclude='big__*.pickle' --exclude='big__*/*.pickle' --exclude='suite/*.pickle' rec logs suite app-record 2>/dev/null
tar czf "$W/big.tgz" -C "$W" rec/big__default rec/big__expandable 2>/dev/null
(cd "$W" && split -b 15M -d small.tgz "$OUT/small.tgz.part-" && split -b 15M -d big.tgz "$OUT/big.tgz.part-")
ls -la "$OUT"
