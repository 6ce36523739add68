#!/usr/bin/env bash
set -u
o=$OUT; sum=$o/summary.txt
timeout 90 gpu_w4a16_gemm_test --gtest_color=no >"$o/w4a16_test.log" 2>&1; echo "w4a16 test rc=$?" >>"$sum"
grep -a -E '^\[  FAILED  \]' "$o/w4a16_test.log" | head -5 >>"$sum"
timeout 100 gpu_bench kernels w4a16 >"$o/bench.log" 2>&1; echo "bench rc=$?" >>"$sum"
grep -a -E '^RESULT G' "$o/bench.log" | grep -v "dequant\|M=128\|M=256" >>"$sum"
cat "$sum"
