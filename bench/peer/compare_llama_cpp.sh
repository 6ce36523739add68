#!/usr/bin/env bash
# Side-by-side CPU benchmark: Pagoda vs llama.cpp on the same GGUF file, same machine, same run.
#
#   bench/peer/compare_llama_cpp.sh [--rounds R] [--threads "1 2"] [--doc FILE | --no-doc]
#                                   [--rebuild-pagoda] [--build-only] [--model GGUF]...
#                                   [--pagoda-bin PATH] [--pagoda-isa avx2|avx512|baseline]
#                                   [--llama-isa native|native-noamx|avx2]
#                                   [--section NAME --title TEXT]
#                                   [--extra-json FILE]
#
# 1. Fetches llama.cpp's source as the PyPI sdist llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION
#    (its vendor/llama.cpp is a full llama.cpp tree; URL and sha256 come from the PyPI simple index,
#    an archive already in .cache/downloads is reused when its sha256 matches), extracts it to
#    .cache/peer/llama.cpp-<version>/ and builds llama-bench there (CMake Release, CPU only,
#    GGML_NATIVE=ON) unless the binary exists. Nothing of llama.cpp is ever written outside .cache/.
#    --llama-isa avx2 builds a second tree in build-avx2/ (GGML_NATIVE=OFF, AVX2+FMA+F16C, no
#    AVX-512/AMX): the fair peer for Pagoda under PAGODA_CPU_ISA=avx2 on an AVX-512 machine;
#    --llama-isa native-noamx builds build-noamx/ (-march=native -mno-amx-*), for machines whose
#    AMX tiles llama.cpp cannot use (see docs/perf/llama_cpp.md).
# 2. Pagoda: --pagoda-bin, else $PAGODA_BUILD_DIR/pagoda (default build/pagoda, which is built with
#    scripts/build.sh when missing or with --rebuild-pagoda). --pagoda-isa X runs Pagoda under
#    PAGODA_CPU_ISA=X; a PAGODA_CPU_ISA already in the environment is honoured and recorded.
# 3. For each round, model (--model, repeatable; default $MODEL or the SmolLM2 Q4_1 file) and
#    thread count, alternates llama.cpp and Pagoda (A B A B ...) on
#    (a) decode: llama-bench -p 0 -n 128 vs pagoda generate --max-tokens 128 --ignore-eos, and
#    (b) prefill of a 512-token prompt: llama-bench -p 512 -n 0 vs pagoda generate --max-tokens 1,
#    then prints medians and Pagoda/llama.cpp ratios and writes them into the generated section
#    of docs/perf/llama_cpp.md (between the compare_llama_cpp markers, or --section NAME's; a
#    missing section is appended under "## TEXT" from --title; the rest is left alone).
#    --extra-json adds compare_1b.sh's read bandwidth and weight bytes per token to the report.
#    The raw per-round figures stay in .cache/peer/results-<section>/.
#
# The machine is shared: only same-run ratios mean anything, absolute tokens/s do not.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/bench/peer"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
MODELS=()
JOBS="${JOBS:-2}"
ROUNDS=3
THREADS="1 2"
DOC="$ROOT/docs/perf/llama_cpp.md"
REBUILD_PAGODA=0
BUILD_ONLY=0
PAGODA=""
LLAMA_ISA=native
SECTION=compare_llama_cpp
TITLE=""
EXTRA_JSON=""
ARGS_FOR_DOC="$*"

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --doc) DOC="$2"; shift 2 ;;
    --no-doc) DOC=""; shift ;;
    --rebuild-pagoda) REBUILD_PAGODA=1; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    --model) MODELS+=("$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
    --pagoda-bin) PAGODA="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
    --pagoda-isa) export PAGODA_CPU_ISA="$2"; shift 2 ;;
    --llama-isa) LLAMA_ISA="$2"; shift 2 ;;
    --section) SECTION="$2"; shift 2 ;;
    --title) TITLE="$2"; shift 2 ;;
    --extra-json) EXTRA_JSON="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "compare_llama_cpp: unknown argument $1" >&2; usage 2 ;;
  esac
done
log() { echo "compare_llama_cpp: $*" >&2; }
[ ${#MODELS[@]} -gt 0 ] || MODELS=("${MODEL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}")
command -v cmake >/dev/null || { log "cmake is missing (needed to build llama.cpp)"; exit 1; }
command -v ninja >/dev/null || { log "ninja is missing (needed to build llama.cpp)"; exit 1; }

# --- 1. llama.cpp from the llama-cpp-python sdist -------------------------------------------------
PEER_DIR="$ROOT/.cache/peer"
SRC="$PEER_DIR/llama.cpp-$VERSION"
# Recorded in the doc; the same flags are what a reader should use to reproduce.
LLAMA_CMAKE_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=OFF -DGGML_METAL=OFF
                   -DGGML_VULKAN=OFF -DGGML_BLAS=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF
                   -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF)
case "$LLAMA_ISA" in
  native) LLAMA_BUILD="$SRC/build"; LLAMA_CMAKE_FLAGS+=(-DGGML_NATIVE=ON) ;;
  # -march=native less AMX: where the AMX kernels cannot run (on the 2026-11 benchmark VM
  # llama-bench segfaults in ggml_backend_amx_mul_mat for any prompt of 128+ tokens).
  native-noamx) LLAMA_BUILD="$SRC/build-noamx"
                LLAMA_CMAKE_FLAGS+=(-DGGML_NATIVE=ON
                                    "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
                                    "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16") ;;
  avx2) LLAMA_BUILD="$SRC/build-avx2"
        LLAMA_CMAKE_FLAGS+=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON
                            -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF
                            -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AVX_VNNI=OFF
                            -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF) ;;
  *) log "--llama-isa must be native, native-noamx or avx2"; exit 2 ;;
esac
LLAMA_BENCH="$LLAMA_BUILD/bin/llama-bench"

if [ ! -x "$LLAMA_BENCH" ]; then
  ARCHIVE="$(python3 "$HERE/fetch_llama_cpp.py" "$VERSION" "$ROOT/.cache/downloads")"
  if [ ! -f "$SRC/CMakeLists.txt" ]; then
    log "extracting vendor/llama.cpp from $(basename "$ARCHIVE") into ${SRC#$ROOT/}"
    rm -rf "$SRC.part" && mkdir -p "$SRC.part"
    tar -xzf "$ARCHIVE" -C "$SRC.part" --strip-components=3 "llama_cpp_python-$VERSION/vendor/llama.cpp"
    # The commit the sdist pinned (its submodule HEAD); the tree itself has no usable git data.
    tar -xzOf "$ARCHIVE" "llama_cpp_python-$VERSION/.git/modules/vendor/llama.cpp/HEAD" \
      > "$SRC.part/.pagoda-llama-cpp-commit" 2>/dev/null || echo unknown > "$SRC.part/.pagoda-llama-cpp-commit"
    rm -rf "$SRC" && mv "$SRC.part" "$SRC"
  fi
  log "building llama-bench (CPU only, -j$JOBS; several minutes on 2 cores)"
  nice -n 10 cmake -S "$SRC" -B "$LLAMA_BUILD" -G Ninja "${LLAMA_CMAKE_FLAGS[@]}" >/dev/null
  targets=(llama-bench)
  [ "$LLAMA_ISA" = native ] && targets+=(llama-completion)
  nice -n 10 cmake --build "$LLAMA_BUILD" -j "$JOBS" --target "${targets[@]}"
fi
LLAMA_COMMIT="$(cat "$SRC/.pagoda-llama-cpp-commit" 2>/dev/null || echo unknown)"

# --- 2. Pagoda -------------------------------------------------------------------------------------
if [ -z "$PAGODA" ] && [ -n "${PAGODA_BUILD_DIR:-}" ]; then
  PAGODA="$(cd "$PAGODA_BUILD_DIR" && pwd)/pagoda"
fi
if [ -z "$PAGODA" ]; then
  PAGODA="$ROOT/build/pagoda"
  if [ "$REBUILD_PAGODA" = 1 ] || [ ! -x "$PAGODA" ]; then
    log "building Pagoda with scripts/build.sh"
    JOBS="$JOBS" "$ROOT/scripts/build.sh" >/dev/null
  fi
fi
[ -x "$PAGODA" ] || { log "no Pagoda binary at $PAGODA (build it, or --pagoda-bin)"; exit 1; }
[ "$BUILD_ONLY" = 1 ] && { log "built: $LLAMA_BENCH, $PAGODA"; exit 0; }
for MODEL in "${MODELS[@]}"; do
  [ -f "$MODEL" ] || { log "no model at $MODEL (run scripts/setup.sh)"; exit 1; }
done

# --- 3. Measurements ---------------------------------------------------------------------------------
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
RESULTS="$WORK/results.tsv"   # engine test threads round tokens_per_s prompt_tokens model
: > "$RESULTS"
rel() { echo "${1#$ROOT/}"; }

# A 512-token prompt for Pagoda, per model: the first 512 tokens of a fixed repo text, decoded
# back to text. llama-bench's pp512 uses 512 random token ids; the token ids do not change the work.
# The text's first 32 Ki characters (README.md alone holds more than 512 tokens): one argument of `pagoda
# tokenize`, which the kernel caps at 128 KiB.
PROMPT_TEXT="$(cat "$ROOT/README.md" "$ROOT"/docs/perf/cpu.md)"
PROMPT_TEXT="${PROMPT_TEXT:0:32768}"
for i in "${!MODELS[@]}"; do
  "$PAGODA" tokenize "${MODELS[$i]}" --no-special-tokens --text "$PROMPT_TEXT" |
    python3 -c 'import json,sys; ids=json.load(sys.stdin); assert len(ids)>=512, len(ids); print(json.dumps(ids[:512]))' \
    > "$WORK/ids512-$i.json"
  "$PAGODA" tokenize "${MODELS[$i]}" --ids "$(cat "$WORK/ids512-$i.json")" |
    python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin))' > "$WORK/prompt512-$i.txt"
done

LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
llama_bench() {  # model test threads round -- llama-bench args
  local model="$1" test="$2" t="$3" r="$4"; shift 5
  nice -n 0 "$LLAMA_BENCH" -m "$model" -t "$t" -r 1 -o json "$@" 2>"$WORK/llama.err" > "$WORK/llama.json" ||
    { cat "$WORK/llama.err" >&2; exit 1; }
  python3 - "$WORK/llama.json" "$test" "$t" "$r" "$(rel "$model")" "$WORK/llama.meta.json" >> "$RESULTS" <<'PY'
import json, os, sys
rows = json.load(open(sys.argv[1]))
row = rows[0]
print(f"llama.cpp\t{sys.argv[2]}\t{sys.argv[3]}\t{sys.argv[4]}\t{row['avg_ts']:.3f}\t{row['n_prompt']}\t{sys.argv[5]}")
meta = json.load(open(sys.argv[6])) if os.path.exists(sys.argv[6]) else {}
meta[sys.argv[5]] = {k: row.get(k) for k in ("build_commit", "build_number", "cpu_info", "backends",
                                               "n_batch", "n_ubatch", "flash_attn", "type_k",
                                               "type_v", "model_type", "model_size")}
json.dump(meta, open(sys.argv[6], "w"))
PY
}
pagoda_generate() {  # model test threads round -- generate args
  local model="$1" test="$2" t="$3" r="$4"; shift 5
  "$PAGODA" generate "$model" --temperature 0 --threads "$t" "$@" \
    >/dev/null 2>"$WORK/pagoda.err" || { cat "$WORK/pagoda.err" >&2; exit 1; }
  python3 - "$WORK/pagoda.err" "$test" "$t" "$r" "$(rel "$model")" >> "$RESULTS" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
p = re.search(r"prompt tokens: (\d+), prefill: ([0-9.]+) tokens/s", text)
d = re.search(r"generated tokens: (\d+), decode: ([0-9.]+) tokens/s \((\d+) threads\)", text)
if not p or not d:
    sys.exit(f"cannot parse pagoda generate output:\n{text}")
tps = float(d.group(2)) if sys.argv[2] == "decode" else float(p.group(2))
print(f"pagoda\t{sys.argv[2]}\t{d.group(3)}\t{sys.argv[4]}\t{tps:.3f}\t{p.group(1)}\t{sys.argv[5]}")
PY
}

for r in $(seq 1 "$ROUNDS"); do
  for i in "${!MODELS[@]}"; do
    model="${MODELS[$i]}"
    for t in $THREADS; do
      log "round $r/$ROUNDS, $(basename "$model"), $t thread(s): decode"
      llama_bench "$model" decode "$t" "$r" -- -p 0 -n 128
      pagoda_generate "$model" decode "$t" "$r" -- --prompt "The capital of France is" \
        --max-tokens 128 --ignore-eos
      log "round $r/$ROUNDS, $(basename "$model"), $t thread(s): prefill 512"
      llama_bench "$model" prefill "$t" "$r" -- -p 512 -n 0
      pagoda_generate "$model" prefill "$t" "$r" -- --prompt "$(cat "$WORK/prompt512-$i.txt")" \
        --max-tokens 1
    done
  done
done
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"
KEEP="$ROOT/.cache/peer/results-$SECTION"
rm -rf "$KEEP" && mkdir -p "$KEEP" && cp "$RESULTS" "$WORK/llama.meta.json" "$KEEP"/

# --- 4. Report -------------------------------------------------------------------------------------
# PAGODA_REV may be given when the binary was built before HEAD moved (compare_1b.sh does).
if [ -z "${PAGODA_REV:-}" ]; then
  PAGODA_REV="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || PAGODA_REV="$PAGODA_REV + uncommitted changes"
fi
export RESULTS DOC VERSION LLAMA_COMMIT LOAD_START LOAD_END PAGODA_REV ROUNDS SECTION TITLE
DATE=$(date -u +'%Y-%m-%d %H:%M UTC') MACHINE_JSON=$(python3 "$HERE/machine.py")
PAGODA_REL=$(rel "$PAGODA") LLAMA_BENCH_REL=$(rel "$LLAMA_BENCH")
export DATE META="$WORK/llama.meta.json" EXTRA_JSON MACHINE_JSON PAGODA_REL LLAMA_ISA
# PEER_CMD: the command a driver (compare_1b.sh) wants the doc to show instead of this one.
export CMD="${PEER_CMD:-bench/peer/compare_llama_cpp.sh${ARGS_FOR_DOC:+ $ARGS_FOR_DOC}}"
export FLAGS="${LLAMA_CMAKE_FLAGS[*]}" LLAMA_BENCH_REL
RESULTS="$KEEP/results.tsv" META="$KEEP/llama.meta.json"
# Everything the report reads, kept so `report.py --from DIR` can rewrite the section later.
python3 -c 'import json, os, sys; json.dump({k: os.environ.get(k) for k in sys.argv[2:]}, open(sys.argv[1], "w"), indent=1)' \
  "$KEEP/report_env.json" RESULTS DOC VERSION LLAMA_COMMIT LOAD_START LOAD_END PAGODA_REV ROUNDS \
  SECTION TITLE DATE META EXTRA_JSON MACHINE_JSON PAGODA_REL LLAMA_ISA CMD PEER_CMD FLAGS \
  LLAMA_BENCH_REL
python3 "$HERE/report.py"
