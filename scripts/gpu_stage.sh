#!/usr/bin/env bash
# Files larger than one device call may carry (the tree, the bundle and a file share 64 MiB; the
# default model alone is 98 MB) reach a lent GPU machine in parts over consecutive calls on the
# same warm machine, which keeps /tmp between calls:
#
#   here:    scripts/gpu_stage.sh split models/SmolLM2-135M-Instruct.Q4_1.gguf .gpu-stage 20
#            (parts of at most 20 MiB, one folder each: .gpu-stage/p00, p01, ...; the folder is
#            git-excluded)
#   device:  consecutive calls, each within 30 s of the last (the machine goes back when idle),
#            each carrying what fits beside the tree (the bundle too in the first), e.g.
#              run(command="bash scripts/gpu_check.sh exec bash scripts/gpu_stage.sh gather .gpu-stage",
#                  carry=[".gpu-bundle", ".gpu-stage/p00"])
#              run(command="bash scripts/gpu_stage.sh gather .gpu-stage",
#                  carry=[".gpu-stage/p01", ".gpu-stage/p02"])
#            each gather copies the parts it finds to /tmp/pagoda-stage/<file>.parts/ and, once
#            every part is there, assembles /tmp/pagoda-stage/<file> and checks its sha256.
#   then:    scripts/gpu_check.sh exec ... finds the models there (PAGODA_SMOLLM2_GGUF,
#            PAGODA_GEMMA3_GGUF) and reuses the bundle unpacked by the first call.
set -euo pipefail
STAGE=/tmp/pagoda-stage

case "${1:-}" in
  split)
    file=$2 dir=$3 mib=${4:-30}
    name=$(basename "$file")
    tmp=$(mktemp -d)
    split -b "${mib}M" -d -a 2 "$file" "$tmp/part-"
    count=$(ls "$tmp"/part-* | wc -l)
    sum=$(sha256sum "$file" | awk '{print $1}')
    # One folder per part, each a carry path of its own: DIR/pNN/<file>/{part-NN,count,sha256}.
    for p in "$tmp"/part-*; do
      n=${p##*part-}
      mkdir -p "$dir/p$n/$name"
      mv "$p" "$dir/p$n/$name/"
      echo "$count" >"$dir/p$n/$name/count"
      echo "$sum" >"$dir/p$n/$name/sha256"
    done
    rmdir "$tmp"
    exclude="$(git rev-parse --git-path info/exclude)"
    mkdir -p "$(dirname "$exclude")"
    grep -qx "/$(basename "$dir")/" "$exclude" 2>/dev/null || echo "/$(basename "$dir")/" >>"$exclude"
    echo "$name: $count parts of at most $mib MiB: $(ls -d "$dir"/p* | tr '\n' ' ')"
    ;;
  gather)
    dir=$2
    mkdir -p "$STAGE"
    # Every <file>/ folder below dir (at any depth the carry kept): its parts, count and sha256.
    while IFS= read -r -d '' meta; do
      src=$(dirname "$meta")
      name=$(basename "$src")
      parts="$STAGE/$name.parts"
      mkdir -p "$parts"
      cp "$src"/sha256 "$src"/count "$parts/"
      for p in "$src"/part-*; do [[ -e "$p" ]] && cp "$p" "$parts/"; done
      have=$(ls "$parts"/part-* 2>/dev/null | wc -l)
      if [[ "$have" -lt "$(cat "$parts/count")" ]]; then
        echo "$name: $have of $(cat "$parts/count") parts staged"
        continue
      fi
      cat "$parts"/part-* >"$STAGE/$name"
      if [[ "$(sha256sum "$STAGE/$name" | awk '{print $1}')" == "$(cat "$parts/sha256")" ]]; then
        echo "$name: assembled at $STAGE/$name, sha256 ok"
        rm -rf "$parts"
      else
        echo "$name: sha256 mismatch after assembly" >&2
        rm -f "$STAGE/$name"
        exit 1
      fi
    done < <(find "$dir" -name count -print0)
    ;;
  *)
    echo "usage: scripts/gpu_stage.sh split FILE DIR [MIB] | gather DIR" >&2
    exit 2
    ;;
esac
