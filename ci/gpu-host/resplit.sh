#!/usr/bin/env bash
# Re-split ../shared/gpu-host/stage.sh's parts (55 MiB) into smaller ones, so that one part plus the repository tree
# stays under the device tool's 64 MiB per call. Checks the joined archive against the MANIFEST's sha256 and writes a
# MANIFEST of the same format (version / sha256 / parts, and format), which ci/gpu-host/install.sh reads.
#   ci/gpu-host/resplit.sh [--xz] .gpu-wheels/parts .gpu-wheels/parts-small [MIB]
# --xz: the wheels stored uncompressed (repack_wheels.py) and the archive compressed as one xz stream (format
# tar.xz): vLLM 0.33.0's 310 MiB become 185 MiB, a third fewer staging calls, for 4-10 min of compression here.
# PARTS_DIR may itself be an xz set (an earlier --xz re-split): it is then cut again at this tree's part size, the
# stream unchanged, in seconds (after the tree shrank or grew).
# MIB defaults to what the tree leaves: 60 MiB minus the files a call carries besides the part (tracked and untracked,
# not ignored), each counted in whole 4 KiB blocks as the device tool measures them (it refused a 32 MiB part beside
# 29.7 MB of files that take 35.9 MiB of blocks); 4 MiB kept for the part's MANIFEST and install.sh and a few
# commits' growth. Why: the tree grows with every lease's results (25 MB before the 8B results, 43 MiB before raw
# results were stored compressed, ~30 MB of thousands of small files since), and a fixed size stopped fitting four
# times.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
format=tar; [[ "${1:-}" == --xz ]] && { format=tar.xz; shift; }
usage="usage: resplit.sh [--xz] PARTS_DIR OUT_DIR [MIB]"
src="${1:?$usage}"; dst="${2:?$usage}"
[[ -f "$src/MANIFEST" ]] || { echo "no $src/MANIFEST: run ../shared/gpu-host/stage.sh first"; exit 2; }
if [[ -n "${3:-}" ]]; then mib="$3"
else
  tree=$(git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null \
    | awk '{s += int(($1 + 4095) / 4096) * 4096} END {print s + 0}')
  mib=$(( 60 - (tree + (1 << 20) - 1) / (1 << 20) ))
  (( mib >= 8 )) || { echo "the tree alone carries $(( tree >> 20 )) MiB: too little room for parts; trim it"; exit 2; }
  echo "tree $(( tree >> 20 )) MiB: parts of $mib MiB"
fi
ver=$(awk '/^version/{print $2}' "$src/MANIFEST"); sha=$(awk '/^sha256/{print $2}' "$src/MANIFEST")
given=$(awk '/^format/{print $2}' "$src/MANIFEST"); given=${given:-tar}
[[ "$given" == tar || "$given" == tar.xz ]] \
  || { echo "resplit.sh: $src/MANIFEST's format '$given' is neither tar nor tar.xz: restage"; exit 2; }
[[ "$(cd "$src" && pwd)" != "$(mkdir -p "$dst" && cd "$dst" && pwd)" ]] \
  || { echo "resplit.sh: OUT_DIR is PARTS_DIR (it would be emptied first): name another folder"; exit 2; }
rm -rf "$dst"; mkdir -p "$dst"
cat "$src"/p[0-9]* > "$dst/all.$given"
[[ "$(sha256sum "$dst/all.$given" | cut -d' ' -f1)" == "$sha" ]] || { echo "sha256 mismatch: restage"; exit 1; }
if [[ "$given" == tar.xz ]]; then
  format=tar.xz  # an xz set (an earlier --xz re-split) is only cut again, at this tree's size: no recompression
elif [[ "$format" == tar.xz ]]; then
  python3 "$here/repack_wheels.py" "$dst/all.tar" | xz -6 -T0 > "$dst/all.tar.xz"
  rm "$dst/all.tar"; sha=$(sha256sum "$dst/all.tar.xz" | cut -d' ' -f1)
fi
split -b "${mib}M" -d "$dst/all.$format" "$dst/p"
rm "$dst/all.$format"
( cd "$dst"; echo "version $ver"; echo "sha256 $sha"; echo "parts $(ls p[0-9]* | wc -l)"; echo "format $format" ) \
  > "$dst/MANIFEST"
cat "$dst/MANIFEST"; ls -l "$dst"
