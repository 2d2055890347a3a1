#!/usr/bin/env bash
# Runs on the GPU host from the project root, carried beside one staged part (ci/gpu-host/carry.sh): collects the
# part; once every part is there, joins them, checks the MANIFEST's sha256, unpacks the wheels and installs them into
# /tmp/site (vLLM 0.26.0) or /tmp/site-<version>. The MANIFEST's `format` says how the parts were made: `tar` (stage.sh,
# resplit.sh) or `tar.xz` (resplit.sh --xz: wheels stored uncompressed, one xz stream; unpacked with xz where the
# host has it, else Python's lzma). STAGE_ROOT (default /tmp) holds both folders.
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="${STAGE_ROOT:-/tmp}"
ver=$(awk '/^version/{print $2}' "$src/MANIFEST"); ver=${ver:-0.26.0}
format=$(awk '/^format/{print $2}' "$src/MANIFEST"); format=${format:-tar}
dst=$root/gpu-wheels-$ver; site=$root/site; [[ "$ver" != "0.26.0" ]] && site=$root/site-$ver
mkdir -p "$dst"; cp "$src"/p[0-9]* "$src/MANIFEST" "$dst/"
want=$(awk '/^parts/{print $2}' "$dst/MANIFEST"); have=$(ls "$dst"/p[0-9]* | wc -l)
echo "parts present: $have/$want"
[[ "$have" -lt "$want" ]] && exit 0
if [[ -f $site/.installed ]]; then echo "already installed in $site"; exit 0; fi
cat "$dst"/p[0-9]* > "$dst/all.$format"
[[ "$(sha256sum "$dst/all.$format" | cut -d' ' -f1)" == "$(awk '/^sha256/{print $2}' "$dst/MANIFEST")" ]] \
  || { echo "sha256 mismatch: the parts of $ver do not join to what resplit.sh wrote; stage again"; exit 1; }
case "$format" in
  tar) tar xf "$dst/all.tar" -C "$dst" ;;
  tar.xz)
    if command -v xz >/dev/null; then xz -dc "$dst/all.tar.xz" | tar xf - -C "$dst"
    else python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1], "r:xz").extractall(sys.argv[2])' \
      "$dst/all.tar.xz" "$dst"; fi ;;
  *) echo "install.sh: MANIFEST format '$format' is neither tar nor tar.xz: re-split with ci/gpu-host/resplit.sh"
     exit 2 ;;
esac
rm -f "$dst/all.$format"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$dst"/w/*.whl
touch "$site/.installed"
PYTHONPATH=$site python3 -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__)"
