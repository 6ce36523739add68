#!/usr/bin/env bash
set -u
# Session 14, call 8: W4A16 weights through a per-warp cp.async ring (8 tiles), 7 CTAs/SM at 16 rows.
o=$OUT; sum=$o/summary.txt
timeout 90 gpu_w4a16_gemm_test --gtest_color=no >"$o/w4a16_test.log" 2>&1; echo "w4a16 test rc=$?" >>"$sum"
grep -a -E '^\[  FAILED  \]' "$o/w4a16_test.log" | head -5 >>"$sum"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 7 gpu_w4a16_gemm_test --gtest_filter='GpuW4A16Gemm.LinearLayer*' >"$o/mc.log" 2>&1; echo "memcheck rc=$?" >>"$sum"
timeout 100 gpu_bench kernels w4a16 >"$o/bench.log" 2>&1; echo "bench rc=$?" >>"$sum"
grep -a -E '^RESULT G' "$o/bench.log" >>"$sum"
cat "$sum"
