#!/usr/bin/env bash
# Session 14, call 2: FP8 through sums + epilogue (tests, G8), and where W4A16's time goes (ncu).
set -u
o=$OUT; sum=$o/summary.txt
nvidia-smi --query-gpu=name --format=csv,noheader >>"$sum"
timeout 90 gpu_fp8_gemm_test --gtest_color=no >"$o/fp8_test.log" 2>&1; echo "fp8 test rc=$?" >>"$sum"
grep -a -E '^\[  (FAILED|  OK|SKIPPED) ' "$o/fp8_test.log" >>"$sum"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 7 gpu_fp8_gemm_test --gtest_filter='GpuFp8.LinearLayer*' >"$o/mc.log" 2>&1; echo "memcheck fp8 layer rc=$?" >>"$sum"
timeout 120 gpu_bench kernels fp8 >"$o/bench_fp8.log" 2>&1; echo "bench fp8 rc=$?" >>"$sum"
grep -a -E '^RESULT|^note' "$o/bench_fp8.log" >>"$sum"
for skip in 5 28 51; do
  timeout 60 ncu --clock-control none -k regex:w4a16_gemm_kernel --launch-skip $skip --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
    --section LaunchStats --section MemoryWorkloadAnalysis gpu_bench kernels w4a16 >>"$o/ncu.log" 2>&1
  echo "ncu skip $skip rc=$?" >>"$sum"
done
cat "$sum"
