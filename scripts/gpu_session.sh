#!/usr/bin/env bash
# A lent GPU's one long call (issues 27 and 28): every GPU test, the kernel and 8B model benches,
# then 8B serving BF16 and FP8 (weights + KV cache), with the default model speculation and
# perplexity per weight path, and an 8B Q4_K_M GGUF on the GPU, all inside a deadline, every
# figure in $OUT/summary.txt. Made from run 28's script
# (docs/perf/gpu-runs/2026-11-27-h200-run28/), kept here so a session's first call needs no
# writing:
#
#   here:   ninja -C build-gpu-check gpu_bench pagoda <the tests>   (scripts/gpu_check.sh prepare
#           builds them all), then
#           GPU_CHECK_BINARIES="gpu_bench pagoda $(scripts/gpu_session.sh --binaries)" \
#             PAGODA_GPU_BUNDLE=.gpu-bundle scripts/gpu_check.sh bundle
#   device (each call within 30 s of the last; run 29 made a 4th call of the session alone, to
#   carry Llama 3's vocabulary, 778 s of device time in all):
#     1. "bash scripts/gpu_check.sh exec bash scripts/gpu_stage.sh gather .gpu-stage",
#        carry [".gpu-bundle", ".gpu-stage/p00"]  (scripts/gpu_stage.sh split ... 20 beforehand)
#     2. "bash scripts/gpu_stage.sh gather .gpu-stage", carry [".gpu-stage/p01", ".gpu-stage/p02"]
#     3. "bash scripts/gpu_stage.sh gather .gpu-stage &&
#         BUDGET=570 bash scripts/gpu_check.sh exec bash scripts/gpu_session.sh",
#        carry [".gpu-stage/p03", ".gpu-stage/p04"], timeout_s=600
#   With the default model staged, the dummy 8B models take its tokenizer when Llama 3's
#   (models/vocab/ggml-vocab-llama-bpe.gguf, which does not fit beside p03 and p04) is not
#   carried: token ids past its 49,152 decode to nothing, the weights are the same. Without the
#   default model, the session alone, carrying the bundle and that vocabulary.
#
# Rehearse it here first, on the CPU emulation of the CUDA side: scripts/gpu_session_rehearsal.sh
# (its test lanes run the emulated tests; the GPU-only steps report their lines and fail or stop).
#
# If a test of kAuto's decode attention (the tensor-core kernel, over bf16 and FP8 caches) fails,
# the benches and serving run PAGODA_DECODE_ATTENTION=pipelined instead. Output files (the device
# tool brings back 8): summary.txt, tests.log, bench.log, bench2.log, profile.log and, per serving
# pass, <name>/serve_bench.tgz (bf16, fp8, and spec when the default model was staged), whose
# summaries summary.txt repeats. The real-model tests and the speculation figures need the
# default model, which is over the carry limit beside the bundle: scripts/gpu_stage.sh brings it
# over earlier calls.
set -u
TESTS=(gpu_paged_attention_test gpu_fp8_kv_cache_test gpu_mixed_step_test
       gpu_cuda_model_executor_test gpu_w4a16_gemm_test gpu_quantized_executor_test
       gpu_dummy_weights_test gpu_fp8_gemm_test gpu_gemma3_kernels_test gpu_tiny_hf_models_test
       gpu_speculative_test gpu_elementwise_kernels_test gpu_skinny_gemm_test
       gpu_sampling_kernel_test gpu_smollm2_golden_test gpu_gemma3_golden_test)
if [[ "${1:-}" == --binaries ]]; then
  echo "${TESTS[*]}"
  exit 0
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
o=${OUT:?run on the device machine, where OUT is set}
sum=$o/summary.txt tl=$o/tests.log bl=$o/bench.log b2=$o/bench2.log
DEADLINE=$((SECONDS + ${BUDGET:-520}))
{ nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader
  echo "commit $(git rev-parse --short HEAD 2>/dev/null) $(date -u +%FT%TZ)"; } >>"$sum"

step() {  # step NAME CAP LOG CMD...: at most CAP seconds and never past the deadline
  local name=$1 cap=$2 log=$3
  shift 3
  local left=$((DEADLINE - SECONDS))
  ((left < 5)) && { echo "$name SKIPPED (deadline)" >>"$sum"; return 9; }
  ((cap > left)) && cap=$left
  local s=$SECONDS
  echo "== $name" >>"$log"
  timeout "$cap" "$@" >>"$log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - s))s" >>"$sum"
  return $rc
}
failed_tests() { grep -a -E '^\[  FAILED  \] .*\(' "$tl"; }

CFG=configs/models/llama-3.1-8b.json
# The dummy 8B models' tokenizer: Llama 3's when carried, else the staged default model's.
VOCAB=models/vocab/ggml-vocab-llama-bpe.gguf
[[ -f "$VOCAB" ]] || VOCAB=.gpu-run/ggml-vocab-llama-bpe.gguf
[[ -f "$VOCAB" || -z "${PAGODA_SMOLLM2_GGUF:-}" ]] || VOCAB=$PAGODA_SMOLLM2_GGUF
echo "tokenizer of the dummy 8B models: $VOCAB" >>"$sum"
# An 8B Q4_K_M GGUF for the step near the end, written beside the tests (host work): random
# blocks in llama-quantize's Q4_K_M layout, 128,256 rows of vocabulary
# (bench/peer/make_q4_k_m_gguf.py; the gguf package travels in the bundle).
Q4KM=/tmp/llama-3.1-8b-q4_k_m.gguf
python3 bench/peer/make_q4_k_m_gguf.py "$CFG" "$Q4KM" --tokenizer-from "$VOCAB" \
  >"$o/q4_k_m_write.log" 2>&1 &
q4km_writer=$!

G=--gtest_color=no
# The tests run side by side: their CPU oracles, one thread each, took 330 of run 29's 570 s when
# the binaries ran one after another. The slow binaries are cut into gtest shards (run 29's
# seconds: attention 165, fp8_gemm 56, fp8_kv_cache 22, w4a16 16, sampling 14). The kernel tests
# allocate only their own buffers; the speculative test sizes a KV pool from the GPU's free
# memory, so it runs alone afterwards.
declare -A SHARDS=([gpu_paged_attention_test]=8 [gpu_fp8_gemm_test]=3 [gpu_fp8_kv_cache_test]=2
                   [gpu_w4a16_gemm_test]=2 [gpu_sampling_kernel_test]=2)
LANES=${TEST_LANES:-12}
lanes=$(mktemp -d) shard_pids=()
for t in "${TESTS[@]}"; do
  [[ "$t" == gpu_speculative_test ]] && continue
  n=${SHARDS[$t]:-1}
  for ((i = 0; i < n; i++)); do
    while (($(jobs -rp | wc -l) >= LANES)); do wait -n; done
    left=$((DEADLINE - SECONDS - 60))
    ((left < 5)) && left=5
    ((left > 200)) && left=200
    ( s=$SECONDS
      GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "$left" "$t" $G >"$lanes/$t.$i.log" 2>&1
      echo "${t#gpu_} shard $((i + 1))/$n rc=$? $((SECONDS - s))s" >"$lanes/$t.$i.rc" ) &
    shard_pids+=($!)
  done
done
wait "${shard_pids[@]}"
for f in "$lanes"/*.rc; do cat "$f" >>"$sum"; echo "== ${f##*/}" >>"$tl"; cat "${f%.rc}.log" >>"$tl"; done
rm -rf "$lanes"
step speculative_test 60 "$tl" gpu_speculative_test $G
{ echo "-- failures"; failed_tests | head -30
  echo -n "tests OK: "; grep -a -c '^\[       OK \]' "$tl"
  echo -n "tests skipped: "; grep -a -c '^\[  SKIPPED \] .*(' "$tl"; } >>"$sum"

# kAuto's decode attention is the tensor-core kernel (over bf16 and FP8 caches): if a test of it
# fails, the benches and serving run the pipelined kernel instead, and the summary says so.
if failed_tests | grep -q -E \
    'GpuPagedAttention.*Decode|SoftCap|GpuMixedStep|GpuCudaModelExecutor|GpuFp8KvCache\.Attention'; then
  export PAGODA_DECODE_ATTENTION=pipelined
  echo "a decode-attention test failed: the benches and serving run PAGODA_DECODE_ATTENTION=pipelined" >>"$sum"
fi

step bench_attention 60 "$bl" gpu_bench kernels decode prefill
step bench_elementwise 30 "$bl" gpu_bench kernels elementwise
step bench_quant 45 "$bl" gpu_bench kernels fp8 gguf w4a16
step model_b256 45 "$bl" gpu_bench model --config $CFG --batch 256 --context 1500 --steps 8
step model_b1 25 "$bl" gpu_bench model --config $CFG --batch 1 --context 1500 --steps 16
grep -a '^RESULT' "$bl" | sed 's/^RESULT //' >>"$sum"

serve() {  # serve NAME CAP [ENV=VALUE...]: scripts/gpu_serve_bench.sh, async scheduling only
  local name=$1 cap=$2
  shift 2
  local left=$((DEADLINE - SECONDS))
  ((left < 40)) && { echo "serve $name SKIPPED (${left}s left)" >>"$sum"; return; }
  ((cap > left)) && cap=$left
  mkdir -p "$o/$name"
  local s=$SECONDS
  env OUT="$o/$name" SKIP_SPEC=1 SKIP_SYNC=1 NUM_PROMPTS=512 READY_TIMEOUT=90 "$@" \
    timeout "$cap" bash scripts/gpu_serve_bench.sh "$VOCAB" >"$o/$name/serve.log" 2>&1
  echo "serve $name rc=$? $((SECONDS - s))s $*" >>"$sum"
  if [[ -f "$o/$name/serve_bench_summary.txt" ]]; then
    # In summary.txt and in the archive: the device tool brings back 8 files.
    cat "$o/$name/serve_bench_summary.txt" >>"$sum"
    rm -f "$o/$name/serve.log" "$o/$name/serve_bench_summary.txt"
  else
    tail -5 "$o/$name/serve.log" >>"$sum"
  fi
}
serve bf16 150
serve fp8 150 FP8=1
# With the default model staged (scripts/gpu_stage.sh; scripts/gpu_check.sh exec exports it):
# n-gram speculation on a grounded workload at batch 1 and 64 against plain decoding (issue 27).
if [[ -n "${PAGODA_SMOLLM2_GGUF:-}" ]]; then
  mkdir -p "$o/spec"
  step spec 150 "$o/spec/spec.log" env OUT="$o/spec" SKIP_SERVE=1 \
    bash scripts/gpu_serve_bench.sh "$PAGODA_SMOLLM2_GGUF"
  if [[ -f "$o/spec/serve_bench_summary.txt" ]]; then
    cat "$o/spec/serve_bench_summary.txt" >>"$sum"
    rm -f "$o/spec/serve_bench_summary.txt" "$o/spec/spec.log"
  fi
  # Perplexity through each CUDA weight path against the CPU's on the same weights (issue 28).
  echo "-- perplexity, tests/data/quant/perplexity_text.txt, ctx 512" >>"$sum"
  step perplexity 120 "$sum" bash scripts/gpu_perplexity.sh "$(command -v pagoda)" \
    "$PAGODA_SMOLLM2_GGUF"
fi
step model_b256_fp8kv 100 "$b2" gpu_bench model --config $CFG --batch 256 \
  --context 1500 --steps 8 --quantization fp8 --kv-cache-dtype fp8
step model_b1_fp8 70 "$b2" gpu_bench model --config $CFG --batch 1 --context 1500 --steps 16 \
  --quantization fp8
# The FP8 skinny GEMM's pipelined loop (session 23) against the default above.
step model_b1_fp8_pipelined 70 "$b2" env PAGODA_FP8_SKINNY=pipelined gpu_bench model \
  --config $CFG --batch 1 --context 1500 --steps 16 --quantization fp8
step model_b1_int4 70 "$b2" gpu_bench model --config $CFG --batch 1 --context 1500 --steps 16 \
  --quantization int4
grep -a '^RESULT' "$b2" 2>/dev/null | sed 's/^RESULT //' >>"$sum"
# The 8B Q4_K_M GGUF kept quantized (issue 28): its GPU memory after load (the "weights:" line)
# and decode, one stream and 64 at once.
wait "$q4km_writer"
echo "q4_k_m_write rc=$? $(tail -1 "$o/q4_k_m_write.log")" >>"$sum"
rm -f "$o/q4_k_m_write.log"
if [[ -f "$Q4KM" ]]; then
  echo "== q4_k_m" >>"$b2"
  step q4_k_m_bench 90 "$b2" pagoda bench offline "$Q4KM" --device cuda --num-prompts 64 \
    --input-len 512 --output-len 128 --max-num-seqs 64 --async-scheduling
  sed -n '/^== q4_k_m$/,$p' "$b2" | grep -a -E \
    '^(weights:|startup:|cuda graphs:|model |concurrent |single-stream |host gap|vs single)' >>"$sum"
  rm -f "$Q4KM"
fi
# memcheck on the decode kernels with K splits, the FP8 tensor-core path included.
step memcheck_decode 60 "$tl" compute-sanitizer --tool memcheck --error-exitcode 7 \
  gpu_fp8_kv_cache_test $G --gtest_filter='GpuFp8KvCache.AttentionOverCodesMatchesTheOracleOverTheirValues'
grep -a 'ERROR SUMMARY' "$tl" >>"$sum"
# Last, with what time is left: Nsight Compute on one launch of each kernel whose goal is open
# (scripts/gpu_profile.sh; counters on the H100s' Firecracker only).
left=$((DEADLINE - SECONDS - 5))
((left >= 40)) && step profile "$left" "$o/profile.log" bash scripts/gpu_profile.sh "$((left - 5))"
cat "$sum"
