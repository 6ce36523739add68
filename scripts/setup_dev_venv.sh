#!/usr/bin/env bash
# Creates .venv-dev with the reference tools that generate golden test data (HF transformers and
# tokenizers, torch (CPU), jinja2, gguf, sentencepiece, safetensors). Only developers need it; CI
# never runs the golden scripts, it reads their committed output.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ -x "$ROOT/.venv-dev/bin/python" ] || python3 -m venv "$ROOT/.venv-dev"
"$ROOT/.venv-dev/bin/python" -m pip install -q -r "$ROOT/tests/golden/requirements-dev.txt"
echo "dev venv ready: $ROOT/.venv-dev/bin/python"
