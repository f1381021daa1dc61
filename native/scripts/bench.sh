#!/usr/bin/env bash
# Builds the benchmark (Release, with CUDA when a CUDA compiler is found) into native/build-bench
# and runs it with the arguments given: `npm run bench -- --quick` ends up here.
#   native/scripts/bench.sh [vramscope_bench options: --quick, --json FILE, --strategies a,b, ...]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${VRAMSCOPE_BENCH_BUILD:-$ROOT/native/build-bench}
JOBS=${VRAMSCOPE_JOBS:-$(nproc 2>/dev/null || echo 2)}

GENERATOR=()
# Ninja only for a fresh directory: CMake refuses to switch generators in an existing one.
if [ ! -f "$BUILD/CMakeCache.txt" ] && command -v ninja > /dev/null; then GENERATOR=(-G Ninja); fi

# The build's own output goes to stderr so that stdout is the benchmark's alone.
mkdir -p "$BUILD"
cmake -S "$ROOT/native" -B "$BUILD" ${GENERATOR[@]+"${GENERATOR[@]}"} -DCMAKE_BUILD_TYPE=Release \
  -DVRAMSCOPE_CUDA=AUTO -DVRAMSCOPE_TESTS=OFF -DVRAMSCOPE_BENCH=ON > "$BUILD/configure.log" 2>&1 ||
  { cat "$BUILD/configure.log" >&2; echo "bench.sh: cmake configure failed" >&2; exit 1; }
cmake --build "$BUILD" --parallel "$JOBS" --target vramscope_bench 1>&2

exec "$BUILD/vramscope_bench" "$@"
