#!/usr/bin/env bash
# The 1B-scale CPU benchmark against llama.cpp (issue 24, point 5), rerunnable in one command.
#
#   bench/peer/compare_1b.sh [--rounds R] [--threads "1 2"] [--quants "Q4_K_M Q4_0 Q8_0"]
#                            [--no-smollm] [--no-table] [--no-serving] [--concurrency "1 4 16"]
#                            [--serving-rounds R] [--pagoda-isa avx2|avx512]
#                            [--llama-isa native|native-noamx|avx2]
#                            [--doc FILE | --no-doc] [--build-only]
#
# 1. Tools: llama-bench, llama-quantize and llama-server in the llama.cpp tree that
#    compare_llama_cpp.sh fetches and builds under .cache/peer/ (same sdist, same CMake flags;
#    --llama-isa avx2: llama-bench from a second, AVX2-only build; native-noamx: -march=native
#    less AMX, for machines where llama.cpp's AMX kernels crash); Pagoda from
#    $PAGODA_BUILD_DIR (default build/, as compare_llama_cpp.sh) and pagoda_read_bandwidth
#    (bench/cpu/read_bandwidth.cc) from the same build dir. Built only when missing.
# 2. Models, under models/bench/ (git-ignored): llama-1b-shape.F16.gguf from make_1b_ggufs.py
#    (Llama-3.2-1B shape, random weights, SmolLM2's tokenizer), then llama-1b-shape.<Q>.gguf for
#    each --quants type from `llama-quantize F16 OUT Q`. Each file is reused while its
#    .params.json / .quantize.json records the same inputs and the file's sha256.
# 3. Same-run memory read bandwidth (1 and 2 threads, the better of 1 and 16 streams a thread)
#    before and after the table.
# 4. The table: compare_llama_cpp.sh on the 1B files (+ the SmolLM2 Q4_1 file unless
#    --no-smollm), alternating rounds, decode tg128 and prefill pp512 at --threads; written into
#    --doc (default docs/perf/llama_cpp.md) as the section compare_1b_<isa>, with decode as a
#    fraction of the read bandwidth (weight bytes per token from the GGUF).
# 5. Serving: compare_serving.sh on the 1B Q4_K_M file, --concurrency (default "1 4 16"), 128-token
#    prompts, 64 output tokens, 2 threads; section compare_1b_serving_<isa> of the same doc.
#
# <isa> is what Pagoda ran with: the detected level (avx512 / avx2) or the --pagoda-isa cap, and
# -llama_avx2 when llama.cpp was the AVX2-only build. AVX2 and AVX-512 results land in separate
# sections: never read one from the other. PAGODA_REV names the Pagoda commit when the binary was
# built before HEAD moved (default: HEAD, marked when the tree has uncommitted changes).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/bench/peer"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
JOBS="${JOBS:-2}"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
ROUNDS=3
THREADS="1 2"
QUANTS="Q4_K_M Q4_0 Q8_0"
SMOLLM=1
TABLE=1
SERVING=1
CONCURRENCY="1 4 16"
SERVING_ROUNDS=3
LLAMA_ISA=native
DOC="$ROOT/docs/perf/llama_cpp.md"
BUILD_ONLY=0
ARGS_FOR_DOC="$*"

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --quants) QUANTS="$2"; shift 2 ;;
    --no-smollm) SMOLLM=0; shift ;;
    --no-table) TABLE=0; shift ;;
    --no-serving) SERVING=0; shift ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --serving-rounds) SERVING_ROUNDS="$2"; shift 2 ;;
    --pagoda-isa) export PAGODA_CPU_ISA="$2"; shift 2 ;;
    --llama-isa) LLAMA_ISA="$2"; shift 2 ;;
    --doc) DOC="$2"; shift 2 ;;
    --no-doc) DOC=""; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "compare_1b: unknown argument $1" >&2; usage 2 ;;
  esac
done
log() { echo "compare_1b: $*" >&2; }
need() { command -v "$1" >/dev/null || { log "$1 is missing ($2)"; exit 1; }; }
need cmake "needed to build llama.cpp and the bandwidth probe"
need ninja "needed to build llama.cpp"
need sha256sum "coreutils"
[ -x "$PYTHON" ] || { log "no Python at $PYTHON (create .venv: scripts/setup.sh; or set PYTHON)"; exit 1; }
"$PYTHON" -c 'import gguf, numpy' 2>/dev/null ||
  { log "$PYTHON lacks the gguf/numpy packages (pip install -r requirements.txt)"; exit 1; }
case "$LLAMA_ISA" in native|native-noamx|avx2) ;; *) log "--llama-isa must be native, native-noamx or avx2"; exit 2 ;; esac
# llama-server for the serving run: the same tree as llama-bench (the AVX2 tree has no server).
SERVER_ISA="$LLAMA_ISA"; [ "$LLAMA_ISA" = avx2 ] && SERVER_ISA=native

# --- 1. Tools --------------------------------------------------------------------------------------
SRC="$ROOT/.cache/peer/llama.cpp-$VERSION"
BUILD_DIR="${PAGODA_BUILD_DIR:-$ROOT/build}"
BUILD_DIR="$(cd "$BUILD_DIR" 2>/dev/null && pwd)" ||
  { log "no Pagoda build dir ${PAGODA_BUILD_DIR:-build} (scripts/build.sh)"; exit 1; }
export PAGODA_BUILD_DIR="$BUILD_DIR"
PAGODA="$BUILD_DIR/pagoda"
[ -x "$PAGODA" ] || { log "no Pagoda binary at $PAGODA (cmake --build ${BUILD_DIR#$ROOT/} --target pagoda)"; exit 1; }
BANDWIDTH="$BUILD_DIR/bench/cpu/pagoda_read_bandwidth"
if [ ! -x "$BANDWIDTH" ]; then
  log "building pagoda_read_bandwidth in ${BUILD_DIR#$ROOT/} (one small file; Pagoda is not rebuilt)"
  nice -n 10 cmake --build "$BUILD_DIR" -j "$JOBS" --target pagoda_read_bandwidth >/dev/null
fi
# llama-bench (+ the tree) through compare_llama_cpp.sh; quantize and server in the native tree.
"$HERE/compare_llama_cpp.sh" --build-only --llama-isa "$LLAMA_ISA" --pagoda-bin "$PAGODA"
"$HERE/compare_llama_cpp.sh" --build-only --llama-isa native --pagoda-bin "$PAGODA"
QUANTIZE="$SRC/build/bin/llama-quantize"
if [ ! -x "$QUANTIZE" ]; then
  log "building llama-quantize (-j$JOBS)"
  nice -n 10 cmake --build "$SRC/build" -j "$JOBS" --target llama-quantize >/dev/null
fi
if [ "$SERVING" = 1 ]; then
  "$HERE/compare_serving.sh" --build-only --pagoda-bin "$PAGODA" --llama-isa "$SERVER_ISA"
fi
LLAMA_COMMIT="$(cat "$SRC/.pagoda-llama-cpp-commit" 2>/dev/null || echo unknown)"

# --- 2. Models -------------------------------------------------------------------------------------
TOKENIZER="$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$TOKENIZER" ] || { log "no $TOKENIZER (scripts/setup.sh fetches it)"; exit 1; }
OUT="$ROOT/models/bench"
F16="$OUT/llama-1b-shape.F16.gguf"
nice -n 10 "$PYTHON" "$HERE/make_1b_ggufs.py" "$F16" --tokenizer-from "$TOKENIZER"
F16_SHA="$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["sha256"])' "$F16.params.json")"
MODELS=()
for q in $QUANTS; do
  dst="$OUT/llama-1b-shape.$q.gguf"
  want="{\"source_sha256\": \"$F16_SHA\", \"type\": \"$q\", \"llama_cpp\": \"$LLAMA_COMMIT\"}"
  have=""
  if [ -f "$dst" ] && [ -f "$dst.quantize.json" ]; then
    have="$("$PYTHON" - "$dst" <<'PY'
import json, sys
meta = json.load(open(sys.argv[1] + ".quantize.json"))
sha = meta.pop("sha256", None)
print(json.dumps(meta) + "\t" + str(sha))
PY
)"
  fi
  if [ -n "$have" ] && [ "${have%%$'\t'*}" = "$want" ] &&
     [ "${have#*$'\t'}" = "$(sha256sum "$dst" | cut -d' ' -f1)" ]; then
    log "reusing ${dst#$ROOT/} (source, type, llama.cpp commit and sha256 match)"
  else
    log "llama-quantize ${F16#$ROOT/} -> ${dst#$ROOT/} ($q)"
    nice -n 10 "$QUANTIZE" "$F16" "$dst.part" "$q" "$(nproc)" >"$OUT/quantize-$q.log" 2>&1 ||
      { tail -n 20 "$OUT/quantize-$q.log" >&2; log "llama-quantize failed"; exit 1; }
    mv "$dst.part" "$dst"
    "$PYTHON" - "$dst" "$want" "$(sha256sum "$dst" | cut -d' ' -f1)" <<'PY'
import json, sys
meta = json.loads(sys.argv[2])
meta["sha256"] = sys.argv[3]
json.dump(meta, open(sys.argv[1] + ".quantize.json", "w"))
PY
  fi
  MODELS+=("$dst")
done
[ "$BUILD_ONLY" = 1 ] && { log "built and made: $PAGODA, $BANDWIDTH, ${MODELS[*]#$ROOT/}"; exit 0; }

# --- 3.-5. Bandwidth, the table, serving -------------------------------------------------------------
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
ISA_LABEL="$(PAGODA_CPU_ISA="${PAGODA_CPU_ISA:-}" "$PYTHON" "$HERE/machine.py" |
  "$PYTHON" -c 'import json,sys; k=json.load(sys.stdin)["pagoda_kernels"]; print("avx512" if k.startswith("AVX-512") else "avx2" if k=="AVX2" else "baseline")')"
[ "$LLAMA_ISA" = avx2 ] && ISA_LABEL="$ISA_LABEL-llama_avx2"
[ "$LLAMA_ISA" = native-noamx ] && ISA_LABEL="$ISA_LABEL-llama_noamx"
[ -n "${PAGODA_CPU_ISA:-}" ] && ISA_LABEL="$ISA_LABEL-cap_$PAGODA_CPU_ISA"
if [ -z "${PAGODA_REV:-}" ]; then
  PAGODA_REV="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || PAGODA_REV="$PAGODA_REV + uncommitted changes"
fi
export PAGODA_REV PYTHON
export PEER_CMD="bench/peer/compare_1b.sh${ARGS_FOR_DOC:+ $ARGS_FOR_DOC}"
bandwidth() {  # when -> JSON object
  "$BANDWIDTH" --threads "1 2" --runs 5 | "$PYTHON" -c '
import json, re, sys
by = {}  # threads -> the stream count that read the most
for line in sys.stdin:
    m = re.match(r"read_bandwidth threads=(\d+) streams=(\d+) bytes=(\d+) best_gbps=([0-9.]+) "
                 r"median_gbps=([0-9.]+)", line)
    if m:
        entry = {"streams": int(m.group(2)), "best_gbps": float(m.group(4)),
                 "median_gbps": float(m.group(5))}
        if m.group(1) not in by or entry["best_gbps"] > by[m.group(1)]["best_gbps"]:
            by[m.group(1)] = entry
print(json.dumps({"when": sys.argv[1], "by_threads": by}))' "$1"
}

DOC_ARGS=(--no-doc)
[ -n "$DOC" ] && DOC_ARGS=(--doc "$DOC")
if [ "$TABLE" = 1 ]; then
  log "read bandwidth before the table"
  bandwidth before > "$WORK/bw-before.json"
  cat "$WORK/bw-before.json" >&2
  TABLE_MODELS=("${MODELS[@]}")
  [ "$SMOLLM" = 1 ] && TABLE_MODELS+=("$TOKENIZER")
  MODEL_ARGS=()
  for m in "${TABLE_MODELS[@]}"; do MODEL_ARGS+=(--model "$m"); done
  # Runs the table; the report step reads $WORK/extra.json, written below before it is needed.
  "$PYTHON" - "$WORK/extra.json" "$ROOT" "$HERE/make_1b_ggufs.py" "$WORK/bw-before.json" \
    "${TABLE_MODELS[@]}" <<'PY'
import json, os, subprocess, sys
out, root, maker, bw = sys.argv[1:5]
models = sys.argv[5:]
extra = {"bandwidth": {"binary": "pagoda_read_bandwidth", "runs": [json.load(open(bw))]},
         "weight_bytes": {}, "labels": {}}
for m in models:
    rel = os.path.relpath(m, root)
    extra["weight_bytes"][rel] = json.loads(subprocess.check_output(
        [sys.executable, maker, "--weight-bytes", m]))
    name = os.path.basename(m)
    extra["labels"][rel] = ("1B " + name.split(".")[1]) if name.startswith("llama-1b-shape.") \
        else "SmolLM2-135M " + name.split(".")[-2]
json.dump(extra, open(out, "w"))
PY
  # The table itself, with the report deferred so the bandwidth after it can be added.
  "$HERE/compare_llama_cpp.sh" --rounds "$ROUNDS" --threads "$THREADS" --pagoda-bin "$PAGODA" \
    --llama-isa "$LLAMA_ISA" "${MODEL_ARGS[@]}" --no-doc --section "compare_1b_$ISA_LABEL" \
    --extra-json "$WORK/extra.json"
  log "read bandwidth after the table"
  bandwidth after > "$WORK/bw-after.json"
  cat "$WORK/bw-after.json" >&2
  "$PYTHON" - "$WORK/extra.json" "$WORK/bw-after.json" <<'PY'
import json, sys
extra = json.load(open(sys.argv[1]))
extra["bandwidth"]["runs"].append(json.load(open(sys.argv[2])))
json.dump(extra, open(sys.argv[1], "w"))
PY
  cp "$WORK/extra.json" "$ROOT/.cache/peer/results-compare_1b_$ISA_LABEL/extra.json"
  if [ -n "$DOC" ]; then
    python3 "$HERE/report.py" --from "$ROOT/.cache/peer/results-compare_1b_$ISA_LABEL" \
      --doc "$DOC" --extra-json "$ROOT/.cache/peer/results-compare_1b_$ISA_LABEL/extra.json" \
      --title "1B-shaped models: Pagoda vs llama.cpp ($ISA_LABEL)"
  fi
fi
if [ "$SERVING" = 1 ]; then
  q4km="$OUT/llama-1b-shape.Q4_K_M.gguf"
  [ -f "$q4km" ] || { log "serving needs Q4_K_M in --quants"; exit 1; }
  "$HERE/compare_serving.sh" --model "$q4km" --concurrency "$CONCURRENCY" \
    --rounds "$SERVING_ROUNDS" --threads 2 --input-len 128 --output-len 64 --pagoda-bin "$PAGODA" \
    --llama-isa "$SERVER_ISA" \
    "${DOC_ARGS[@]}" --section "compare_1b_serving_$ISA_LABEL" \
    --title "1B-shaped models: serving, \`pagoda serve\` vs \`llama-server\` ($ISA_LABEL)"
fi
