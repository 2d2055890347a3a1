#!/usr/bin/env bash
# FlashInfer's JIT cache (~/.cache/flashinfer/<version>/...) carried from one GPU host to the next.
#   ci/gpu-host/jit_cache.sh restore DIR        unpack every DIR/flashinfer-jit-<version>.tgz into ~/.cache (files
#                                               already there are kept)
#   ci/gpu-host/jit_cache.sh save OUT [SKIP]    pack each ~/.cache/flashinfer/<version> into OUT/flashinfer-jit-
#                                               <version>.tgz, but not a version SKIP/ already holds a tgz of,
#                                               nor one unchanged since this host last saved it
# Why: vLLM's V1 sampler uses FlashInfer's top-k/top-p sampling on CUDA (VLLM_USE_FLASHINFER_SAMPLER defaults on), and
# without flashinfer-cubin FlashInfer builds that module with nvcc at its first use: in the engine's profile run, 99 s
# on a fresh H200 (0.2 s once cached; bench/results/2026-11-29-h200-session32/README.md). Every engine booting at
# that moment waits on the build's file lock, so the first boot of each lease pays it. The device tool gives a fresh
# host per lease; this keeps the build from one lease to the next. The cache is keyed by FlashInfer's version and the
# GPU architecture (its path), both the same on this project's hosts. Boot-time results must say when it was restored.
set -euo pipefail
usage="usage: jit_cache.sh restore DIR | save OUT [SKIP]"
cache="${HOME:?}/.cache"
case "${1:-}" in
  restore)
    dir="${2:?$usage}"
    [[ -d "$dir" ]] || { echo "jit_cache.sh: no folder $dir: carry .gpu-wheels/jit-cache or drop the restore"; exit 2; }
    mkdir -p "$cache"; found=0
    for tgz in "$dir"/flashinfer-jit-*.tgz; do
      [[ -e "$tgz" ]] || continue
      tar xzf "$tgz" -C "$cache" --skip-old-files; found=$((found + 1))
      echo "jit cache: restored $(basename "$tgz" .tgz | sed 's/^flashinfer-jit-/FlashInfer /') into $cache/flashinfer"
    done
    (( found > 0 )) || echo "jit cache: $dir holds no flashinfer-jit-*.tgz; nothing restored"
    ;;
  save)
    out="${2:?$usage}"; skip="${3:-}"
    [[ -d "$out" ]] || { echo "jit_cache.sh: no folder $out: pass the folder that comes back from the host"; exit 2; }
    [[ -d "$cache/flashinfer" ]] || { echo "jit cache: no $cache/flashinfer on this host; nothing saved"; exit 0; }
    for version_dir in "$cache"/flashinfer/*/; do
      version=$(basename "$version_dir")
      if [[ -n "$skip" && -e "$skip/flashinfer-jit-$version.tgz" ]]; then
        echo "jit cache: FlashInfer $version came carried; not saved again"; continue
      fi
      # what is there now; a later call of the same lease that built nothing new brings back nothing again
      stamp=$(find "$version_dir" -type f ! -name '*.lock' ! -name .jit_cache_saved -printf '%P %s\n' | sort \
        | sha256sum | cut -c1-16)
      if [[ "$(cat "$version_dir/.jit_cache_saved" 2>/dev/null)" == "$stamp" ]]; then
        echo "jit cache: FlashInfer $version unchanged since this host saved it; not saved again"; continue
      fi
      tar czf "$out/flashinfer-jit-$version.tgz" -C "$cache" --exclude='*.lock' --exclude=.jit_cache_saved \
        "flashinfer/$version"
      echo "$stamp" > "$version_dir/.jit_cache_saved"
      echo "jit cache: saved FlashInfer $version as $out/flashinfer-jit-$version.tgz"
    done
    ;;
  *) echo "jit_cache.sh: '${1:-}' is no action: $usage"; exit 2 ;;
esac
