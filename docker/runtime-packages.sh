#!/usr/bin/env bash
# Prints, one per line, the Debian/Ubuntu packages that hold the shared libraries BINARY loads,
# so an image's runtime stage installs exactly those. Run in the build stage, after the build:
#   docker/runtime-packages.sh build/pagoda > /runtime-packages.txt
# Libraries of the CUDA toolkit (under /usr/local/cuda*) are left out: NVIDIA's runtime image
# ships them. libcuda.so.1 comes from the host driver at run time, so it may be unresolved here.
# Exit 1 when another library is unresolved or owned by no package.
set -euo pipefail
binary="${1:?usage: runtime-packages.sh BINARY}"
ldd_out="$(ldd "$binary")" || { echo "runtime-packages.sh: ldd failed on $binary" >&2; exit 1; }

# dpkg records a file under the path its package installed, which may be /lib/... or /usr/lib/...
# (merged /usr): each library is looked up as ldd gave it, by its real path, and each with /usr
# added or removed. One dpkg-query call for all of them: it reads its file lists once.
candidates_of() {
  local lib="$1" real
  real="$(readlink -f "$lib")"
  printf '%s\n' "$lib" "$real" "/usr$lib" "/usr$real" "${lib#/usr}" "${real#/usr}"
}

status=0
libs=()
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue            # the vDSO and the dynamic loader itself
  if [ "$path" = "not" ]; then
    case "$name" in
      libcuda.so.*|libnvidia-*) continue ;;
      *) echo "runtime-packages.sh: $binary needs $name, which is not found" >&2; status=1; continue ;;
    esac
  fi
  case "$(readlink -f "$path")" in /usr/local/cuda*) continue ;; esac
  libs+=("$path")
done <<<"$ldd_out"
[ "$status" = 0 ] || exit 1
[ ${#libs[@]} -gt 0 ] || exit 0

declare -A owner
mapfile -t all < <(for lib in "${libs[@]}"; do candidates_of "$lib"; done | sort -u)
# "pkg:arch: /path" (or "pkg1, pkg2: /path" for a shared file); lines for unknown paths go to stderr.
while IFS= read -r line; do
  owner["${line#*: }"]="${line%%[:,]*}"
done < <(dpkg-query -S "${all[@]}" 2>/dev/null || true)

packages=()
for lib in "${libs[@]}"; do
  package=""
  while read -r candidate; do
    if [ -n "${owner[$candidate]:-}" ]; then package="${owner[$candidate]}"; break; fi
  done < <(candidates_of "$lib")
  if [ -z "$package" ]; then
    echo "runtime-packages.sh: no package owns $lib" >&2
    status=1
  fi
  packages+=("$package")
done
[ "$status" = 0 ] || exit 1
printf '%s\n' "${packages[@]}" | sort -u
