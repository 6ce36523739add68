#!/usr/bin/env bash
# Session 14's first GPU call: the unrun W4A16/FP8/Qwen3/act-order/mask code first, within a
# deadline (each step gets min(its cap, what is left)).
set -u
o=$OUT; sum=$o/summary.txt; tl=$o/tests.log; bl=$o/bench.log; ml=$o/sanitizer.log
DEADLINE=$((SECONDS + ${BUDGET:-350}))
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >>"$sum"
step() {  # step NAME CAP LOG CMD...
  local name=$1 cap=$2 log=$3; shift 3
  local left=$((DEADLINE - SECONDS)); ((left < 15)) && { echo "$name SKIPPED (deadline)" >>"$sum"; return; }
  ((cap > left)) && cap=$left
  local s=$SECONDS; echo "== $name" >>"$log"
  timeout "$cap" "$@" --gtest_color=no >>"$log" 2>&1; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" >>"$sum"
}
bstep() { local name=$1 cap=$2 log=$3; shift 3; local left=$((DEADLINE - SECONDS)); ((left < 15)) && { echo "$name SKIPPED" >>"$sum"; return; }; ((cap > left)) && cap=$left; local s=$SECONDS; echo "== $name" >>"$log"; timeout "$cap" "$@" >>"$log" 2>&1; echo "$name rc=$? $((SECONDS - s))s" >>"$sum"; }
for t in gpu_w4a16_gemm_test gpu_fp8_gemm_test gpu_tiny_qwen3_test gpu_cuda_model_executor_test; do step $t 90 "$tl" $t; done
bstep bench_w4a16_fp8 100 "$bl" gpu_bench kernels w4a16 fp8
bstep structured 100 "$o/structured.log" python3 scripts/gpu_structured_check.py configs/models/llama-3.2-1b.json models/vocab/ggml-vocab-llama-bpe.gguf
for t in gpu_sampling_kernel_test gpu_dummy_weights_test gpu_elementwise_kernels_test gpu_skinny_gemm_test; do step $t 60 "$tl" $t; done
SAN="compute-sanitizer --tool memcheck --error-exitcode 7"
step mc_w4a16 60 "$ml" $SAN gpu_w4a16_gemm_test --gtest_filter='GpuW4A16Gemm.Dequantize*:GpuW4A16Gemm.Gather*:GpuW4A16Gemm.LinearLayer*'
step mc_fp8 45 "$ml" $SAN gpu_fp8_gemm_test --gtest_filter='GpuFp8.Quantize*:GpuFp8.RmsNorm*:GpuFp8.LinearLayer*'
step mc_qwen3 45 "$ml" $SAN gpu_tiny_qwen3_test --gtest_filter='GpuTinyQwen3.Fp32*'
{ echo "-- failures"; grep -a -E '^\[  FAILED  \]|^\[  SKIPPED \]' "$tl" "$ml" | sort -u | head -40
  grep -a -E 'ERROR SUMMARY' "$ml"; echo "-- bench"; grep -a '^RESULT' "$bl"; echo "-- structured"; cat "$o/structured.log"; } >>"$sum"
cat "$sum"
