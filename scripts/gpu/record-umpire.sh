#!/usr/bin/env bash
# Records a real Umpire replay log on a GPU machine: builds Umpire with CUDA from a source tree
# (UMPIRE_SRC; `git clone --recursive https://github.com/LLNL/Umpire`, its submodules included),
# builds scripts/gpu/umpire-workload.cpp against it, and runs it with UMPIRE_REPLAY=On. Writes to
# OUT_DIR (default ./umpire-out): the log (umpire_workload.*.stats), the program's own figures
# (workload.json) and the GPU's name (gpu.txt). Usage:
#   UMPIRE_SRC=/path/to/Umpire bash scripts/gpu/record-umpire.sh [STEPS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src=${UMPIRE_SRC:?set UMPIRE_SRC to an Umpire source tree with its submodules}
out=${OUT_DIR:-$PWD/umpire-out}
build=${UMPIRE_BUILD:-/tmp/umpire-build}
steps=${1:-40}
mkdir -p "$out" "$build"
# CUDA 13 takes a cudaMemLocation where Umpire (up to 2024.07 at least) passes a device number to
# cudaMemAdvise and cudaMemPrefetchAsync: such a tree is copied and those calls are adapted.
if [ "$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')" -ge 13 ] && grep -q 'cudaMemAdvise(src_ptr, length, m_advice, device)' "$src/src/umpire/op/CudaAdviseOperation.cpp"; then
  rm -rf "$build-src" && cp -r "$src" "$build-src" && src="$build-src"
  python3 - "$src/src/umpire/op" <<'PY'
import sys, pathlib
op = pathlib.Path(sys.argv[1])
loc = "cudaMemLocation{device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice, device == cudaCpuDeviceId ? 0 : device}"
a = op / "CudaAdviseOperation.cpp"
a.write_text(a.read_text().replace("::cudaMemAdvise(src_ptr, length, m_advice, device)", f"::cudaMemAdvise(src_ptr, length, m_advice, {loc})"))
p = op / "CudaMemPrefetchOperation.cpp"
p.write_text(p.read_text().replace("::cudaMemPrefetchAsync(src_ptr, length, device)", f"::cudaMemPrefetchAsync(src_ptr, length, {loc}, 0)")
             .replace("::cudaMemPrefetchAsync(src_ptr, length, device, stream)", f"::cudaMemPrefetchAsync(src_ptr, length, {loc}, 0, stream)"))
PY
fi
arch=${CUDA_ARCH:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)}
cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DENABLE_CUDA=On -DCMAKE_CUDA_ARCHITECTURES="$arch" \
  -DENABLE_TESTS=Off -DENABLE_EXAMPLES=Off -DENABLE_DOCS=Off -DENABLE_BENCHMARKS=Off -DUMPIRE_ENABLE_TOOLS=Off \
  -DUMPIRE_ENABLE_FILE_RESOURCE=Off -DCMAKE_INSTALL_PREFIX="$build/install" > "$build/cmake.log"
cmake --build "$build" -j "$(nproc)" --target install > "$build/build.log"
inc="$build/install/include"
libs=$(find "$build/install" -name 'libumpire.a' -o -name 'libcamp.a' -o -name 'libfmt.a' | sort -r)
cuda=$(dirname "$(command -v nvcc)")/..
# shellcheck disable=SC2086
g++ -std=c++17 -O2 -I"$inc" -I"$cuda/include" "$here/umpire-workload.cpp" $libs -L"$cuda/lib64" -lcudart -ldl -lpthread -o "$build/umpire_workload"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$out/gpu.txt"
UMPIRE_REPLAY=On UMPIRE_OUTPUT_DIR="$out" UMPIRE_OUTPUT_BASENAME=umpire_workload "$build/umpire_workload" "$steps" > "$out/workload.json"
ls -l "$out"
