#!/usr/bin/env bash
# Sets up, builds and runs Pagoda on the default model: a short summary of the model, then a chat
# answer generated on the CPU, streamed as it is produced. Extra arguments go to `pagoda generate`
# (e.g. a MODEL path, --max-tokens 64, --temperature 0).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh" --no-venv
BUILD_DIR="$("$ROOT/scripts/build.sh" | tail -n 1)"
PAGODA="$BUILD_DIR/pagoda"

echo "== pagoda inspect (first lines) =="
summary="$("$PAGODA" inspect)"
sed -n 1,18p <<<"$summary"
echo "== pagoda generate --chat 'What is a pagoda? Answer in two sentences.' =="
"$PAGODA" generate --chat "What is a pagoda? Answer in two sentences." "$@"
