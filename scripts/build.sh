#!/usr/bin/env bash
# Configures and builds Pagoda. BUILD_TYPE=Release (default), Debug, Asan or Tsan; each type gets
# its own folder (build/ for Release, build-<type> otherwise) so they never mix. Progress goes to
# stderr; the last line on stdout is the build folder.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_TYPE="${BUILD_TYPE:-Release}"
case "$BUILD_TYPE" in
  Release) BUILD_DIR="$ROOT/build" ;;
  Debug|Asan|Tsan|RelWithDebInfo) BUILD_DIR="$ROOT/build-$(echo "$BUILD_TYPE" | tr '[:upper:]' '[:lower:]')" ;;
  *) echo "build.sh: BUILD_TYPE must be Release, Debug, RelWithDebInfo, Asan or Tsan" >&2; exit 2 ;;
esac
JOBS="${JOBS:-$(nproc)}"
cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="$BUILD_TYPE" ${CMAKE_ARGS:-} >&2
cmake --build "$BUILD_DIR" -j "$JOBS" >&2
echo "$BUILD_DIR"
