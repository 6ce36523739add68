#!/usr/bin/env bash
# Session 15, last call: everything this session wrote after run 26, on its first GPU run: the
# tensor-core decode kernel, the FP8 KV cache (append, decode, CUDA-core and tensor-core prefill,
# the executor), the mixed-step kernels, head_dim 256 + windows on the tensor cores, the helpers' per-layer-group KV on CUDA and GGUF types kept quantized, then the
# decode/prefill/GGUF/W4A16 benches, the 8B model bench (with the mixed step), and the 8B serving
# figure with the pipelined decode attention (async only). A deadline keeps it inside the lease.
set -u
o=$OUT; sum=$o/summary.txt; tl=$o/tests.log
DEADLINE=$((SECONDS + ${BUDGET:-230}))
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader >>"$sum"
step() {  # step NAME CAP LOG CMD...
  local name=$1 cap=$2 log=$3; shift 3
  local left=$((DEADLINE - SECONDS)); ((left < 5)) && { echo "$name SKIPPED (deadline)" >>"$sum"; return; }
  ((cap > left)) && cap=$left
  local s=$SECONDS; echo "== $name" >>"$log"
  timeout "$cap" "$@" >>"$log" 2>&1; local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" >>"$sum"
}
G="--gtest_color=no"
# The mixed-step and head_dim-256/window tests first (new), then the rest of the attention test.
step attention_new 40 "$tl" gpu_paged_attention_test $G --gtest_filter='*Decode*:*Mixed*:*HeadDim256*:*AutoDispatch*'
step fp8_kv_cache 50 "$tl" gpu_fp8_kv_cache_test $G
step elementwise 15 "$tl" gpu_elementwise_kernels_test $G
step gemma3_kernels 20 "$tl" gpu_gemma3_kernels_test $G
step tiny_hf_models 20 "$tl" gpu_tiny_hf_models_test $G
step executor 25 "$tl" gpu_cuda_model_executor_test $G
step quantized_executor 30 "$tl" gpu_quantized_executor_test $G
step w4a16_gguf_kernels 30 "$tl" gpu_w4a16_gemm_test $G
step dummy_weights 15 "$tl" gpu_dummy_weights_test $G
step speculative_tiny 20 "$tl" gpu_speculative_test $G --gtest_filter='*tiny*'
step attention_rest 65 "$tl" gpu_paged_attention_test $G --gtest_filter='-*Decode*:*Mixed*:*HeadDim256*:*AutoDispatch*'
{ echo "-- failures"; grep -a -E '^\[  FAILED  \] .*\(' "$tl" | head -30
  echo -n "tests OK: "; grep -a -c '^\[       OK \]' "$tl"; } >>"$sum"
step bench_attention 40 "$o/bench.log" gpu_bench kernels decode prefill
step bench_quant 30 "$o/bench.log" gpu_bench kernels gguf w4a16
CFG=configs/models/llama-3.1-8b.json
step model_b256 40 "$o/model.log" gpu_bench model --config $CFG --batch 256 --context 1500 --steps 8
step model_b1 20 "$o/model.log" gpu_bench model --config $CFG --batch 1 --context 1500 --steps 16
grep -a '^RESULT' "$o/bench.log" "$o/model.log" | sed 's/^[^:]*://' >>"$sum"
left=0  # no serving this call: pagoda and the vocab do not fit the carry beside the tests
if ((left > 60)); then
  echo "serve bench gets ${left}s" >>"$sum"
  SKIP_SPEC=1 SKIP_SYNC=1 NUM_PROMPTS=512 READY_TIMEOUT=60 timeout "$left" \
    bash scripts/gpu_serve_bench.sh models/vocab/ggml-vocab-llama-bpe.gguf >"$o/serve.log" 2>&1
  echo "serve bench rc=$?" >>"$sum"
else
  echo "serve bench SKIPPED (${left}s left)" >>"$sum"
fi
cat "$sum"; cat "$o/serve_bench_summary.txt" 2>/dev/null
