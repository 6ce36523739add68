#!/usr/bin/env bash
# Serving side-by-side on the CPU: `pagoda serve` vs llama.cpp's `llama-server`, same GGUF, same
# machine, same load generator (bench/serve/serve_bench.py), same run.
#
#   bench/peer/compare_serving.sh [--concurrency "1 4 16 32"] [--rounds R] [--threads T]
#                                 [--input-len N] [--output-len N] [--prompts-per-slot K]
#                                 [--pagoda-bin PATH] [--doc FILE | --no-doc] [--build-only]
#                                 [--model GGUF] [--pagoda-isa X] [--section NAME --title TEXT]
#                                 [--llama-isa native|native-noamx] [--pagoda-arg ARG ...]
#
# 1. Builds llama-server in the llama.cpp tree that compare_llama_cpp.sh extracts into
#    .cache/peer/llama.cpp-<version>/ (running `compare_llama_cpp.sh --build-only` first when the
#    tree is missing): the same CMake flags with LLAMA_BUILD_SERVER=ON, target llama-server
#    (--llama-isa native-noamx: in build-noamx/, as compare_llama_cpp.sh).
# 2. For each round and concurrency C, alternates the two servers (llama.cpp then Pagoda), each
#    started fresh on a free port with C parallel slots and the same per-sequence length:
#      llama-server -m MODEL -np C -c C*L -t T -tb T --cache-ram 0
#      pagoda serve MODEL --max-num-seqs C --max-model-len L --threads T --disable-log-requests
#    where L = input + output + 16. Each gets 2 unmeasured warm-up requests, then max(8, K*C)
#    requests of --input-len random token ids and --output-len tokens (ignore_eos, greedy,
#    streamed) at concurrency C.
# 3. Prints medians over rounds and Pagoda / llama.cpp ratios (report_serving.py) and rewrites the
#    generated section of docs/perf/cpu.md between the compare_serving markers (or --section
#    NAME's in --doc FILE; a missing section is appended under "## TEXT" from --title).
# --model picks the GGUF (default $MODEL or the SmolLM2 Q4_1 file); --pagoda-isa X runs Pagoda
# under PAGODA_CPU_ISA=X (a PAGODA_CPU_ISA already set is honoured too; both are recorded);
# --pagoda-arg ARG (repeatable) appends ARG to `pagoda serve`'s command line (e.g.
# --pagoda-arg=--step-time-target-ms --pagoda-arg=0).
#
# The machine is shared: only same-run ratios mean anything, absolute tokens/s do not.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/bench/peer"
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
MODEL="${MODEL:-$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf}"
JOBS="${JOBS:-2}"
PYTHON="${PYTHON:-python3}"
CONCURRENCY="1 4 16 32"
ROUNDS=3
THREADS=2
INPUT_LEN=128
OUTPUT_LEN=64
PER_SLOT=2
PAGODA="$ROOT/build/pagoda"
DOC="$ROOT/docs/perf/cpu.md"
BUILD_ONLY=0
SECTION=compare_serving
LLAMA_ISA=native
TITLE="Serving: \`pagoda serve\` vs \`llama-server\`"
ARGS_FOR_DOC="$*"
PAGODA_ARGS=()

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --input-len) INPUT_LEN="$2"; shift 2 ;;
    --output-len) OUTPUT_LEN="$2"; shift 2 ;;
    --prompts-per-slot) PER_SLOT="$2"; shift 2 ;;
    --pagoda-bin) PAGODA="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
    --doc) DOC="$2"; shift 2 ;;
    --no-doc) DOC=""; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    --model) MODEL="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift 2 ;;
    --pagoda-isa) export PAGODA_CPU_ISA="$2"; shift 2 ;;
    --pagoda-arg) PAGODA_ARGS+=("$2"); shift 2 ;;
    --pagoda-arg=*) PAGODA_ARGS+=("${1#--pagoda-arg=}"); shift ;;
    --llama-isa) LLAMA_ISA="$2"; shift 2 ;;
    --section) SECTION="$2"; shift 2 ;;
    --title) TITLE="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "compare_serving: unknown argument $1" >&2; usage 2 ;;
  esac
done
log() { echo "compare_serving: $*" >&2; }
command -v cmake >/dev/null || { log "cmake is missing (needed to build llama-server)"; exit 1; }

# --- 1. llama-server -------------------------------------------------------------------------------
SRC="$ROOT/.cache/peer/llama.cpp-$VERSION"
LLAMA_CMAKE_FLAGS=(-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_METAL=OFF
                   -DGGML_VULKAN=OFF -DGGML_BLAS=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF
                   -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON)
case "$LLAMA_ISA" in  # the same trees as compare_llama_cpp.sh --llama-isa
  native) LLAMA_BUILD="$SRC/build" ;;
  native-noamx) LLAMA_BUILD="$SRC/build-noamx"
                LLAMA_CMAKE_FLAGS+=("-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
                                    "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16") ;;
  *) log "--llama-isa must be native or native-noamx"; exit 2 ;;
esac
LLAMA_SERVER="$LLAMA_BUILD/bin/llama-server"
if [ ! -x "$LLAMA_SERVER" ]; then
  [ -f "$SRC/CMakeLists.txt" ] || "$HERE/compare_llama_cpp.sh" --build-only --llama-isa "$LLAMA_ISA"
  log "building llama-server (CPU only, -j$JOBS; several minutes on 2 cores)"
  nice -n 10 cmake -S "$SRC" -B "$LLAMA_BUILD" -G Ninja "${LLAMA_CMAKE_FLAGS[@]}" >/dev/null
  nice -n 10 cmake --build "$LLAMA_BUILD" -j "$JOBS" --target llama-server
fi
[ -x "$PAGODA" ] || { log "no Pagoda binary at $PAGODA (scripts/build.sh, or --pagoda-bin)"; exit 1; }
"$PAGODA" serve --help >/dev/null 2>&1 || { log "$PAGODA has no 'serve' command: rebuild it"; exit 1; }
[ "$BUILD_ONLY" = 1 ] && { log "built: $LLAMA_SERVER"; exit 0; }
[ -f "$MODEL" ] || { log "no model at $MODEL (run scripts/setup.sh)"; exit 1; }

# --- 2. Measurements -------------------------------------------------------------------------------
WORK="$(mktemp -d)"
SERVER_PID=""
stop_server() {
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}
trap 'stop_server; rm -rf "$WORK"' EXIT
free_port() {
  "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_healthy() {  # port log
  for _ in $(seq 1 600); do
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$2" >&2; log "server exited during start-up"; exit 1; }
    if "$PYTHON" -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=2)' \
        "http://127.0.0.1:$1/health" 2>/dev/null; then
      return 0
    fi
    sleep 0.2
  done
  cat "$2" >&2; log "server never became healthy"; exit 1
}

MAX_LEN=$((INPUT_LEN + OUTPUT_LEN + 16))
start_server() {  # engine concurrency port log
  local engine="$1" c="$2" port="$3" logf="$4"
  if [ "$engine" = llama.cpp ]; then
    "$LLAMA_SERVER" -m "$MODEL" --host 127.0.0.1 --port "$port" -np "$c" -c $((c * MAX_LEN)) \
      -t "$THREADS" -tb "$THREADS" --cache-ram 0 >"$logf" 2>&1 &
  else
    "$PAGODA" serve "$MODEL" --host 127.0.0.1 --port "$port" --grpc-port 0 --max-num-seqs "$c" \
      --max-model-len "$MAX_LEN" --threads "$THREADS" --disable-log-requests \
      ${PAGODA_ARGS[@]+"${PAGODA_ARGS[@]}"} >"$logf" 2>&1 &
  fi
  SERVER_PID=$!
  wait_healthy "$port" "$logf"
}

LOAD_START="$(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
  for c in $CONCURRENCY; do
    n=$((PER_SLOT * c)); [ "$n" -lt 8 ] && n=8
    for engine in llama.cpp pagoda; do
      log "round $r/$ROUNDS, concurrency $c: $engine, $n requests"
      port="$(free_port)"
      start_server "$engine" "$c" "$port" "$WORK/$engine-$c-$r.log"
      "$PYTHON" "$ROOT/bench/serve/serve_bench.py" --base-url "http://127.0.0.1:$port" \
        --num-prompts "$n" --concurrency "$c" --input-len "$INPUT_LEN" --output-len "$OUTPUT_LEN" \
        --ignore-eos --warmup 2 --seed "$r" --quiet \
        --result-json "$WORK/result-$engine-$c-$r.json" >/dev/null ||
        { log "serve_bench failed against $engine:"; tail -n 20 "$WORK/$engine-$c-$r.log" >&2; exit 1; }
      stop_server
    done
  done
done
LOAD_END="$(cut -d' ' -f1-3 /proc/loadavg)"
# The raw reports stay in the (git-ignored) cache for a closer look.
KEEP="$ROOT/.cache/peer/serving-results"
[ "$SECTION" = compare_serving ] || KEEP="$KEEP-$SECTION"
rm -rf "$KEEP" && mkdir -p "$KEEP" && cp "$WORK"/*.json "$WORK"/*.log "$KEEP"/

# --- 3. Report -------------------------------------------------------------------------------------
# PAGODA_REV may be given when the binary was built before HEAD moved (compare_1b.sh does).
if [ -z "${PAGODA_REV:-}" ]; then
  PAGODA_REV="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  git -C "$ROOT" diff --quiet HEAD -- 2>/dev/null || PAGODA_REV="$PAGODA_REV + uncommitted changes"
fi
export RESULTS_DIR="$WORK" DOC VERSION LOAD_START LOAD_END PAGODA_REV ROUNDS THREADS SECTION TITLE
MACHINE_JSON=$("$PYTHON" "$HERE/machine.py")
LLAMA_COMMIT=$(cat "$SRC/.pagoda-llama-cpp-commit" 2>/dev/null || echo unknown)
CPU_MODEL=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
NPROC=$(nproc) DATE=$(date -u +'%Y-%m-%d %H:%M UTC')
export MACHINE_JSON LLAMA_COMMIT CPU_MODEL NPROC DATE MAX_LEN INPUT_LEN OUTPUT_LEN
export MODEL_REL="${MODEL#$ROOT/}" PAGODA_REL="${PAGODA#$ROOT/}" PER_SLOT
export LLAMA_SERVER_REL="${LLAMA_SERVER#$ROOT/} ($LLAMA_ISA build)"
# PEER_CMD: the command a driver (compare_1b.sh) wants the doc to show instead of this one.
export CMD="${PEER_CMD:-bench/peer/compare_serving.sh${ARGS_FOR_DOC:+ $ARGS_FOR_DOC}}"
"$PYTHON" "$HERE/report_serving.py"
