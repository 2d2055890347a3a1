#!/usr/bin/env bash
# FlashInfer's JIT cache (~/.cache/flashinfer/<version>/...) carried from one GPU host to the next.
#   ci/gpu-host/jit_cache.sh restore DIR [SITE] unpack every DIR/flashinfer-jit-<version>.tgz into ~/.cache (files
#                                               already there are kept); a version that then holds just what the
#                                               tgz held is stamped as saved; with SITE (the staged install, e.g.
#                                               /tmp/site) each cached module of this GPU's architecture is also
#                                               placed as an ahead-of-time build where SITE's FlashInfer is the
#                                               cache's version
#   ci/gpu-host/jit_cache.sh save OUT [SKIP]    pack each ~/.cache/flashinfer/<version> into OUT/flashinfer-jit-
#                                               <version>.tgz, but not a version SKIP/ already holds a tgz of,
#                                               nor one unchanged since this host last saved or restored it (a
#                                               later call of the lease that carries no cache brings none back)
# Why: vLLM's V1 sampler uses FlashInfer's top-k/top-p sampling on CUDA (VLLM_USE_FLASHINFER_SAMPLER defaults on), and
# without flashinfer-cubin FlashInfer builds that module with nvcc at its first use: in the engine's profile run, 99 s
# on a fresh H200 (0.2 s once cached; bench/results/2026-11-29-h200-session32/README.md). Every engine booting at
# that moment waits on the build's file lock, so the first boot of each lease pays it. The device tool gives a fresh
# host per lease; this keeps the build from one lease to the next. The cache is keyed by FlashInfer's version and the
# GPU architecture (its path), both the same on this project's hosts. Boot-time results must say when it was restored.
# Restoring ~/.cache alone does not skip the build: FlashInfer runs ninja at every first use of a module, and ninja
# builds again when its log holds other command lines (another install path) or a source newer than the build it
# logged, which every fresh host has, pip writing each file with the install's time. A module FlashInfer finds
# ahead-of-time built (<package>/data/aot/<name>/<name>.so, where no flashinfer-jit-cache package is installed) is
# loaded without ninja, so restore with SITE puts each cached <name>.so there.
set -euo pipefail
usage="usage: jit_cache.sh restore DIR [SITE] | save OUT [SKIP]"
cache="${HOME:?}/.cache"
# What a version's folder holds (paths and sizes, not the build's lock files, the stamp nor FlashInfer's own
# flashinfer_jit.log, which grows each time a server loads a cached module, so every call of a lease saved the same
# modules again): the stamp that save leaves in <version>/.jit_cache_saved, and restore when the folder holds just
# what the tgz held.
stamp() {
  find "$1" -type f ! -name '*.lock' ! -name .jit_cache_saved ! -name flashinfer_jit.log -printf '%P %s\n' | sort \
    | sha256sum | cut -c1-16
}
# Each cached module of this GPU's architecture (nvidia-smi's compute capability) as an ahead-of-time build of SITE's
# FlashInfer, where that is the cache's version; a module SITE already has is kept.
place_aot() {
  local version="$1" site="$2" have cap so name placed=0
  have=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$site/flashinfer/_build_meta.py" 2>/dev/null || true)
  if [[ "$have" != "$version" ]]; then
    echo "jit cache: $site holds FlashInfer ${have:-none}, not $version: no ahead-of-time module placed"; return 0
  fi
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d '. ' || true)
  if [[ -z "$cap" ]]; then echo "jit cache: nvidia-smi names no GPU: no ahead-of-time module placed"; return 0; fi
  for so in "$cache/flashinfer/$version/$cap"*/cached_ops/*/*.so; do
    [[ -e "$so" ]] || continue
    name=$(basename "$so" .so)
    [[ "$(basename "$(dirname "$so")")" == "$name" ]] || continue
    mkdir -p "$site/flashinfer/data/aot/$name"
    cp -n "$so" "$site/flashinfer/data/aot/$name/$name.so"; placed=$((placed + 1))
  done
  echo "jit cache: placed $placed FlashInfer $version module(s) of sm_$cap as ahead-of-time builds in $site/flashinfer/data/aot"
}
case "${1:-}" in
  restore)
    dir="${2:?$usage}"; site="${3:-}"
    [[ -d "$dir" ]] || { echo "jit_cache.sh: no folder $dir: carry .gpu-wheels/jit-cache or drop the restore"; exit 2; }
    mkdir -p "$cache"; found=0
    for tgz in "$dir"/flashinfer-jit-*.tgz; do
      [[ -e "$tgz" ]] || continue
      version=$(basename "$tgz" .tgz); version="${version#flashinfer-jit-}"
      # the tgz's own stamp, from a scratch copy: a file this host has already is kept and may differ
      scratch=$(mktemp -d); tar xzf "$tgz" -C "$scratch"
      carried=""; [[ -d "$scratch/flashinfer/$version" ]] && carried=$(stamp "$scratch/flashinfer/$version")
      rm -rf "$scratch"
      tar xzf "$tgz" -C "$cache" --skip-old-files; found=$((found + 1))
      if [[ -n "$carried" && "$(stamp "$cache/flashinfer/$version")" == "$carried" ]]; then
        echo "$carried" > "$cache/flashinfer/$version/.jit_cache_saved"
      fi
      echo "jit cache: restored $(basename "$tgz" .tgz | sed 's/^flashinfer-jit-/FlashInfer /') into $cache/flashinfer"
      [[ -n "$site" ]] && place_aot "$version" "$site"
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
      now=$(stamp "$version_dir")
      if [[ "$(cat "$version_dir/.jit_cache_saved" 2>/dev/null)" == "$now" ]]; then
        echo "jit cache: FlashInfer $version unchanged since this host saved it or restored it; not saved again"
        continue
      fi
      tar czf "$out/flashinfer-jit-$version.tgz" -C "$cache" --exclude='*.lock' --exclude=.jit_cache_saved \
        "flashinfer/$version"
      echo "$now" > "$version_dir/.jit_cache_saved"
      echo "jit cache: saved FlashInfer $version as $out/flashinfer-jit-$version.tgz"
    done
    ;;
  *) echo "jit_cache.sh: '${1:-}' is no action: $usage"; exit 2 ;;
esac
