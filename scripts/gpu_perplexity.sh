#!/usr/bin/env bash
# Issue 28's accuracy check on the GPU: the default model's perplexity on
# tests/data/quant/perplexity_text.txt through each CUDA weight path, beside the CPU's figure for
# the same weights and flags, measured in the same run (docs/perf/quantization.md has the CPU's
# table). One line per path, then PASS or FAIL against the bound below.
#
#   scripts/gpu_perplexity.sh PAGODA_BIN MODEL.gguf [--cpu-only]
#
# --cpu-only runs the CPU column alone (a rehearsal on a machine without a GPU).
#
# Paths (the GGUF is Q4_1 with Q8_0 tables): as stored (CUDA: the W4A16 / W8A16 GGUF forms with
# bf16 activations), --quantization fp8 (CUDA: W8A8, activations rounded to e4m3 per token; the
# CPU keeps its activations), --quantization int4 (W4A16 RTN, group 128), and an FP8 KV cache
# (CUDA only, against the CPU's cache in fp32).
#
# Bound: the CUDA perplexity within 2% of the CPU's. BF16 activations move it by well under 1%;
# FP8 activations (W8A8) add a rounding the CPU's FP8 row does not have, and an FP8 cache one
# more. A wrong scale, zero point or layout gives tens of percent or more.
set -u
BIN=${1:?usage: gpu_perplexity.sh PAGODA_BIN MODEL.gguf [--cpu-only]}
MODEL=${2:?usage: gpu_perplexity.sh PAGODA_BIN MODEL.gguf [--cpu-only]}
CPU_ONLY=0
[[ "${3:-}" == --cpu-only ]] && CPU_ONLY=1
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TEXT=$ROOT/tests/data/quant/perplexity_text.txt
BOUND=0.02

# name | flags on both devices | extra CUDA flags
PATHS=("gguf||" "fp8 weights|--quantization fp8|" "int4 weights|--quantization int4|"
       "fp8 kv cache||--kv-cache-dtype fp8")

score() {  # score DEVICE FLAGS...: the perplexity, or "error: ..." on one line
  local out
  if out=$("$BIN" perplexity "$MODEL" --text-file "$TEXT" --ctx 512 --json --device "$@" \
             2>/tmp/gpu_perplexity.err); then
    python3 -c 'import json,sys; print("%.4f" % json.loads(sys.stdin.read())["perplexity"])' \
      <<<"$out"
  else
    echo "error: $(tail -1 /tmp/gpu_perplexity.err)"
  fi
}

failed=0
declare -A cpu_scores  # flags -> the CPU's perplexity, so the fp8-cache row reuses the gguf one's
printf '%-14s %12s %12s %9s\n' path cpu cuda cuda/cpu
for entry in "${PATHS[@]}"; do
  IFS='|' read -r name flags cuda_flags <<<"$entry"
  # shellcheck disable=SC2086  # the flags are words
  [[ -v cpu_scores["x$flags"] ]] || cpu_scores["x$flags"]=$(score cpu $flags)
  cpu=${cpu_scores["x$flags"]}
  if ((CPU_ONLY)); then
    printf '%-14s %12s\n' "$name" "$cpu"
    [[ $cpu == error:* ]] && failed=1
    continue
  fi
  # shellcheck disable=SC2086
  gpu=$(score cuda $flags $cuda_flags)
  verdict=$(python3 - "$cpu" "$gpu" "$BOUND" <<'EOF'
import sys
try:
    cpu, gpu, bound = map(float, sys.argv[1:])
except ValueError:
    print("- FAIL")
    sys.exit()
ratio = gpu / cpu
print("%.4f %s" % (ratio, "PASS" if abs(ratio - 1) <= bound else "FAIL"))
EOF
)
  printf '%-14s %12s %12s %9s\n' "$name" "$cpu" "$gpu" "$verdict"
  [[ $verdict == *FAIL ]] && failed=1
done
exit $failed
