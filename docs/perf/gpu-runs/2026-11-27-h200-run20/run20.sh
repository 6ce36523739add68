#!/usr/bin/env bash
# Session 14, call 6: the helpers' new GPU tests (quantized executor, Gemma 3) at their first run.
set -u
o=$OUT; sum=$o/summary.txt
for t in gpu_quantized_executor_test gpu_gemma3_kernels_test gpu_tiny_gemma3_test gpu_cuda_model_executor_test gpu_tiny_qwen3_test; do
  s=$SECONDS; timeout 100 $t --gtest_color=no >"$o/$t.log" 2>&1; echo "$t rc=$? $((SECONDS-s))s" >>"$sum"
  grep -a -E '^\[  FAILED  \] .*\(' "$o/$t.log" | head -20 >>"$sum"
done
cat "$sum"
