#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) in build-fuzz/ and runs each for
# SECONDS (default 60) from a seed corpus: the project's own test data, and tests/fuzz/seeds/.
#   scripts/fuzz.sh [SECONDS] [TARGET...]     (default: every target)
# A crash, a leak or an input slower than 10 s stops its target with the input saved in
# build-fuzz/ (crash-*, leak-*, timeout-*); rerun one with build-fuzz/tests/fuzz/TARGET FILE.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_PER_TARGET="${1:-60}"
shift $(($# > 0 ? 1 : 0))
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(gguf_fuzz checkpoint_fuzz jinja_fuzz api_request_fuzz grpc_request_fuzz tool_call_fuzz
    tokenizer_fuzz constraint_fuzz)
fi
FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -g -O1"
CC=clang CXX=clang++ cmake -S "$ROOT" -B "$ROOT/build-fuzz" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DPAGODA_BUILD_FUZZERS=ON -DPAGODA_BUILD_TESTS=OFF -DPAGODA_BUILD_BENCH=OFF \
  -DPAGODA_ENABLE_CUDA=OFF -DCMAKE_CXX_FLAGS="$FLAGS" -DCMAKE_C_FLAGS="$FLAGS" >/dev/null
cmake --build "$ROOT/build-fuzz" --target "${TARGETS[@]}"

corpus="$ROOT/build-fuzz/corpus"
seed() {  # seed TARGET FILES...: copies FILES into TARGET's corpus
  local target="$1"
  shift
  mkdir -p "$corpus/$target"
  cp "$@" "$corpus/$target/"
}
seed gguf_fuzz "$ROOT"/tests/data/model/*.gguf
seed jinja_fuzz "$ROOT"/tests/data/template/templates/*.jinja
seed api_request_fuzz "$ROOT"/tests/fuzz/seeds/api_request/*
seed tool_call_fuzz "$ROOT"/tests/fuzz/seeds/tool_call/*
seed tokenizer_fuzz "$ROOT"/tests/fuzz/seeds/tool_call/* "$ROOT"/tests/fuzz/seeds/api_request/* \
  "$ROOT"/tests/data/template/templates/*.jinja
seed constraint_fuzz "$ROOT"/tests/fuzz/seeds/constraint/*
# Two targets read a byte naming what follows (its value mod 3), then the input itself.
kind_byte() { printf %b "\\x0$1"; }
# checkpoint_fuzz: 0 safetensors, 1 config.json, 2 tokenizer.json; the test data's files under
# 64 KiB.
mkdir -p "$corpus/checkpoint_fuzz"
for kind_and_name in 0:'*.safetensors' 1:config.json 2:tokenizer.json; do
  kind="${kind_and_name%%:*}"
  while IFS= read -r file; do
    { kind_byte "$kind"; cat "$file"; } \
      >"$corpus/checkpoint_fuzz/$kind-$(md5sum <<<"$file" | cut -c1-12)"
  done < <(find "$ROOT/tests/data" -name "${kind_and_name#*:}" -size -64k)
done
# grpc_request_fuzz: 0 Generate, 1 Tokenize, 2 Detokenize, in their wire form; the seeds are text
# protos, encoded here.
mkdir -p "$corpus/grpc_request_fuzz"
for text in "$ROOT"/tests/fuzz/seeds/grpc_request/*.txtpb; do
  name="$(basename "$text" .txtpb)"
  case "$name" in
    generate_*) kind=0 message=GenerateRequest proto=generate ;;
    tokenize_*) kind=1 message=TokenizeRequest proto=tokenize ;;
    detokenize_*) kind=2 message=DetokenizeRequest proto=tokenize ;;
    *) echo "fuzz.sh: $text: name it generate_*, tokenize_* or detokenize_*" >&2; exit 2 ;;
  esac
  { kind_byte "$kind"; protoc -I "$ROOT/proto" --encode="pagoda.v1.$message" \
    "$ROOT/proto/pagoda/v1/$proto.proto" <"$text"; } >"$corpus/grpc_request_fuzz/$name"
done

cd "$ROOT/build-fuzz"
for target in "${TARGETS[@]}"; do
  echo "== $target =="
  max_len=(-max_len=16384)
  [ "$target" = gguf_fuzz ] && max_len=()  # its seeds are whole files: libFuzzer's default
  "$ROOT/build-fuzz/tests/fuzz/$target" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
    -rss_limit_mb=4096 "${max_len[@]}" -print_final_stats=1 "$corpus/$target"
done
