#!/usr/bin/env bash
# Instructions per warm alloc+free pair for every strategy and benchmark cell, counted by callgrind
# over the pair loop only (pair_cost.cpp), with tracing off and on: an exact figure where wall time
# on a shared machine is not. Needs valgrind and a built core library.
#
#   native/tools/pair_cost.sh BUILD_DIR [strategy ...]      # default: the benchmark's rows
#
# Environment: PAIRS (default 20000); PAIR_COST_BUILD_ONLY=1 only builds BUILD_DIR/pair_cost (for
# timing runs without valgrind, e.g. on the GPU machine).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)  # native/
build=$(cd "$1" && pwd)
shift
pairs=${PAIRS:-20000}
bin="$build/pair_cost"
# Core alone, in any build: the CUDA backings are a library of their own (vramscope_cuda), so no
# CUDA runtime is needed here.
g++ -std=c++17 -O3 -DNDEBUG -I"$here/core/include" "$here/tools/pair_cost.cpp" \
  -Wl,--whole-archive "$build/libvramscope_core.a" -Wl,--no-whole-archive \
  -pthread -o "$bin"
[ "${PAIR_COST_BUILD_ONLY:-0}" = 1 ] && { echo "built $bin"; exit 0; }

# The parameters the benchmark uses for each cell (its JSON notes): size live params...
cells() {
  case "$1" in
    block_pool)
      echo "512 0 block_size=512 pool_size=1024"
      echo "1MiB 0 block_size=1048576 pool_size=2097152"
      echo "64MiB 0 block_size=67108864 pool_size=134217728"
      echo "512 1000 block_size=512 pool_size=513024"
      echo "1MiB 1000 block_size=1048576 pool_size=1050673152" ;;
    slab)
      echo "512 0"
      echo "1MiB 0 classes=256,1024,4096,16384,65536,1048576"
      echo "64MiB 0 classes=256,1024,4096,16384,65536,1048576,67108864 slab_size=67108864"
      echo "512 1000"
      echo "1MiB 1000 classes=256,1024,4096,16384,65536,1048576"
      echo "64MiB 1000 classes=256,1024,4096,16384,65536,1048576,67108864 slab_size=67108864" ;;
    buddy)
      echo "512 0"; echo "1MiB 0"; echo "64MiB 0"; echo "512 1000"
      echo "1MiB 1000 pool_size=2147483648"
      echo "64MiB 1000 pool_size=4294967296" ;;
    caching.pow2|caching.seed|caching.pytorch)
      for c in "512 0" "1MiB 0" "64MiB 0" "512 1000" "1MiB 1000" "64MiB 1000"; do
        echo "$c preset=${1#caching.}"; done ;;
    device_bump)
      echo "512 0"; echo "1MiB 0"; echo "64MiB 0"; echo "512 1000"
      echo "1MiB 1000 capacity=2147483648"
      echo "64MiB 1000 capacity=4294967296" ;;
    *)
      for c in "512 0" "1MiB 0" "64MiB 0" "512 1000" "1MiB 1000" "64MiB 1000"; do echo "$c"; done ;;
  esac
}

rows=("$@")
[ ${#rows[@]} -eq 0 ] && rows=(block_pool slab buddy arena caching.pow2 caching.pytorch device_bump)
printf "%-16s %-6s %-5s %10s %10s\n" strategy size live "off Ir" "on Ir"
for row in "${rows[@]}"; do
  strategy=${row%%.*}
  while read -r size live extra; do
    out=()
    for tracing in 0 1; do
      f=$(mktemp)
      # shellcheck disable=SC2086
      valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file="$f" \
        "$bin" "$strategy" "$size" "$live" "$tracing" "$pairs" $extra >/dev/null 2>&1
      ir=$(grep -m1 '^summary:' "$f" | awk '{print $2}')
      rm -f "$f"
      out+=("$(awk -v ir="$ir" -v n="$pairs" 'BEGIN{printf "%.1f", ir/n}')")
    done
    printf "%-16s %-6s %-5s %10s %10s\n" "$row" "$size" "$live" "${out[0]}" "${out[1]}"
  done < <(cells "$row")
done
