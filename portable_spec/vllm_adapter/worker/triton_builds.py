"""What the boot warm-up's Triton builds were: how many compiled and how many came from Triton's disk cache, in which
folder, with which ``ptxas`` version in their keys, and (on request) every build's key parts.

Why: a restart should find the warm-up's kernels on disk (``triton_cache`` says how the folder is made the same in
every boot). Where it compiles them again, the warm-up's line shows it ("N compiled, M from the disk cache"), and
``PORTABLE_SPEC_LOG_TRITON_KEYS=on`` adds one line naming each build's key parts, so two boots' lines tell which part
differed: the source hash (the kernel's source and its specialisation: constants, pointer alignment, integer
arguments equal to 1 or divisible by 16), the options (warps, stages, the libraries it links), the variables Triton
keys on, and the ``ptxas`` version.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
import subprocess
from collections.abc import Iterator
from typing import Any

from portable_spec.envs import log_triton_keys
from portable_spec.vllm_adapter.patch.overrides import overridden

POST_COMPILE_FIELDS = frozenset({"hash", "target", "triton_version", "name", "shared", "tmem_size",
                                 "global_scratch_size", "global_scratch_align", "profile_scratch_size",
                                 "profile_scratch_align"})
"""Metadata Triton stores with a kernel that is not one of its options: the key itself, the target, and what the
compile found (shared memory, scratch sizes, the kernel's name)."""


@contextlib.contextmanager
def counted_triton_builds() -> Iterator[dict[str, Any]]:
    """Every Triton kernel build while the block runs, compiled or loaded from Triton's disk cache (Triton's
    compilation listener, chained to any listener already set and restored after), the cache directory at the start
    and the ``ptxas`` version in the keys: ``{"compiled": n, "from_disk": m, "cache_dir": dir, "ptxas": version}``,
    plus ``"keys"`` (``key_parts`` of each build, in order) where ``PORTABLE_SPEC_LOG_TRITON_KEYS=on``. The JIT hook
    ``kernel_warmup.counted_triton_compiles`` chains fires for both alike, so only this says whether a slow warm-up
    compiled or found its kernels on disk (inductor's Triton kernels, which bypass the JIT hook, are counted here
    too). Empty where this Triton has no listener."""
    builds: dict[str, Any] = {}
    try:
        from triton import knobs

        compilation = knobs.compilation
        previous = compilation.listener
        builds.update(compiled=0, from_disk=0, cache_dir=str(knobs.cache.dir), ptxas=keyed_ptxas_version(cuda_arch()))
    except (ImportError, AttributeError):
        yield builds
        return
    keys: list[dict[str, Any]] | None = builds.setdefault("keys", []) if log_triton_keys() else None

    def listener(**kwargs: Any) -> Any:
        hit = bool(kwargs.get("cache_hit"))
        builds["from_disk" if hit else "compiled"] += 1
        if keys is not None:
            keys.append(key_parts(kwargs.get("src"), kwargs.get("metadata") or {}, hit))
        return previous(**kwargs) if previous is not None else None

    with overridden(compilation, "listener", listener):
        yield builds


def cuda_arch() -> int | None:
    """The current CUDA device's architecture as Triton numbers it (90 for sm_90), or None off CUDA (ROCm and MUSA
    included: their Triton backends key no ``ptxas``)."""
    import torch

    if torch.version.cuda is None or not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def keyed_ptxas_version(arch: int | None) -> str | None:
    """The ``ptxas`` version in this process's Triton kernel keys (the CUDA backend's ``hash``), e.g. "12.8", or None
    (no architecture, or no NVIDIA backend). Triton reads it once, the first time it asks, and keeps it for the
    process, so ``TRITON_PTXAS_PATH`` set afterwards (inductor sets it when it compiles) changes no key: this asks
    Triton's own cached function, not the variable. Asking first fixes nothing a build would not: the next build asks
    the same function with the same environment."""
    if arch is None:
        return None
    try:
        from triton.backends.nvidia.compiler import get_ptxas_version

        text = get_ptxas_version(arch)
    except (ImportError, AttributeError, RuntimeError, OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"release (\d+\.\d+)", text or "")
    return found.group(1) if found else None


def key_parts(src: Any, metadata: dict[str, Any], cache_hit: bool) -> dict[str, Any]:
    """One build's key parts, each shortened to 10 hex digits: its name, whether it came from disk, the key Triton
    stored it under (``metadata["hash"]``), the source hash (``src.hash()``: source, specialisation, constants), a
    digest of its options and the variables Triton keys on (the metadata's upper-case fields)."""
    names = option_names()
    options = {k: v for k, v in metadata.items()
               if (k in names if names else k not in POST_COMPILE_FIELDS and not k.isupper())}
    variables = {k: v for k, v in metadata.items() if k.isupper()}
    try:
        source = src.hash()[:10]
    except AttributeError:
        source = None
    return {"name": getattr(src, "name", None) or str(metadata.get("name", "?")), "from_disk": cache_hit,
            "key": str(metadata.get("hash", ""))[:10], "source": source, "options": digest(options),
            "variables": digest(variables) if variables else None}


@functools.cache
def option_names() -> frozenset[str]:
    """The fields of Triton's CUDA options (what its key hashes as the options), or none where this Triton has no
    NVIDIA backend (then every metadata field but ``POST_COMPILE_FIELDS`` and the variables counts); read once."""
    try:
        from triton.backends.nvidia.compiler import CUDAOptions
    except ImportError:
        return frozenset()
    return frozenset(CUDAOptions.__dataclass_fields__)


def digest(values: dict[str, Any]) -> str:
    """10 hex digits of the values, alike for a fresh build's options (tuples, a target object) and the same options
    read back from the disk cache's JSON (lists)."""
    text = json.dumps(values, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def builds_summary(builds: dict[str, Any]) -> str:
    """The warm-up line's part for ``counted_triton_builds``: "; Triton builds: 5 compiled, 7 from the disk cache DIR,
    ptxas 12.8" (no ptxas part where the keys hold none)."""
    if not builds:
        return ""
    ptxas = f", ptxas {builds['ptxas']}" if builds.get("ptxas") else ""
    return (f"; Triton builds: {builds['compiled']} compiled, {builds['from_disk']} from the disk cache "
            f"{builds['cache_dir']}{ptxas}")


def keys_line(builds: dict[str, Any]) -> str | None:
    """The line ``PORTABLE_SPEC_LOG_TRITON_KEYS=on`` adds: "Triton build keys (N, ptxas 12.8): name compiled key K
    source S options O[ variables V]; ..." in build order; None where keys were not asked for."""
    keys = builds.get("keys")
    if keys is None:
        return None
    ptxas = f", ptxas {builds['ptxas']}" if builds.get("ptxas") else ""
    parts = [f"{k['name']} {'from disk' if k['from_disk'] else 'compiled'} key {k['key']} source {k['source']} "
             f"options {k['options']}" + (f" variables {k['variables']}" if k["variables"] else "") for k in keys]
    return f"Triton build keys ({len(keys)}{ptxas}): " + ("; ".join(parts) or "none")
