#!/usr/bin/env bash
# Put part N of a re-split staging folder (ci/gpu-host/resplit.sh), its MANIFEST and install.sh alone into
# .gpu-wheels/carry/, the one folder a device call carries (carry: [".gpu-wheels/carry"]); run from the project root.
#   ci/gpu-host/carry.sh .gpu-wheels/parts-small N
set -euo pipefail
src="${1:?usage: carry.sh PARTS_DIR N}"; n=$(printf '%02d' "${2:?usage: carry.sh PARTS_DIR N}")
[[ -f "$src/p$n" && -f "$src/MANIFEST" ]] || { echo "no $src/p$n or $src/MANIFEST: run ci/gpu-host/resplit.sh first"; exit 2; }
rm -rf .gpu-wheels/carry; mkdir -p .gpu-wheels/carry
cp "$src/p$n" "$src/MANIFEST" ../shared/gpu-host/install.sh .gpu-wheels/carry/
echo "carry: $(awk '/^version/{print $2}' "$src/MANIFEST") part $n of $(awk '/^parts/{print $2}' "$src/MANIFEST")"
