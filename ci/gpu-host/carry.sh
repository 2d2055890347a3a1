#!/usr/bin/env bash
# Put part N of a re-split staging folder (ci/gpu-host/resplit.sh), its MANIFEST and ci/gpu-host/install.sh alone into
# .gpu-wheels/carry/, the one folder a device call carries (carry: [".gpu-wheels/carry"]); run from the project root.
#   ci/gpu-host/carry.sh .gpu-wheels/parts-small N
# With `all` instead of N, every part gets a folder of its own, .gpu-wheels/carry-NN (carry: [".gpu-wheels/carry-NN"],
# command `bash .gpu-wheels/carry-NN/install.sh`). Why: the calls can then be sent several at a time, back to back,
# with nothing to prepare between them, so the host (released after 30 s idle) stays warm through the staging.
# A third argument puts those folders under another root, so two vLLMs' staging stays ready side by side:
#   ci/gpu-host/carry.sh .gpu-wheels/parts-0.33.0 all .gpu-wheels/v0.33.0   -> .gpu-wheels/v0.33.0/carry-NN
# (install.sh reads the version from the MANIFEST it is carried with and installs into /tmp/site-<version>).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
usage="usage: carry.sh PARTS_DIR N|all [ROOT]"
src="${1:?$usage}"; which="${2:?$usage}"; root="${3:-.gpu-wheels}"
[[ "$root" == .gpu-wheels || "$root" == .gpu-wheels/* ]] || { echo "carry.sh: ROOT '$root' is not under .gpu-wheels (git ignores only that): name .gpu-wheels/SOMETHING"; exit 2; }
[[ -f "$src/MANIFEST" ]] || { echo "no $src/MANIFEST: run ci/gpu-host/resplit.sh first"; exit 2; }

one() {  # one() PART_NUMBER DEST_DIR
  local n; n=$(printf '%02d' "$((10#$1))")
  [[ -f "$src/p$n" ]] || { echo "no $src/p$n: run ci/gpu-host/resplit.sh first"; exit 2; }
  rm -rf "$2"; mkdir -p "$2"
  cp "$src/p$n" "$src/MANIFEST" "$here/install.sh" "$2/"
}

parts=$(awk '/^parts/{print $2}' "$src/MANIFEST"); version=$(awk '/^version/{print $2}' "$src/MANIFEST")
if [[ "$which" == all ]]; then
  rm -rf "$root"/carry-[0-9]*
  for ((i = 0; i < parts; i++)); do one "$i" "$root/carry-$(printf '%02d' "$i")"; done
  echo "carry: $version, $parts folders $root/carry-00 .. carry-$(printf '%02d' $((parts - 1)))"
else
  [[ "$which" =~ ^[0-9]+$ ]] || { echo "carry.sh: part '$which' is no number: give N or all"; exit 2; }
  one "$which" "$root/carry"
  echo "carry: $version part $(printf '%02d' "$((10#$which))") of $parts"
fi
