#!/usr/bin/env bash
# Builds the native CPU tests under sanitizers and runs them; exits non-zero on any failure or
# report. AddressSanitizer + UndefinedBehaviorSanitizer run every CPU test (native/build-asan);
# ThreadSanitizer runs the multi-threaded caching stress and the replay tests, whose targets replay
# on several threads (native/build-tsan).
#
#   native/scripts/sanitizers.sh            # both
#   native/scripts/sanitizers.sh asan       # one of them
#   native/scripts/sanitizers.sh tsan
#
# Environment: JOBS (parallel build jobs, default 2), VRAMSCOPE_THREADS_SECONDS (per preset in
# caching_threads_test, default 1.5). On 2 shared cores: asan about 4 min (3.5 of them building;
# strategy_suite's full 1M-operation stress takes 25 s), tsan about 35 s.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)  # native/
jobs=${JOBS:-2}
which=${1:-all}

# Every report is fatal, and UBSan does not carry on after one.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

configure() {  # build dir, sanitizers
  cmake -S "$here" -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVRAMSCOPE_CUDA=OFF \
    -DVRAMSCOPE_BENCH=OFF -DVRAMSCOPE_SANITIZE="$2" \
    -DCMAKE_CXX_FLAGS="-fno-sanitize-recover=all" >/dev/null
}

run_asan() {
  local dir="$here/build-asan"
  echo "== address,undefined: build ($dir)"
  configure "$dir" address,undefined
  cmake --build "$dir" -j "$jobs"
  echo "== address,undefined: ctest -L CPU"
  (cd "$dir" && ctest -L CPU --output-on-failure)
}

run_tsan() {
  local dir="$here/build-tsan"
  echo "== thread: build caching_threads_test, replay_test ($dir)"
  configure "$dir" thread
  cmake --build "$dir" -j "$jobs" --target caching_threads_test replay_test
  echo "== thread: caching_threads_test"
  "$dir/caching_threads_test"
  echo "== thread: replay_test"
  "$dir/replay_test"
}

start=$SECONDS
case "$which" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_asan; run_tsan ;;
  *) echo "usage: $0 [asan|tsan|all]" >&2; exit 2 ;;
esac
echo "== sanitizers passed in $((SECONDS - start)) s"
