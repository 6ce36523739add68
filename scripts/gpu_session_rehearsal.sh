#!/usr/bin/env bash
# scripts/gpu_session.sh run here, on the CPU emulation of the CUDA side, to check the script's own
# flow (test lanes and shards, the steps' caps and deadline, the summary) before a lent GPU's
# minutes are spent on it:
#
#   scripts/gpu_session_rehearsal.sh [BUILD_DIR] [BUDGET]     (defaults: build, 420 s)
#
# A folder of links named as the GPU binaries goes first on PATH: gpu_<name>_test ->
# tests/emulated/emulated_<name>_test (gpu_fp8_gemm_test -> emulated_fp8_test), gpu_bench and
# pagoda -> emulated/. The GPU-only binaries (the golden tests, Gemma 3's kernel test) and tools
# (nvidia-smi, compute-sanitizer, ncu) are absent, so their steps report rc=127; the 8B steps fail
# on the emulated device's memory or stop at their caps. What must hold: every emulated test
# passes in its lane, and every step reports a line. The summary is printed last; the output
# folder's path too.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$(cd "${1:-$ROOT/build}" && pwd)"
BUDGET=${2:-420}
EMULATED="$BUILD_DIR/tests/emulated"
[[ -x "$BUILD_DIR/emulated/pagoda" && -x "$BUILD_DIR/emulated/gpu_bench" ]] ||
  { echo "no $BUILD_DIR/emulated/{pagoda,gpu_bench}: build the CUDA emulation first" >&2; exit 2; }
work=$(mktemp -d)
mkdir -p "$work/bin" "$work/out"
for t in $(bash "$ROOT/scripts/gpu_session.sh" --binaries); do
  name=${t#gpu_}
  [[ "$name" == fp8_gemm_test ]] && name=fp8_test
  [[ -x "$EMULATED/emulated_$name" ]] && ln -s "$EMULATED/emulated_$name" "$work/bin/$t"
done
ln -s "$BUILD_DIR/emulated/gpu_bench" "$BUILD_DIR/emulated/pagoda" "$work/bin/"
echo "gpu_session_rehearsal: $(find "$work/bin" -name 'gpu_*_test' | wc -l) test binaries linked, output in $work/out" >&2
PATH="$work/bin:$PATH" OUT="$work/out" BUDGET=$BUDGET TEST_LANES=${TEST_LANES:-4} \
  bash "$ROOT/scripts/gpu_session.sh" >"$work/session.log" 2>&1 || true
cat "$work/out/summary.txt"
echo "gpu_session_rehearsal: output in $work/out" >&2
