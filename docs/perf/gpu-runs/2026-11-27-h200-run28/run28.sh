#!/usr/bin/env bash
# Session 18's one GPU call: every GPU test on what sessions 15-17 wrote after run 27 (the
# tensor-core decode kernel's K-split fix, now the kAuto default; mixed steps split between the
# prefill and decode kernels; soft-cap; dummy weights quantized at load), the kernel benches
# (G1-G3, G10, G12, G6-G8, GGUF), the 8B model bench (graphs, both decode kernels, the mixed
# step), then the two serving figures: 8B BF16 (issue 27, goal >= 9,000 tok/s) and 8B FP8
# weights + FP8 KV (issue 28, goal >= 16,000 tok/s), 1,000 in / 1,000 out, 256 concurrent.
# If a tensor-core decode test fails, the benches and serving after it run the pipelined kernel
# (PAGODA_DECODE_ATTENTION=pipelined) and the summary says so. A deadline keeps it in the lease.
#   PAGODA_GPU_BUNDLE=.gpu-bundle-x BUDGET=520 bash scripts/gpu_check.sh exec bash .gpu-run/run28.sh
set -u
o=$OUT; sum=$o/summary.txt; tl=$o/tests.log; bl=$o/bench.log
DEADLINE=$((SECONDS + ${BUDGET:-520}))
{ nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader; date -u; } >>"$sum"
step() {  # step NAME CAP LOG CMD...
  local name=$1 cap=$2 log=$3; shift 3
  local left=$((DEADLINE - SECONDS)); ((left < 5)) && { echo "$name SKIPPED (deadline)" >>"$sum"; return 9; }
  ((cap > left)) && cap=$left
  local s=$SECONDS; echo "== $name" >>"$log"
  timeout "$cap" "$@" >>"$log" 2>&1; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" >>"$sum"
  return $rc
}
G="--gtest_color=no"
step attention 100 "$tl" gpu_paged_attention_test $G
step mixed_step 40 "$tl" gpu_mixed_step_test $G
step executor 30 "$tl" gpu_cuda_model_executor_test $G
step fp8_kv_cache 50 "$tl" gpu_fp8_kv_cache_test $G
step gemma3_kernels 25 "$tl" gpu_gemma3_kernels_test $G
step tiny_hf_models 25 "$tl" gpu_tiny_hf_models_test $G
step quantized_executor 40 "$tl" gpu_quantized_executor_test $G
step dummy_weights 40 "$tl" gpu_dummy_weights_test $G
step speculative 40 "$tl" gpu_speculative_test $G
step elementwise 15 "$tl" gpu_elementwise_kernels_test $G
step w4a16 30 "$tl" gpu_w4a16_gemm_test $G
step fp8_gemm 30 "$tl" gpu_fp8_gemm_test $G
step skinny 20 "$tl" gpu_skinny_gemm_test $G
step sampling 20 "$tl" gpu_sampling_kernel_test $G
{ echo "-- failures"; grep -a -E '^\[  FAILED  \] .*\(' "$tl" | head -30
  echo -n "tests OK: "; grep -a -c '^\[       OK \]' "$tl"
  echo -n "tests skipped: "; grep -a -c '^\[  SKIPPED \] .*(' "$tl"; } >>"$sum"
# The tensor-core decode kernel's own tests (explicit kernel) and the model tests through kAuto.
if grep -a -E '^\[  FAILED  \] .*\(' "$tl" | grep -q -i -E 'Decode|Mixed|Executor|Softcap|Speculat'; then
  export PAGODA_DECODE_ATTENTION=pipelined
  echo "a decode-path test failed: benches and serving run PAGODA_DECODE_ATTENTION=pipelined" >>"$sum"
fi
step bench_attention 60 "$bl" gpu_bench kernels decode prefill
step bench_elementwise 30 "$bl" gpu_bench kernels elementwise
step bench_quant 45 "$bl" gpu_bench kernels fp8 gguf w4a16
CFG=configs/models/llama-3.1-8b.json
step model_b256 45 "$bl" gpu_bench model --config $CFG --batch 256 --context 1500 --steps 8
step model_b1 25 "$bl" gpu_bench model --config $CFG --batch 1 --context 1500 --steps 16
grep -a '^RESULT' "$bl" | sed 's/^RESULT //' >>"$sum"
VOCAB=.gpu-run/ggml-vocab-llama-bpe.gguf
serve() {  # serve NAME CAP [ENV=VALUE...]
  local name=$1 cap=$2; shift 2
  local left=$((DEADLINE - SECONDS)); ((left < 40)) && { echo "serve $name SKIPPED (${left}s left)" >>"$sum"; return; }
  ((cap > left)) && cap=$left
  mkdir -p "$o/$name"; local s=$SECONDS
  env OUT="$o/$name" SKIP_SPEC=1 SKIP_SYNC=1 NUM_PROMPTS=512 READY_TIMEOUT=90 "$@" \
    timeout "$cap" bash scripts/gpu_serve_bench.sh $VOCAB >"$o/$name/serve.log" 2>&1
  echo "serve $name rc=$? $((SECONDS - s))s" >>"$sum"
  cat "$o/$name/serve_bench_summary.txt" >>"$sum" 2>/dev/null || tail -5 "$o/$name/serve.log" >>"$sum"
  [[ -f "$o/$name/serve_bench_summary.txt" ]] && rm -f "$o/$name/serve.log"
}
serve bf16 150
serve fp8 150 FP8=1
step model_b1_fp8 40 "$o/bench2.log" gpu_bench model --config $CFG --batch 1 --context 1500 --steps 16 --quantization fp8
step model_b1_int4 40 "$o/bench2.log" gpu_bench model --config $CFG --batch 1 --context 1500 --steps 16 --quantization int4
grep -a '^RESULT' "$o/bench2.log" 2>/dev/null | sed 's/^RESULT //' >>"$sum"
# memcheck on the tensor-core decode kernel with K splits (an illegal address in run 27).
step memcheck_decode 45 "$tl" compute-sanitizer --tool memcheck --error-exitcode 7 \
  gpu_paged_attention_test $G --gtest_filter='GpuPagedAttention.DecodeMatchesCpuOracleWithOneAndManySplits'
grep -a 'ERROR SUMMARY' "$tl" >>"$sum"
cat "$sum"
