"""The Triton cache folder our boot warm-ups build their kernels in: the one the engine's process had when our runner
was built (the caller's ``TRITON_CACHE_DIR``, or Triton's own default where it was unset), not the one compiling the
model left behind.

Why: a boot that compiles the model leaves ``TRITON_CACHE_DIR`` pointing into that model's compile-cache folder
(inductor sets it, where unset, as it builds its first kernel: ``cache_dir_utils.triton_cache_dir`` under the
``inductor_cache`` vLLM points inductor at), so the warm-up's kernels were written there. A boot that loads the compiled
model builds no inductor kernel; the variable stays unset and the same kernels were looked up in Triton's default
folder, where the compiling boot had put none: the first restart compiled every one of them again (the warm-up's log
line reads "N compiled, 0 from the disk cache" and names the folder). Building them in the folder the process started
with gives the compiling boot and every loading boot one folder. The warm-ups run vLLM's fused-MoE, sampler, rejection
and drafter-bookkeeping kernels; what compiling the model saved stays where vLLM and inductor put it (a kernel inductor
builds during the warm-ups lands in the same folder, counted in the line), and the variable is put back when the
warm-ups end.

The folder is named in the variable for the warm-ups even where the process had it unset (Triton's default then).
Left unset, it did not hold: the warm-ups build inductor kernels of their own on a compiling boot (sampler and drafter
code vLLM compiles with ``torch.compile``), and inductor's ``CachingAutotuner`` sets ``TRITON_CACHE_DIR`` where it
finds it unset, as it is built. Every Triton kernel after that one went to inductor's folder, so the restart found the
warm-up's first kernel on disk and compiled the other seven again, under the very same keys (the key line showed it).

A caller's ``TRITON_CACHE_DIR`` is kept as given, as vLLM keeps it (0.33.0's ``initialize_inductor_cache`` calls it a
caller override).

The folder is not the whole key: Triton keys a kernel by its source and specialisation, its options, the version of
the ``ptxas`` it assembles with, and a few variables. The ``ptxas`` version is fixed for the process the first time
Triton asks (it caches the answer), and a compiling boot asks before inductor points ``TRITON_PTXAS_PATH`` at torch's
own ``ptxas``, so both kinds of boot key with Triton's bundled one; we leave the variable alone, since setting it
early would key a loading boot apart from a compiling one. ``PORTABLE_SPEC_LOG_TRITON_KEYS=on`` logs every warm-up
build's key parts (``triton_builds.counted_triton_builds``), to tell two boots' keys apart.

Under Model Runner V2 our worker records the folder before vLLM builds the runner (``gpu_worker``), and vLLM's
warm-up with our sampled rounds runs in the recorded folder (``mrv2_warmup.with_sampled_rounds``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from portable_spec.envs import set_triton_cache_dir, triton_cache_dir


@contextlib.contextmanager
def triton_cache_as(at_start: str | None) -> Iterator[str | None]:
    """While the block runs, ``TRITON_CACHE_DIR`` names ``at_start`` or, where that is None (unset when recorded), the
    folder Triton uses when it is unset, so nothing that sets it "where unset" moves the block's builds; what it was is
    put back after, also when the block raises. Yields the folder (None only where Triton is not importable: then the
    variable is left as ``at_start`` says)."""
    before = triton_cache_dir()
    folder = at_start if at_start is not None else tritons_default_folder()
    if before == folder:
        yield folder
        return
    set_triton_cache_dir(folder)
    try:
        yield folder
    finally:
        set_triton_cache_dir(before)


def tritons_default_folder() -> str | None:
    """The folder Triton builds in while ``TRITON_CACHE_DIR`` is unset (its cache knob read with the variable
    unset for the moment, then put back), or None where Triton is not importable."""
    try:
        from triton import knobs
    except ImportError:
        return None
    before = triton_cache_dir()
    set_triton_cache_dir(None)
    try:
        return str(knobs.cache.dir)
    finally:
        set_triton_cache_dir(before)
