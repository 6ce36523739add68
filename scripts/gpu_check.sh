#!/usr/bin/env bash
# The GPU suite in one go: kernel tests, whole-model tests, compute-sanitizer, kernel and model
# benchmarks, then a short table. Made for a lent GPU machine (one call of at most 10 minutes),
# which has nvcc, CMake and ninja but none of Pagoda's other build dependencies and no network;
# so the binaries are built on a development machine and carried:
#
#   scripts/gpu_check.sh prepare   # here (no GPU needed): build for sm_90a only, bundle the
#                                  # binaries and their non-CUDA shared libraries in .gpu-bundle/
#   scripts/gpu_check.sh run       # on the GPU machine, with .gpu-bundle carried: run everything,
#                                  # full logs under $OUT (default: build-gpu-check/gpu-check-out)
#   scripts/gpu_check.sh build-run # where every dependency is installed: build here, then run
#   PAGODA_GPU_BUILD_DIR=build-x scripts/gpu_check.sh bundle   # bundle an existing CUDA build
#   GPU_CHECK_BINARIES="gpu_bench gpu_fp8_kv_cache_test" scripts/gpu_check.sh bundle
#                                  # only those binaries (the full set is ~20 MB compressed)
#   scripts/gpu_check.sh exec CMD [ARGS...]   # on the GPU machine: unpack the bundle, put its
#                                  # binaries on PATH and its libraries on LD_LIBRARY_PATH, run CMD
#                                  # (e.g. gpu_bench kernels, or one test with --gtest_filter)
#
# `run` takes GPU_CHECK_SANITIZER=0 (skip compute-sanitizer), GPU_CHECK_KERNEL_GROUPS (e.g.
# "prefill elementwise": only those gpu_bench kernels groups), GPU_CHECK_MODEL_BATCHES (1,64,128)
# and GPU_CHECK_MODEL_STEPS (24) for the Llama-3-8B dummy decode benchmark, to fit a short lease;
# GPU_CHECK_MODEL_QUANTIZATIONS="fp8 int4" adds its batch-1 run with the dummy weights quantized
# at load (each loads 8B weights through the host quantizer: tens of seconds), off by default.
#
# PAGODA_GPU_BUNDLE=.gpu-bundle-x keeps a second bundle beside the default one (each helper or
# experiment its own); name the same folder in the device call's carry.
#
# The device tool call: run(command="bash scripts/gpu_check.sh run", carry=[".gpu-bundle"]).
# Commit what comes back under docs/perf/gpu-runs/<date>-<gpu>/ so figures trace to a run.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUNDLE="$(cd "$ROOT" && realpath -m "${PAGODA_GPU_BUNDLE:-.gpu-bundle}")"
BUILD_DIR="${PAGODA_GPU_BUILD_DIR:-$ROOT/build-gpu-check}"
UNPACKED=/tmp/pagoda-gpu-bundle
TARGETS=(gpu_elementwise_kernels_test gpu_paged_attention_test gpu_sampling_kernel_test
         gpu_cuda_model_executor_test gpu_smollm2_golden_test gpu_skinny_gemm_test
         gpu_speculative_test gpu_dummy_weights_test gpu_w4a16_gemm_test
         gpu_fp8_gemm_test gpu_tiny_hf_models_test gpu_quantized_executor_test
         gpu_gemma3_kernels_test gpu_gemma3_golden_test gpu_fp8_kv_cache_test
         gpu_mixed_step_test gpu_bench)
TESTS=(gpu_elementwise_kernels_test gpu_paged_attention_test gpu_sampling_kernel_test
       gpu_cuda_model_executor_test gpu_smollm2_golden_test gpu_skinny_gemm_test
       gpu_speculative_test gpu_dummy_weights_test gpu_w4a16_gemm_test
       gpu_fp8_gemm_test gpu_tiny_hf_models_test gpu_quantized_executor_test
       gpu_gemma3_kernels_test gpu_gemma3_golden_test gpu_fp8_kv_cache_test
       gpu_mixed_step_test)

build() {
  local jobs="$1"
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPAGODA_CUDA_ARCHITECTURES=90a >/dev/null || return 1
  ninja -C "$BUILD_DIR" -j "$jobs" "${TARGETS[@]}" || return 1
}

# The bundle is one xz archive: uncompressed, the binaries and OpenBLAS alone would pass the
# 64 MiB the device tool carries.
bundle() {
  local staging="$BUILD_DIR/gpu-bundle-staging"
  rm -rf "$staging" "$BUNDLE" && mkdir -p "$staging/bin" "$staging/lib" "$BUNDLE" || return 1
  local bins=("$BUILD_DIR/gpu_bench")
  # GPU_CHECK_BINARIES="gpu_bench gpu_paged_attention_test ...": only these (each test binary
  # links every kernel, so the whole set plus the tree can pass the device tool's 64 MiB carry).
  local wanted=()
  read -r -a wanted <<<"${GPU_CHECK_BINARIES:-}"
  local tests=("${TESTS[@]}")
  if ((${#wanted[@]} > 0)); then
    bins=()
    tests=()
    for b in "${wanted[@]}"; do
      if [[ "$b" == gpu_bench || "$b" == pagoda ]]; then bins+=("$BUILD_DIR/$b"); else tests+=("$b"); fi
    done
  fi
  for t in "${tests[@]}"; do bins+=("$BUILD_DIR/tests/gpu/$t"); done
  # The CLI travels when the build has it (`ninja pagoda`) and no list leaves it out:
  # generate/serve/bench on the GPU.
  if ((${#wanted[@]} == 0)) && [[ -x "$BUILD_DIR/pagoda" ]]; then bins+=("$BUILD_DIR/pagoda"); fi
  cp "${bins[@]}" "$staging/bin/" || return 1
  # The gguf package (pure Python; the GPU image lacks it) for bench/peer/make_q4_k_m_gguf.py.
  local gguf_package parts=(bin lib)
  gguf_package="$("$ROOT/.venv/bin/python" -c \
    'import gguf, os; print(os.path.dirname(gguf.__file__))' 2>/dev/null)"
  if [[ -d "$gguf_package" ]]; then
    mkdir -p "$staging/python" && cp -r "$gguf_package" "$staging/python/" || return 1
    find "$staging/python" -name __pycache__ -prune -exec rm -rf {} +
    parts+=(python)
  fi
  # Every shared library outside glibc, the C++ runtime (the GPU image's is newer) and CUDA
  # (the GPU machine has its own CUDA 13) travels.
  ldd "${bins[@]}" | awk '/=> \//{print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libcudart|libcublas|libcublasLt)\.so' |
    while read -r lib; do cp -L "$lib" "$staging/lib/"; done
  strip --strip-unneeded "$staging"/bin/* "$staging"/lib/* 2>/dev/null
  # One xz stream with a dictionary larger than the whole tar: every test binary carries the same
  # CUDA fat binaries, which the window then stores once (run 28's 16 binaries: 52 MB with
  # `xz -T0 -6`, 20 MB so, in 90 s on 2 cores).
  tar -C "$staging" -cf - "${parts[@]}" | xz -T1 --lzma2=preset=6,dict=256MiB \
    >"$BUNDLE/bundle.tar.xz" || return 1
  local exclude
  exclude="$(git -C "$ROOT" rev-parse --git-path info/exclude)"
  [[ "$exclude" = /* ]] || exclude="$ROOT/$exclude"
  mkdir -p "$(dirname "$exclude")"
  grep -qx '/.gpu-bundle*/' "$exclude" 2>/dev/null || echo '/.gpu-bundle*/' >>"$exclude"
  du -sh "$BUNDLE/bundle.tar.xz"
}

# CUDA libraries on the GPU machine: the toolkit's, or the pip wheels' beside PyTorch.
cuda_library_path() {
  local dirs=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib)
  local site
  site="$(python3 -c 'import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))' 2>/dev/null)"
  [[ -n "$site" ]] && dirs+=("$site"/nvidia/cu13/lib "$site"/nvidia/cublas/lib "$site"/nvidia/cuda_runtime/lib)
  local path="$UNPACKED/lib"
  for d in "${dirs[@]}"; do [[ -d "$d" ]] && path="$path:$d"; done
  echo "$path"
}

unpack() {
  # A later call on the same warm machine may leave the bundle behind (it carried staged model
  # parts instead, scripts/gpu_stage.sh) and reuse what an earlier call unpacked.
  if [[ ! -f "$BUNDLE/bundle.tar.xz" && -x "$UNPACKED/bin/gpu_bench" ]]; then
    echo "gpu_check: no bundle carried; reusing $UNPACKED from an earlier call" >&2
  else
    [[ -f "$BUNDLE/bundle.tar.xz" ]] ||
      { echo "no $BUNDLE/bundle.tar.xz: run 'scripts/gpu_check.sh prepare' first" >&2; return 1; }
    rm -rf "$UNPACKED" && mkdir -p "$UNPACKED" && xz -dc "$BUNDLE/bundle.tar.xz" | tar -C "$UNPACKED" -xf - ||
      { echo "cannot unpack $BUNDLE/bundle.tar.xz" >&2; return 1; }
  fi
  local cuda_libraries
  cuda_libraries=$(cuda_library_path)
  export LD_LIBRARY_PATH="$cuda_libraries${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PATH="$UNPACKED/bin:$PATH"
  [[ -d "$UNPACKED/python" ]] && export PYTHONPATH="$UNPACKED/python${PYTHONPATH:+:$PYTHONPATH}"
  # The binaries run away from the source tree they were built in: point the real-model test at
  # this checkout's golden data and, if present, the default model (it skips without one).
  export PAGODA_TEST_DATA="$ROOT/tests/data"
  # The models come from models/ when carried, else from what scripts/gpu_stage.sh assembled in
  # /tmp/pagoda-stage over earlier calls (the default model is over the carry limit beside the
  # bundle).
  local model="$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
  [[ -f "$model" ]] || model=/tmp/pagoda-stage/SmolLM2-135M-Instruct.Q4_1.gguf
  [[ -z "${PAGODA_SMOLLM2_GGUF:-}" && -f "$model" ]] && export PAGODA_SMOLLM2_GGUF="$model"
  local gemma="$ROOT/models/gemma-3-270m/gemma-3-270m-q4_k_m.gguf"
  [[ -f "$gemma" ]] || gemma=/tmp/pagoda-stage/gemma-3-270m-q4_k_m.gguf
  [[ -z "${PAGODA_GEMMA3_GGUF:-}" && -f "$gemma" ]] && export PAGODA_GEMMA3_GGUF="$gemma"
  return 0
}

run_all() {
  local out="${OUT:-$BUILD_DIR/gpu-check-out}"
  mkdir -p "$out"
  local log="$out/gpu_check.log" summary="$out/summary.txt" bench_log="$out/bench.log"
  local sanitizer_log="$out/sanitizer.log"
  : >"$log"
  unpack || return 1
  local bin="$UNPACKED/bin"
  {
    echo "== gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv
    nvcc --version | tail -1
    echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
    ldd "$bin/gpu_cuda_model_executor_test"
  } >>"$log" 2>&1

  local results=()
  for t in "${TESTS[@]}"; do
    echo "== $t" >>"$log"
    if [[ ! -x "$bin/$t" ]]; then  # a bundle of GPU_CHECK_BINARIES without it
      results+=("$(printf '%-32s %s' "$t" "not in the bundle")")
      continue
    fi
    local start=$SECONDS part="$out/.part"
    timeout 240 "$bin/$t" --gtest_color=no >"$part" 2>&1
    local rc=$?
    cat "$part" >>"$log"
    # Per-test lines carry their time in parentheses; the summary lines do not.
    local passed skipped failed
    passed=$(grep -c '^\[       OK \] .*(' "$part")
    skipped=$(grep -c '^\[  SKIPPED \] .*(' "$part")
    failed=$(grep -c '^\[  FAILED  \] .*(' "$part")
    rm -f "$part"
    results+=("$(printf '%-32s %s  ok %s, skipped %s, failed %s  (%ds)' "$t" \
      "$([[ $rc == 0 ]] && echo PASS || echo "FAIL rc=$rc")" "$passed" "$skipped" "$failed" \
      $((SECONDS - start)))")
  done

  # memcheck on small configurations: the elementwise kernels, greedy sampling, the FP32 model.
  : >"$sanitizer_log"
  local sanitizer_result="compute-sanitizer not found"
  if [[ "${GPU_CHECK_SANITIZER:-1}" == 0 ]]; then
    sanitizer_result="skipped (GPU_CHECK_SANITIZER=0)"
  elif command -v compute-sanitizer >/dev/null; then
    local ok=1
    for spec in "gpu_elementwise_kernels_test:GpuRmsNorm.*:GpuSiluMul.*:GpuRopeKvCache.*" \
                "gpu_sampling_kernel_test:Shapes/GpuSamplerMatchesHost.DrawForDraw/rows33_vocab1000:GpuSampler.SlotChurnKeepsTheStateRight" \
                "gpu_cuda_model_executor_test:GpuCudaModelExecutor.LlamaFp32MatchesCpu:GpuCudaModelExecutor.GraphReplayMatchesEagerFp32" \
                "gpu_paged_attention_test:GpuPagedAttention.DecodeMatchesCpuOracleWithOneAndManySplits" \
                "gpu_paged_attention_test:GpuPagedPrefillMma.AutoDispatch" \
                "gpu_mixed_step_test:GpuMixedStep.TinyQwen3Bf16MatchesCpu:GpuMixedStep.TinyGemma3WindowsAndKvGroupsBf16MatchCpu" \
                "gpu_skinny_gemm_test:GpuSkinnyGemm.*" \
                "gpu_w4a16_gemm_test:GpuW4A16Gemm.DequantizeIsExactThenRoundedOnce:GpuW4A16Gemm.GatherColumnsFollowsThePermutation:GpuW4A16Gemm.GgufFormDequantizeAndLayerDispatch" \
                "gpu_fp8_gemm_test:GpuFp8.QuantizeRowsIsTheHostRuleBitForBit:GpuFp8.RmsNormFusedOutputEqualsQuantizingItsOutput:GpuFp8.SkinnyGemmIsExactOnExactlySummableCodes"; do
      local t="${spec%%:*}" filter="${spec#*:}"
      [[ -x "$bin/$t" ]] || continue  # not in the bundle
      echo "== memcheck $t $filter" >>"$sanitizer_log"
      timeout 150 compute-sanitizer --tool memcheck --error-exitcode 7 \
        "$bin/$t" --gtest_filter="$filter" --gtest_color=no >>"$sanitizer_log" 2>&1 || ok=0
    done
    sanitizer_result=$([[ $ok == 1 ]] && echo "memcheck clean" || echo "memcheck FOUND ERRORS or timed out (see sanitizer.log)")
  fi

  : >"$bench_log"
  # shellcheck disable=SC2086
  timeout 200 "$bin/gpu_bench" kernels ${GPU_CHECK_KERNEL_GROUPS:-} >>"$bench_log" 2>&1 ||
    echo "gpu_bench kernels failed rc=$?" >>"$bench_log"
  local config="$ROOT/configs/models/llama-3-8b.json"
  timeout 200 "$bin/gpu_bench" model --config "$config" --batch "${GPU_CHECK_MODEL_BATCHES:-1,64,128}" \
    --context 512 --steps "${GPU_CHECK_MODEL_STEPS:-24}" \
    >>"$bench_log" 2>&1 || echo "gpu_bench model failed rc=$?" >>"$bench_log"
  # Batch-1 decode with the dummy weights quantized at load (issue 28: FP8 and INT4 against
  # their weight-bytes roofline, the "decode b1 fp8-w weight bytes / step" lines' ratio to B).
  local q
  for q in ${GPU_CHECK_MODEL_QUANTIZATIONS:-}; do
    timeout 240 "$bin/gpu_bench" model --config "$config" --batch 1 --context 512 \
      --steps "${GPU_CHECK_MODEL_STEPS:-24}" --quantization "$q" \
      >>"$bench_log" 2>&1 || echo "gpu_bench model --quantization $q failed rc=$?" >>"$bench_log"
  done

  local sampler_lines='^RESULT (sampler |G13 |d2h bytes|decode .*execute)'
  {
    echo "== Pagoda GPU check: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null)"
    echo "-- tests"
    printf '%s\n' "${results[@]}"
    echo "-- sanitizer: $sanitizer_result"
    echo "-- benchmarks (value, unit, ratio to the same-run ceiling, goal)"
    grep '^RESULT' "$bench_log" | grep -v -E "$sampler_lines" | sed 's/^RESULT //'
    echo "-- sampling beside the logits: process+sample+logprobs per step, decode through execute(),"
    echo "   bytes execute() copies to the host per decode step"
    grep -E "$sampler_lines" "$bench_log" | sed 's/^RESULT //'
    grep -E 'failed rc=' "$bench_log"
  } >"$summary"
  cat "$summary"
}

case "${1:-}" in
  prepare) build 2 && bundle ;;
  bundle) bundle ;;  # an existing build in $PAGODA_GPU_BUILD_DIR
  run) run_all ;;
  exec) shift; unpack && exec "$@" ;;
  build-run) build "$(nproc)" && bundle && run_all ;;
  *) echo "usage: scripts/gpu_check.sh prepare | bundle | run | exec CMD... | build-run" >&2; exit 2 ;;
esac
