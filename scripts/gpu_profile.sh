#!/usr/bin/env bash
# Nsight Compute on one launch of each kernel whose goal is still open, so a session without a GPU
# can tell what bounds it (memory, issue, latency, occupancy) instead of guessing:
#
#   scripts/gpu_profile.sh [CAP_SECONDS]   (on the device, gpu_bench on PATH: gpu_check.sh exec)
#
# Each profile runs `gpu_bench kernels GROUP` under ncu, skips the group's warm-up launches of the
# kernel and profiles the next one, then ends the program (--kill on). ncu reads hardware counters
# on the Firecracker machines (the H100s), not under gVisor (the H200s: "Failed to initialize the
# profiler", KINDS.md), where the first profile's failure ends the script. Sections: speed of
# light (DRAM and SM throughput against peak), launch statistics (registers, shared memory,
# grid), occupancy, warp stall reasons and the memory workload.
set -u
CAP=${1:-150}
END=$((SECONDS + CAP))
command -v ncu >/dev/null || { echo "gpu_profile: ncu is not on PATH"; exit 0; }
# name|group|kernel regex (part of the demangled name: namespaces and template arguments included)
PROFILES=(
  "G6 w4a16 zero-point M=1 4096x14336|w4a16|w4a16_gemm_kernel"
  "GGUF Q4_K M=1 4096x14336|gguf|w4a16_gemm_kernel"
  "G5 fp8 skinny M=1 6144x4096|fp8|fp8_skinny_gemm_kernel"
  "G1 decode b64 ctx2048, bf16 cache, tensor cores|decode|paged_decode_mma_kernel<__nv_bfloat16, __nv_bfloat16,"
  "G1 decode b64 ctx2048, fp8 cache, tensor cores|decode|paged_decode_mma_kernel<__nv_bfloat16, unsigned char, 128, false>"
  "G1 decode b64 ctx2048, fp8 cache, tensor cores direct|decode|paged_decode_mma_kernel<__nv_bfloat16, unsigned char, 128, true>"
)
kill_args=(--kill yes)  # end the program once its launch is profiled
for p in "${PROFILES[@]}"; do
  IFS='|' read -r name group regex <<<"$p"
  left=$((END - SECONDS))
  ((left < 20)) && { echo "== $name: SKIPPED (${left}s left)"; continue; }
  ((left > 60)) && left=60
  echo "== $name"
  profile() {
    timeout "$left" ncu --clock-control none "$@" --kernel-name-base demangled \
      --kernel-name "regex:$regex" --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section LaunchStats --section Occupancy \
      --section WarpStateStats --section MemoryWorkloadAnalysis \
      gpu_bench kernels "$group" 2>&1
  }
  out=$(profile "${kill_args[@]}")
  rc=$?
  # An ncu that does not take --kill: without it the group runs to its end (seconds).
  if ((${#kill_args[@]} > 0)) &&
    grep -i -- '--kill' <<<"$out" | grep -q -i -E 'unrecogni[sz]ed|invalid|unknown'; then
    kill_args=()
    out=$(profile)
    rc=$?
  fi
  # ncu's report only: the program's own RESULT lines are in the bench logs already.
  grep -v -E '^RESULT ' <<<"$out" | grep -v -E '^==PROF==' | tail -n 120
  echo "rc=$rc"
  if grep -q -E 'Failed to initialize the profiler|ERR_NVGPUCTRPERM|LibraryNotLoaded' <<<"$out"; then
    echo "gpu_profile: ncu cannot read counters on this machine; stopping"
    exit 0
  fi
done
