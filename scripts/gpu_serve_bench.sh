#!/usr/bin/env bash
# Serving figures on one GPU (issue 27): `pagoda serve` on an 8B model with dummy weights, timed
# from launch to ready with each start-up phase, then bench/serve/serve_bench.py at 1,000 in /
# 1,000 out, 256 concurrent, ignore_eos (output tok/s, TTFT, ITL, GPU busy/idle per step), once
# with --async-scheduling and once without; then n-gram speculation on a grounded workload with
# the real default model, at batch 1 and 64, each against plain decoding in the same call.
#
#   scripts/gpu_check.sh exec bash scripts/gpu_serve_bench.sh TOKENIZER [MODEL]
#
# TOKENIZER: a GGUF or HF tokenizer folder for the dummy model (--tokenizer); MODEL: a real model
# for the speculation runs (default: TOKENIZER, e.g. the default SmolLM2 GGUF). Needs `pagoda` on
# PATH and python3 (standard library only). Logs and JSON reports go to $OUT/serve_bench/ when $OUT
# is set, else a temporary folder; a short summary is printed last. Exits 1 when a serve run or a
# speculation run failed.
#
# Environment: CONFIG (configs/models/llama-3.1-8b.json), NUM_PROMPTS (512), CONCURRENCY (256),
# INPUT_LEN (1000), OUTPUT_LEN (1000), MAX_MODEL_LEN (4096), PORT (8123), READY_TIMEOUT (300 s),
# SPEC_PROMPTS (32), SERVE_ARGS (extra flags for every serve), TOKEN_ID_RANGE ("1000 40000": the
# random prompts' ids, inside the tokenizer's vocabulary), SKIP_SPEC (1: no speculation runs),
# SKIP_SERVE (1: only the speculation runs),
# SKIP_SYNC (1: only the --async-scheduling pass), QUANTIZATION (none; fp8 or int4: the dummy
# weights quantized at load into FP8 W8A8 / W4A16 layers), KV_CACHE_DTYPE (auto; fp8: e4m3
# cache), FP8 (1: QUANTIZATION=fp8 and KV_CACHE_DTYPE=fp8, issue 28's FP8 serving case, goal
# >= 16,000 output tok/s on one H100 at 1,000 in / 1,000 out, 256 concurrent):
#
#   FP8=1 SKIP_SPEC=1 scripts/gpu_check.sh exec bash scripts/gpu_serve_bench.sh TOKENIZER
set -uo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: scripts/gpu_serve_bench.sh TOKENIZER [MODEL]   (pagoda on PATH)" >&2
  exit 2
fi
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOKENIZER=$1
MODEL=${2:-$1}
CONFIG=${CONFIG:-$ROOT/configs/models/llama-3.1-8b.json}
NUM_PROMPTS=${NUM_PROMPTS:-512}
CONCURRENCY=${CONCURRENCY:-256}
INPUT_LEN=${INPUT_LEN:-1000}
OUTPUT_LEN=${OUTPUT_LEN:-1000}
MAX_MODEL_LEN=${MAX_MODEL_LEN:-4096}
PORT=${PORT:-8123}
READY_TIMEOUT=${READY_TIMEOUT:-300}
SPEC_PROMPTS=${SPEC_PROMPTS:-32}
SERVE_ARGS=${SERVE_ARGS:-}
TOKEN_ID_RANGE=${TOKEN_ID_RANGE:-1000 40000}
if [[ "${FP8:-0}" == 1 ]]; then
  QUANTIZATION=${QUANTIZATION:-fp8}
  KV_CACHE_DTYPE=${KV_CACHE_DTYPE:-fp8}
fi
QUANTIZATION=${QUANTIZATION:-none}
KV_CACHE_DTYPE=${KV_CACHE_DTYPE:-auto}
# The serve runs' names say what the weights and cache were: sync, fp8-w-fp8-kv.async, ...
PRECISION=""
[[ "$QUANTIZATION" == none ]] || PRECISION="$QUANTIZATION-w-"
[[ "$KV_CACHE_DTYPE" == auto ]] || PRECISION="${PRECISION}$KV_CACHE_DTYPE-kv-"
PRECISION=${PRECISION%-}
[[ -z "$PRECISION" ]] || PRECISION="$PRECISION."
if [[ -n "${OUT:-}" ]]; then LOGS="$OUT/serve_bench"; else LOGS=$(mktemp -d); fi
mkdir -p "$LOGS"
SUMMARY="$LOGS/summary.txt"
: >"$SUMMARY"
say() { echo "$*" | tee -a "$SUMMARY"; }

# serve_run NAME FLAGS...: start serve, wait for /health, run serve_bench, stop serve.
serve_run() {
  local name=$1
  shift
  local log="$LOGS/$name.serve.log"
  local start=$SECONDS
  local t0
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  pagoda serve "$CONFIG" --load-format dummy --tokenizer "$TOKENIZER" --device cuda \
    --max-num-seqs "$CONCURRENCY" --max-model-len "$MAX_MODEL_LEN" --port "$PORT" \
    --quantization "$QUANTIZATION" --kv-cache-dtype "$KV_CACHE_DTYPE" \
    --disable-log-requests $SERVE_ARGS "$@" >"$log" 2>&1 &
  local pid=$!
  local ready=0
  while ((SECONDS - start < READY_TIMEOUT)); do
    if curl -sf "http://127.0.0.1:$PORT/health" >/dev/null 2>&1 ||
      python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$PORT/health', timeout=1)" 2>/dev/null; then
      ready=1
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  local t1
  t1=$(date +%s.%N)
  if [[ $ready != 1 ]]; then
    say "$name: serve did not become ready (see $log)"
    tail -n 20 "$log"
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return 1
  fi
  say "$name: ready in $(python3 -c "print(f'{$t1 - $t0:.2f}')") s (launch to /health)"
  grep -iE '^startup|^weights|graphs|kv cache' "$log" | head -6 | sed "s/^/$name: /" |
    tee -a "$SUMMARY"
  # shellcheck disable=SC2086  # TOKEN_ID_RANGE is two words
  python3 "$ROOT/bench/serve/serve_bench.py" --base-url "http://127.0.0.1:$PORT" \
    --num-prompts "$NUM_PROMPTS" --concurrency "$CONCURRENCY" --input-len "$INPUT_LEN" \
    --output-len "$OUTPUT_LEN" --ignore-eos --warmup 4 --token-id-range $TOKEN_ID_RANGE \
    --result-json "$LOGS/$name.json" >"$LOGS/$name.bench.txt" 2>"$LOGS/$name.bench.err"
  local rc=$?
  cat "$LOGS/$name.bench.txt"
  python3 - "$LOGS/$name.json" "$name" <<'EOF' | tee -a "$SUMMARY"
import json, sys
r = json.load(open(sys.argv[1]))
d = r.get("device") or {}
print(f"{sys.argv[2]}: {r['completed']}/{r['num_prompts']} ok, output {r['output_throughput']:.0f} tok/s, "
      f"TTFT p50 {r['ttft_ms']['median']:.0f} ms p99 {r['ttft_ms']['p99']:.0f} ms, "
      f"ITL p50 {r['itl_ms']['median']:.2f} ms p99 {r['itl_ms']['p99']:.2f} ms, "
      f"GPU idle {d.get('idle_fraction', float('nan')) * 100:.2f}% "
      f"({d.get('idle_ms_per_step', float('nan')):.3f} ms of {d.get('busy_ms_per_step', float('nan')):.3f} ms busy per step, "
      f"{d.get('steps', 0)} steps)")
EOF
  curl -s "http://127.0.0.1:$PORT/metrics" >"$LOGS/$name.metrics.txt" 2>/dev/null
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  return $rc
}

say "== gpu_serve_bench $(date -u +%Y-%m-%dT%H:%M:%SZ): $(basename "$CONFIG") dummy, --quantization $QUANTIZATION, --kv-cache-dtype $KV_CACHE_DTYPE, $NUM_PROMPTS prompts x ($INPUT_LEN in + $OUTPUT_LEN out), concurrency $CONCURRENCY"
# The exit status: 1 when a serve run or a speculation run failed, so callers' rc says so.
failed=0
if [[ "${SKIP_SERVE:-0}" != 1 ]]; then
  [[ "${SKIP_SYNC:-0}" == 1 ]] || serve_run "${PRECISION}sync" || failed=1
  # (Not `pagoda serve --help | grep -q`: with pipefail, grep's early exit fails the pipeline.)
  serve_help=$(pagoda serve --help 2>&1)
  if [[ "$serve_help" == *--async-scheduling* ]]; then
    serve_run "${PRECISION}async" --async-scheduling || failed=1
  fi
fi

if [[ "${SKIP_SPEC:-0}" != 1 ]]; then
  NG='{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":2,"prompt_lookup_max":4}'
  for seqs in 1 64; do
    log="$LOGS/spec_ngram_b$seqs.txt"
    timeout 300 pagoda bench offline "$MODEL" --device cuda --workload grounded \
      --num-prompts "$SPEC_PROMPTS" --output-len 160 --max-num-seqs "$seqs" \
      --speculative-config "$NG" >"$log" 2>&1
    rc=$?
    ((rc == 0)) || failed=1
    say "spec ngram max-num-seqs $seqs (rc $rc): $(grep -iE 'speculat.*x|accept' "$log" | tail -n 3 | tr '\n' ' ')"
  done
fi
echo "-- summary"
cat "$SUMMARY"
# The device tool brings back 8 files: the logs travel as one archive beside the summary.
if [[ -n "${OUT:-}" ]]; then
  cp "$SUMMARY" "$OUT/serve_bench_summary.txt"
  tar -C "$OUT" -czf "$OUT/serve_bench.tgz" serve_bench && rm -rf "$LOGS"
fi
exit "$failed"
