#!/usr/bin/env bash
# Session 14, call 3: W4A16 with x staged in shared memory; FP8 sums in 256 MiB chunks.
set -u
o=$OUT; sum=$o/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader >>"$sum"
for t in gpu_w4a16_gemm_test gpu_fp8_gemm_test; do
  timeout 90 $t --gtest_color=no >"$o/$t.log" 2>&1; echo "$t rc=$?" >>"$sum"
  grep -a -E '^\[  FAILED  \]' "$o/$t.log" | head -5 >>"$sum"
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 7 gpu_w4a16_gemm_test --gtest_filter='GpuW4A16Gemm.LinearLayer*' >"$o/mc.log" 2>&1; echo "memcheck w4a16 layer rc=$?" >>"$sum"
timeout 150 gpu_bench kernels w4a16 fp8 >"$o/bench.log" 2>&1; echo "bench rc=$?" >>"$sum"
grep -a -E '^RESULT|^note' "$o/bench.log" >>"$sum"
for skip in 5 28; do
  timeout 60 ncu --clock-control none -k regex:w4a16_gemm_kernel --launch-skip $skip --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section Occupancy --section LaunchStats \
    gpu_bench kernels w4a16 >>"$o/ncu.log" 2>&1
  echo "ncu skip $skip rc=$?" >>"$sum"
done
grep -a -E "w4a16_gemm_kernel<|Duration|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per|Warp Cycles Per Issued" "$o/ncu.log" >>"$sum"
cat "$sum"
