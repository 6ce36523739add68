#!/usr/bin/env bash
# Session 15, call 1: every GPU test binary at 8f332a4 (the W4A16 in-kernel split-K reduction,
# the SiLU/GeGLU merge, head_dim 256 + windows in paged attention, the merged tiny-HF test never
# ran), memcheck on W4A16, G6/G7/G8, then issue 27's serving figure: `pagoda serve` with
# Llama-3.1-8B dummy BF16 weights, sync vs --async-scheduling (scripts/gpu_serve_bench.sh).
# A deadline keeps it inside the lease (each step gets min(its cap, what is left)).
set -u
o=$OUT; sum=$o/summary.txt; tl=$o/tests.log
DEADLINE=$((SECONDS + ${BUDGET:-470}))
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >>"$sum"
step() {  # step NAME CAP LOG CMD...
  local name=$1 cap=$2 log=$3; shift 3
  local left=$((DEADLINE - SECONDS)); ((left < 5)) && { echo "$name SKIPPED (deadline)" >>"$sum"; return; }
  ((cap > left)) && cap=$left
  local s=$SECONDS; echo "== $name" >>"$log"
  timeout "$cap" "$@" >>"$log" 2>&1; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" >>"$sum"
}
for t in gpu_w4a16_gemm_test gpu_elementwise_kernels_test gpu_gemma3_kernels_test gpu_tiny_hf_models_test \
         gpu_cuda_model_executor_test gpu_quantized_executor_test gpu_dummy_weights_test gpu_paged_attention_test \
         gpu_skinny_gemm_test gpu_sampling_kernel_test gpu_fp8_gemm_test gpu_speculative_test \
         gpu_smollm2_golden_test gpu_gemma3_golden_test; do
  step $t 60 "$tl" $t --gtest_color=no
done
step mc_w4a16 40 "$o/sanitizer.log" compute-sanitizer --tool memcheck --error-exitcode 7 gpu_w4a16_gemm_test --gtest_filter='GpuW4A16Gemm.LinearLayer*'
step bench_w4a16 40 "$o/bench.log" gpu_bench kernels w4a16
step bench_fp8 40 "$o/bench.log" gpu_bench kernels fp8
{ echo "-- failures"; grep -a -E '^\[  FAILED  \] .*\(' "$tl" "$o/sanitizer.log" | head -30
  echo -n "tests OK: "; grep -a -c '^\[       OK \]' "$tl"; grep -a -E '^\[  SKIPPED \] .*\(' "$tl" | head
  grep -a 'ERROR SUMMARY' "$o/sanitizer.log"
  echo "-- bench"; grep -a '^RESULT G' "$o/bench.log"; } >>"$sum"
left=$((DEADLINE - SECONDS))
echo "serve bench gets ${left}s" >>"$sum"
SKIP_SPEC=1 NUM_PROMPTS=${NUM_PROMPTS:-512} READY_TIMEOUT=120 timeout "$left" \
  bash scripts/gpu_serve_bench.sh models/vocab/ggml-vocab-llama-bpe.gguf >"$o/serve.log" 2>&1
echo "serve bench rc=$?" >>"$sum"
[[ -f "$o/serve_bench_summary.txt" ]] || { mkdir -p "$o/sb"; tar -C /tmp -czf "$o/serve_bench_partial.tgz" $(cd /tmp && ls -d tmp.* 2>/dev/null) 2>/dev/null; }
cat "$sum"; cat "$o/serve_bench_summary.txt" 2>/dev/null
