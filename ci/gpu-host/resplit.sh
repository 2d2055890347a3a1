#!/usr/bin/env bash
# Re-split ../shared/gpu-host/stage.sh's parts (55 MiB) into smaller ones, so that one part plus the repository tree
# (~25 MB) stays under the device tool's 64 MiB per call. Checks the joined archive against the MANIFEST's sha256
# and writes a MANIFEST of the same format (version / sha256 / parts), which install.sh reads.
#   ci/gpu-host/resplit.sh .gpu-wheels/parts .gpu-wheels/parts38-0.28.0 [MIB, default 38]
set -euo pipefail
src="${1:?usage: resplit.sh PARTS_DIR OUT_DIR [MIB]}"; dst="${2:?usage: resplit.sh PARTS_DIR OUT_DIR [MIB]}"
mib="${3:-38}"
[[ -f "$src/MANIFEST" ]] || { echo "no $src/MANIFEST: run ../shared/gpu-host/stage.sh first"; exit 2; }
ver=$(awk '/^version/{print $2}' "$src/MANIFEST"); sha=$(awk '/^sha256/{print $2}' "$src/MANIFEST")
rm -rf "$dst"; mkdir -p "$dst"
cat "$src"/p[0-9]* > "$dst/all.tar"
[[ "$(sha256sum "$dst/all.tar" | cut -d' ' -f1)" == "$sha" ]] || { echo "sha256 mismatch: restage"; exit 1; }
split -b "${mib}M" -d "$dst/all.tar" "$dst/p"
rm "$dst/all.tar"
( cd "$dst"; echo "version $ver"; echo "sha256 $sha"; echo "parts $(ls p[0-9]* | wc -l)" ) > "$dst/MANIFEST"
cat "$dst/MANIFEST"; ls -l "$dst"
