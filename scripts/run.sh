#!/usr/bin/env bash
# Sets up, builds and runs Pagoda on the default model: its shape and tensors, the tokenization of
# a sample text, and a chat rendered with the model's own template. Extra arguments go to
# `pagoda inspect` (e.g. a MODEL path).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh" --no-venv
BUILD_DIR="$("$ROOT/scripts/build.sh" | tail -n 1)"
PAGODA="$BUILD_DIR/pagoda"

echo "== pagoda inspect =="
"$PAGODA" inspect "$@" | head -n 40
echo "== pagoda tokenize --text 'Pagoda serves models, fast.' =="
"$PAGODA" tokenize "$@" --text "Pagoda serves models, fast."
echo "== pagoda chat-template =="
"$PAGODA" chat-template "$@" \
  --messages '[{"role":"system","content":"You are brief."},{"role":"user","content":"What is a pagoda?"}]'
