#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in build-fuzz/ and runs each for
# SECONDS (default 60) from a seed corpus of the project's own test data.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_PER_TARGET="${1:-60}"
FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -g -O1"
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$ROOT/build-fuzz" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DPAGODA_BUILD_FUZZERS=ON -DPAGODA_BUILD_TESTS=OFF -DPAGODA_BUILD_BENCH=OFF \
  -DPAGODA_ENABLE_CUDA=OFF -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_C_FLAGS="$FLAGS" >/dev/null
cmake --build "$ROOT/build-fuzz" --target gguf_fuzz jinja_fuzz

corpus="$ROOT/build-fuzz/corpus"
mkdir -p "$corpus/gguf" "$corpus/jinja"
cp "$ROOT"/tests/data/model/*.gguf "$corpus/gguf/"
cp "$ROOT"/tests/data/template/templates/*.jinja "$corpus/jinja/"
"$ROOT/build-fuzz/tests/fuzz/gguf_fuzz" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096 "$corpus/gguf"
"$ROOT/build-fuzz/tests/fuzz/jinja_fuzz" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=4096 -max_len=16384 "$corpus/jinja"
