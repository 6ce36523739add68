#!/usr/bin/env bash
# Builds xgrammar's C++ core (the grammar engine behind structured outputs, src/structured/) from
# its pinned PyPI source distribution into .cache/xgrammar-<version>/install (lib/libxgrammar.a,
# include/). Only the C++ library: no Python bindings, tests or tracing. Called by
# scripts/setup.sh; safe to run again (a stamp records what was built, and a finished build is
# kept). CMake finds the result through cmake/xgrammar.cmake.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION=0.2.8
SDIST="xgrammar-${VERSION}.tar.gz"
SHA256=8305646fd2b319d6c3003f51a1665e54cbbe9cba1fb636bc41d0b46434ccbb80
PREFIX="$ROOT/.cache/xgrammar-${VERSION}"
STAMP="$PREFIX/install/.built-from"
JOBS="${JOBS:-$(nproc)}"

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$SHA256" ] && [ -f "$PREFIX/install/lib/libxgrammar.a" ]; then
  say "xgrammar ${VERSION}: built"
  exit 0
fi

mkdir -p "$ROOT/.cache/downloads"
ARCHIVE="$ROOT/.cache/downloads/$SDIST"
if ! { [ -f "$ARCHIVE" ] && echo "$SHA256  $ARCHIVE" | sha256sum -c --quiet - 2>/dev/null; }; then
  say "xgrammar ${VERSION}: downloading the source distribution from PyPI"
  # The file's address comes from PyPI's JSON simple index (PEP 691), as for the models.
  URL="$(python3 - "$SDIST" <<'EOF'
import json, sys, urllib.request
want = sys.argv[1]
req = urllib.request.Request("https://pypi.org/simple/xgrammar/",
                             headers={"Accept": "application/vnd.pypi.simple.v1+json"})
with urllib.request.urlopen(req, timeout=60) as r:
    index = json.load(r)
for f in index["files"]:
    if f["filename"] == want:
        print(f["url"])
        break
EOF
)" || die "cannot reach PyPI for $SDIST; the machine must reach pypi.org"
  [ -n "$URL" ] || die "PyPI has no file $SDIST"
  python3 -c 'import shutil, sys, urllib.request
with urllib.request.urlopen(sys.argv[1], timeout=120) as r, open(sys.argv[2], "wb") as out:
    shutil.copyfileobj(r, out, 1 << 20)' "$URL" "$ARCHIVE.part" || die "download of $URL failed; retry"
  echo "$SHA256  $ARCHIVE.part" | sha256sum -c --quiet - \
    || { rm -f "$ARCHIVE.part"; die "$SDIST does not match its pinned sha256 $SHA256"; }
  mv "$ARCHIVE.part" "$ARCHIVE"
fi

say "xgrammar ${VERSION}: building the C++ core (a few minutes on 2 cores)"
rm -rf "$PREFIX"
mkdir -p "$PREFIX/build"
tar -xzf "$ARCHIVE" -C "$PREFIX"
# xgrammar reads config.cmake from the build folder first: turn its Python bindings (which need
# tvm_ffi) and tests off there, since its own cmake/config.cmake turns the bindings on.
cat >"$PREFIX/build/config.cmake" <<'EOF'
set(XGRAMMAR_BUILD_PYTHON_BINDINGS OFF)
set(XGRAMMAR_BUILD_CXX_TESTS OFF)
set(XGRAMMAR_ENABLE_CPPTRACE OFF)
set(XGRAMMAR_ENABLE_COVERAGE OFF)
set(XGRAMMAR_ENABLE_INTERNAL_CHECK OFF)
EOF
# -fno-lto: its default -flto=auto would leave GCC bytecode in the archive (slow links, and
# tied to one compiler version); -Wno-error: a newer warning must not fail the build.
cmake -S "$PREFIX/xgrammar-${VERSION}" -B "$PREFIX/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="-fno-lto -Wno-error" -DCMAKE_INSTALL_PREFIX="$PREFIX/install" >/dev/null \
  || die "configuring xgrammar failed (see above)"
cmake --build "$PREFIX/build" -j "$JOBS" >/dev/null || die "building xgrammar failed (see above)"
cmake --install "$PREFIX/build" >/dev/null || die "installing xgrammar failed"
# The installed headers stand alone (xgrammar's and dlpack's): the sources and objects can go.
rm -rf "$PREFIX/build" "$PREFIX/xgrammar-${VERSION}"
echo "$SHA256" >"$STAMP"
say "xgrammar ${VERSION}: built into ${PREFIX#"$ROOT"/}/install"
