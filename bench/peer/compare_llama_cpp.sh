#!/usr/bin/env bash
# Side-by-side CPU benchmark: Pagoda vs llama.cpp on the same GGUF file, same machine, same run.
#
#   bench/peer/compare_llama_cpp.sh [--rounds R] [--threads "1 2"] [--doc FILE | --no-doc]
#                                   [--rebuild-pagoda] [--build-only]
#
# 1. Fetches llama.cpp's source as the PyPI sdist llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION
#    (its vendor/llama.cpp is a full llama.cpp tree; URL and sha256 come from the PyPI simple index,
#    an archive already in .cache/downloads is reused when its sha256 matches), extracts it to
#    .cache/peer/llama.cpp-<version>/ and builds llama-bench there (CMake Release, CPU only,
#    GGML_NATIVE=ON) unless the binary exists. Nothing of llama.cpp is ever written outside .cache/.
# 2. Builds build/pagoda with scripts/build.sh if it is missing (or with --rebuild-pagoda).
# 3. For each round and thread count, alternates llama.cpp and Pagoda (A B A B ...) on
#    (a) decode: llama-bench -p 0 -n 128 vs pagoda generate --max-tokens 128 --ignore-eos, and
#    (b) prefill of a 512-token prompt: llama-bench -p 512 -n 0 vs pagoda generate --max-tokens 1,
#    then prints medians and Pagoda/llama.cpp ratios and writes them into the generated section
#    of docs/perf/llama_cpp.md (between the compare_llama_cpp markers; the rest is left alone).
#
# The machine is shared: only same-run ratios mean anything, absolute tokens/s do not.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/bench/peer"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
MODEL="${MODEL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
JOBS="${JOBS:-2}"
ROUNDS=3
THREADS="1 2"
DOC="$ROOT/docs/perf/llama_cpp.md"
REBUILD_PAGODA=0
BUILD_ONLY=0
ARGS_FOR_DOC="$*"

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --doc) DOC="$2"; shift 2 ;;
    --no-doc) DOC=""; shift ;;
    --rebuild-pagoda) REBUILD_PAGODA=1; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    -h|--help) usage 0 ;;
    *) echo "compare_llama_cpp: unknown argument $1" >&2; usage 2 ;;
  esac
done
log() { echo "compare_llama_cpp: $*" >&2; }

# --- 1. llama.cpp from the llama-cpp-python sdist -------------------------------------------------
PEER_DIR="$ROOT/.cache/peer"
SRC="$PEER_DIR/llama.cpp-$VERSION"
LLAMA_BUILD="$SRC/build"
LLAMA_BENCH="$LLAMA_BUILD/bin/llama-bench"
# Recorded in the doc; the same flags are what a reader should use to reproduce.
LLAMA_CMAKE_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF
                   -DGGML_VULKAN=OFF -DGGML_BLAS=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF
                   -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF)

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
  nice -n 10 cmake --build "$LLAMA_BUILD" -j "$JOBS" --target llama-bench llama-completion
fi
LLAMA_COMMIT="$(cat "$SRC/.pagoda-llama-cpp-commit" 2>/dev/null || echo unknown)"

# --- 2. Pagoda -------------------------------------------------------------------------------------
PAGODA="$ROOT/build/pagoda"
if [ "$REBUILD_PAGODA" = 1 ] || [ ! -x "$PAGODA" ]; then
  log "building Pagoda with scripts/build.sh"
  JOBS="$JOBS" "$ROOT/scripts/build.sh" >/dev/null
fi
[ "$BUILD_ONLY" = 1 ] && { log "built: $LLAMA_BENCH, $PAGODA"; exit 0; }
[ -f "$MODEL" ] || { log "no model at $MODEL (run scripts/setup.sh)"; exit 1; }

# --- 3. Measurements ---------------------------------------------------------------------------------
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
RESULTS="$WORK/results.tsv"   # engine test threads round tokens_per_s [prompt_tokens]
: > "$RESULTS"

# A 512-token prompt for Pagoda: the first 512 tokens of a fixed repo text, decoded back to text.
# llama-bench's pp512 uses 512 random token ids; the token ids do not change the work.
PROMPT_TEXT="$(cat "$ROOT/README.md" "$ROOT"/docs/perf/cpu.md)"
"$PAGODA" tokenize "$MODEL" --no-special-tokens --text "$PROMPT_TEXT" |
  python3 -c 'import json,sys; ids=json.load(sys.stdin); assert len(ids)>=512, len(ids); print(json.dumps(ids[:512]))' \
  > "$WORK/ids512.json"
"$PAGODA" tokenize "$MODEL" --ids "$(cat "$WORK/ids512.json")" |
  python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin))' > "$WORK/prompt512.txt"

LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
llama_bench() {  # test threads round -- llama-bench args
  local test="$1" t="$2" r="$3"; shift 4
  nice -n 0 "$LLAMA_BENCH" -m "$MODEL" -t "$t" -r 1 -o json "$@" 2>"$WORK/llama.err" > "$WORK/llama.json" ||
    { cat "$WORK/llama.err" >&2; exit 1; }
  python3 - "$WORK/llama.json" "$test" "$t" "$r" >> "$RESULTS" <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))
row = rows[0]
print(f"llama.cpp\t{sys.argv[2]}\t{sys.argv[3]}\t{sys.argv[4]}\t{row['avg_ts']:.3f}\t{row['n_prompt']}")
with open(sys.argv[1] + ".meta", "w") as f:
    json.dump({k: row.get(k) for k in ("build_commit", "build_number", "cpu_info", "backends",
                                        "n_batch", "n_ubatch", "flash_attn", "type_k", "type_v",
                                        "model_type")}, f)
PY
  cp "$WORK/llama.json.meta" "$WORK/llama.meta.json"
}
pagoda_generate() {  # test threads round -- generate args
  local test="$1" t="$2" r="$3"; shift 4
  "$PAGODA" generate "$MODEL" --temperature 0 --threads "$t" "$@" \
    >/dev/null 2>"$WORK/pagoda.err" || { cat "$WORK/pagoda.err" >&2; exit 1; }
  python3 - "$WORK/pagoda.err" "$test" "$t" "$r" >> "$RESULTS" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
p = re.search(r"prompt tokens: (\d+), prefill: ([0-9.]+) tokens/s", text)
d = re.search(r"generated tokens: (\d+), decode: ([0-9.]+) tokens/s \((\d+) threads\)", text)
if not p or not d:
    sys.exit(f"cannot parse pagoda generate output:\n{text}")
tps = float(d.group(2)) if sys.argv[2] == "decode" else float(p.group(2))
print(f"pagoda\t{sys.argv[2]}\t{d.group(3)}\t{sys.argv[4]}\t{tps:.3f}\t{p.group(1)}")
PY
}

for r in $(seq 1 "$ROUNDS"); do
  for t in $THREADS; do
    log "round $r/$ROUNDS, $t thread(s): decode"
    llama_bench decode "$t" "$r" -- -p 0 -n 128
    pagoda_generate decode "$t" "$r" -- --prompt "The capital of France is" --max-tokens 128 --ignore-eos
    log "round $r/$ROUNDS, $t thread(s): prefill 512"
    llama_bench prefill "$t" "$r" -- -p 512 -n 0
    pagoda_generate prefill "$t" "$r" -- --prompt "$(cat "$WORK/prompt512.txt")" --max-tokens 1
  done
done
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"

# --- 4. Report -------------------------------------------------------------------------------------
PAGODA_REV="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || PAGODA_REV="$PAGODA_REV + uncommitted changes"
CPU_MODEL="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
export RESULTS DOC VERSION LLAMA_COMMIT LOAD_START LOAD_END PAGODA_REV CPU_MODEL ROUNDS
export NPROC="$(nproc)" DATE="$(date -u +'%Y-%m-%d %H:%M UTC')" META="$WORK/llama.meta.json"
export MODEL_REL="${MODEL#$ROOT/}" CMD="bench/peer/compare_llama_cpp.sh${ARGS_FOR_DOC:+ $ARGS_FOR_DOC}"
export FLAGS="${LLAMA_CMAKE_FLAGS[*]}"
python3 "$HERE/report.py"
