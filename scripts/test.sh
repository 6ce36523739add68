#!/usr/bin/env bash
# The whole test suite from a fresh clone: set-up, build, unit tests (ctest), end-to-end (pytest).
#   scripts/test.sh                 Release build
#   BUILD_TYPE=Asan scripts/test.sh the same under AddressSanitizer + UBSan
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
BUILD_DIR="$("$ROOT/scripts/build.sh" | tail -n 1)"

echo "== unit tests (ctest) =="
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)"

echo "== end-to-end tests (pytest) =="
PAGODA_BIN="$BUILD_DIR/pagoda" "$ROOT/.venv/bin/python" -m pytest -q "$ROOT/tests/e2e"
