#!/usr/bin/env bash
# Builds the libFuzzer targets (native/fuzz/*_fuzz.cpp, clang, ASan + UBSan) and runs each one
# from its corpus kept in the repository (native/fuzz/corpus/TARGET.b64: one input per line, base64,
# so that the corpus is one small diffable file rather than thousands of tiny ones).
#
#   native/scripts/fuzz.sh short [SECONDS]   # CI: SECONDS per target (default 45); new inputs are
#                                            # thrown away, the kept corpus is replayed first
#   native/scripts/fuzz.sh long [SECONDS]    # on demand (npm run fuzz:long): default 600 per target;
#                                            # inputs that add coverage are merged into the kept corpus
#   native/scripts/fuzz.sh replay            # only replay the kept corpus (a regression run)
#
# A crash stops the run with its input saved under native/build-fuzz/artifacts/ and the command to
# reproduce it. Environment: JOBS (build jobs, default 2), FUZZ_BUILD (default native/build-fuzz),
# CXX (default clang++). Exits 0 with a message, not an error, where clang++ is missing.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)  # native/
mode=${1:-short}
case "$mode" in
  short) seconds=${2:-45} ;;
  long) seconds=${2:-600} ;;
  replay) seconds=0 ;;
  *) echo "usage: $0 [short|long|replay] [SECONDS]" >&2; exit 2 ;;
esac
build=${FUZZ_BUILD:-$here/build-fuzz}
cxx=${CXX:-clang++}
jobs=${JOBS:-2}

if ! command -v "$cxx" > /dev/null; then
  echo "== fuzz: skipped, no $cxx (libFuzzer comes with clang: apt-get install clang)"
  exit 0
fi
# Debian ships libFuzzer's runtime and FuzzedDataProvider.h apart from clang (libclang-rt-N-dev).
if ! printf '#include <fuzzer/FuzzedDataProvider.h>\nextern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' |
  "$cxx" -x c++ -fsanitize=fuzzer -o /dev/null - > /dev/null 2>&1; then
  major=$("$cxx" -dumpversion 2> /dev/null | cut -d. -f1)
  echo "== fuzz: skipped, $cxx has no libFuzzer runtime (apt-get install libclang-rt-${major:-N}-dev)"
  exit 0
fi

echo "== fuzz: build ($build, $($cxx --version | head -n1))"
cmake -S "$here/fuzz" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" > /dev/null
cmake --build "$build" -j "$jobs"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

source "$here/../scripts/dev/fuzz-corpus.sh"  # unpack, pack: the kept corpus as base64 lines

start=$SECONDS
mkdir -p "$build/artifacts"
for binary in "$build"/*_fuzz; do
  target=$(basename "$binary" _fuzz)
  kept="$here/fuzz/corpus/$target.b64"
  work="$build/corpus/$target"
  rm -rf "$work" "$work.new"
  unpack "$kept" "$work"
  mkdir -p "$work.new"
  echo "== fuzz: $target: $(ls "$work" | wc -l) kept inputs, mode $mode${seconds:+, $seconds s}"
  # -len_control=0: operation sequences need length from the start, not after a plateau.
  common=(-max_len=1024 -len_control=0 -timeout=20 -rss_limit_mb=2048 -print_final_stats=1
          "-artifact_prefix=$build/artifacts/$target-")
  status=0
  if [ "$mode" = replay ]; then
    "$binary" "${common[@]}" -runs=0 "$work" || status=$?
  else
    # New inputs go to $work.new; the kept corpus is read, never written, until the merge below.
    "$binary" "${common[@]}" -max_total_time="$seconds" "$work.new" "$work" 2>&1 |
      grep --line-buffered -v -E '^#[0-9]+\s+(NEW|REDUCE)' || status=${PIPESTATUS[0]}
  fi
  if [ "$status" -ne 0 ]; then
    echo "== fuzz: $target FAILED (exit $status); the input is in $build/artifacts/, reproduce with:" >&2
    echo "   $binary $build/artifacts/$target-<crash file>" >&2
    exit 1
  fi
  if [ "$mode" = long ]; then
    rm -rf "$work.merged" && mkdir -p "$work.merged"
    "$binary" -merge=1 "${common[@]}" "$work.merged" "$work" "$work.new" 2>&1 | tail -n 1
    pack "$work.merged" "$kept"
    echo "== fuzz: $target: kept corpus now $(wc -l < "$kept") inputs ($kept)"
  fi
done
echo "== fuzz passed in $((SECONDS - start)) s"
