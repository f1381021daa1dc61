#!/usr/bin/env bash
# Coverage-guided fuzzing of the TypeScript input readers with Jazzer.js (libFuzzer driving
# instrumented JavaScript): test/fuzz/TARGET.fuzz.ts for the trace-file reader (Arrow IPC), the
# PyTorch snapshot importer (the pickle reader's two lanes, the snapshot mapper), the RMM CSV
# parser, the torch.profiler trace scanner, the Umpire log reader and the Nsight Systems export
# import (over node:sqlite). Each target is bundled with esbuild into build/fuzz-ts/TARGET.fuzz.cjs (our sources in
# one file that Jazzer instruments; node_modules stays outside, uninstrumented), then run from its
# corpus kept in the repository (test/fuzz/corpus/TARGET.b64: one input per line, base64, like
# native/fuzz/corpus) plus seeds from the fixtures (test/fuzz/seeds.ts), with its dictionary
# (test/fuzz/dict/TARGET.dict). Mirrors native/scripts/fuzz.sh:
#
#   scripts/dev/fuzz-ts.sh short [SECONDS]   # CI (npm test): SECONDS per target (default 15); new inputs
#                                        # are thrown away, the kept corpus is replayed first
#   scripts/dev/fuzz-ts.sh long [SECONDS]    # on demand (npm run fuzz:long, or --long): default 600 per
#                                        # target; inputs that add coverage are merged into the kept
#                                        # corpus (commit what it adds)
#   scripts/dev/fuzz-ts.sh replay            # only replay the kept corpus and the seeds
#   scripts/dev/fuzz-ts.sh merge             # only re-minimize the kept corpus (after the seeds change)
#
# The seeds are not kept: they are made afresh from the fixtures each run, so the kept corpus holds
# only inputs that reach code the seeds do not (libFuzzer's merge over the seeds as a base).
# A finding (an exception other than the reader's typed error naming the file, a result that does
# not hold together, a hang past 10 s, more than 2 GB resident) stops the run with its input saved
# under build/fuzz-ts/artifacts/ and the command to reproduce it. FUZZ_TS_TARGETS picks targets
# (default: all six). Exits 0 with a message where @jazzer.js/core is not installed.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:-short}
[ "$mode" = --long ] && mode=long
case "$mode" in
  short) seconds=${2:-15} ;;
  long) seconds=${2:-600} ;;
  replay | merge) seconds=0 ;;
  *) echo "usage: $0 [short|long|--long|replay|merge] [SECONDS]" >&2; exit 2 ;;
esac
targets=${FUZZ_TS_TARGETS:-trace-file pytorch-snapshot rmm-log kineto-trace umpire-log nsys-sqlite}
build=$root/build/fuzz-ts
jazzer=$root/node_modules/@jazzer.js/core/dist/cli.js
cd "$root"

if [ ! -f "$jazzer" ]; then
  echo "== fuzz-ts: skipped, @jazzer.js/core is not installed (a devDependency: npm install)"
  exit 0
fi
# The addon Jazzer ships needs a newer glibc than Debian 12's; this preload adapts it (see the file).
export NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--require=$root/test/fuzz/jazzer-addon.cjs"

# Largest input per target: the seeds fit; larger inputs only slow libFuzzer down and swell the corpus.
max_len() {
  case "$1" in trace-file) echo 24576 ;; pytorch-snapshot) echo 16384 ;; kineto-trace | nsys-sqlite) echo 32768 ;; umpire-log) echo 8192 ;; *) echo 4096 ;; esac
}

source "$root/scripts/dev/fuzz-corpus.sh"  # unpack, pack: the kept corpus as base64 lines

start=$SECONDS
mkdir -p "$build/artifacts"
for target in $targets; do
  bundle=$build/$target.fuzz.cjs
  kept=$root/test/fuzz/corpus/$target.b64
  work=$build/corpus/$target
  # import.meta.url is the bundle's own URL (a CommonJS bundle has no import.meta, and modules that
  # find files next to themselves read it when loaded).
  node_modules/.bin/esbuild "test/fuzz/$target.fuzz.ts" --bundle --platform=node --format=cjs --packages=external \
    --define:import.meta.url=__bundle_url '--banner:js=const __bundle_url = require("node:url").pathToFileURL(__filename).href;' \
    --sourcemap --log-level=warning "--outfile=$bundle"
  rm -rf "$work" "$work.new"
  unpack "$kept" "$work"
  node --import tsx test/fuzz/seeds.ts "$target" "$work"
  mkdir -p "$work.new"
  echo "== fuzz-ts: $target: $(ls "$work" | wc -l) inputs (kept corpus and seeds), mode $mode${seconds:+, $seconds s}"
  jazzer_args=("$bundle" --sync --timeout=10000)
  common=("-max_len=$(max_len "$target")" "-dict=$root/test/fuzz/dict/$target.dict" -rss_limit_mb=2048
          -print_final_stats=1 "-artifact_prefix=$build/artifacts/$target-")
  status=0
  if [ "$mode" = replay ] || [ "$mode" = merge ]; then
    node "$jazzer" "${jazzer_args[@]}" "$work" -- "${common[@]}" -runs=0 || status=$?
  else
    # New inputs go to $work.new; the kept corpus is read, never written, until the merge below.
    node "$jazzer" "${jazzer_args[@]}" "$work.new" "$work" -- "${common[@]}" -max_total_time="$seconds" 2>&1 |
      grep --line-buffered -v -E '^#[0-9]+\s+(NEW|REDUCE)' || status=${PIPESTATUS[0]}
  fi
  if [ "$status" -ne 0 ]; then
    echo "== fuzz-ts: $target FAILED (exit $status); the input is in $build/artifacts/, reproduce with:" >&2
    echo "   NODE_OPTIONS=--require=test/fuzz/jazzer-addon.cjs node $jazzer $bundle --sync $build/artifacts/$target-<crash file>" >&2
    exit 1
  fi
  if [ "$mode" = long ] || [ "$mode" = merge ]; then
    # The seeds go into the merge's output first, so only inputs adding coverage beyond them join it;
    # then they leave again (named by their SHA-1, as libFuzzer names what it adds). The merge keeps
    # a smallest set of inputs that covers every edge (-set_cover_merge=1, -use_counters=0: edges,
    # not hit-count buckets): a few hundred KB per target, where keeping every bucket took 1.5 MB.
    rm -rf "$work.merged" "$work.seeds"
    node --import tsx test/fuzz/seeds.ts "$target" "$work.seeds"
    cp -r "$work.seeds" "$work.merged"
    node "$jazzer" "${jazzer_args[@]}" "$work.merged" "$work" "$work.new" -- -merge=1 -set_cover_merge=1 -use_counters=0 "${common[@]}" 2>&1 | tail -n 1
    for seed in "$work.seeds"/*; do rm -f "$work.merged/$(basename "$seed")"; done
    pack "$work.merged" "$kept"
    echo "== fuzz-ts: $target: kept corpus now $(wc -l < "$kept") inputs, $(du -k "$kept" | cut -f1) KB ($kept)"
  fi
done
echo "== fuzz-ts passed in $((SECONDS - start)) s"
