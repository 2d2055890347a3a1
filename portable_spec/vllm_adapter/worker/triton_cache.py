"""The Triton cache folder our boot warm-ups build their kernels in, and the engine serves in after them: the one the
engine's process had when our runner was built (the caller's ``TRITON_CACHE_DIR``, or Triton's own default where it
was unset), not the one compiling the model left behind.

Why the warm-ups build there: a boot that compiles the model leaves ``TRITON_CACHE_DIR`` pointing into that model's
compile-cache folder (inductor sets it, where unset, as it builds its first kernel: ``cache_dir_utils.triton_cache_dir``
under the ``inductor_cache`` vLLM points inductor at), so the warm-up's kernels were written there. A boot that loads
the compiled model builds no inductor kernel; the variable stays unset and the same kernels were looked up in Triton's
default folder, where the compiling boot had put none: the first restart compiled every one of them again (the
warm-up's log line reads "N compiled, 0 from the disk cache" and names the folder). Building them in the folder the
process started with gives the compiling boot and every loading boot one folder. The warm-ups run vLLM's fused-MoE,
sampler, rejection and drafter-bookkeeping kernels; what compiling the model saved stays where vLLM and inductor put it.

Why the engine then serves in that same folder (the variable is not put back): Triton builds each kernel's launcher, a
small C module, at the kernel's first launch in the process, and keys it by the launcher's source alone (the kernel's
argument types and constexpr values, ``triton.runtime.build.compile_module_from_src``), looked up in the folder the
variable names at that moment; a miss runs the C compiler (a fraction of a second each). vLLM compiles many
specialisations it never launches at boot (its JIT warm-up registry: every batch size of the top-p pipeline), whose
launchers the warm-ups built in this folder for a sibling specialisation. With the variable put back to inductor's
folder, a compiling boot's first sampled batch of a new size rebuilt those launchers there: a pause with no kernel
compiled, which a loading boot (one folder) did not show. So the folder chosen for the warm-ups stays the process's
folder: every later build, inductor's too, lands where a restart looks.

The folder is named in the variable even where the process had it unset (Triton's default then). Left unset, it did
not hold: the warm-ups build inductor kernels of their own on a compiling boot (sampler and drafter code vLLM compiles
with ``torch.compile``), and inductor's ``CachingAutotuner`` sets ``TRITON_CACHE_DIR`` where it finds it unset, as it
is built. Every Triton kernel after that one went to inductor's folder, so the restart found the warm-up's first
kernel on disk and compiled the other seven again, under the very same keys (the key line showed it).

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

from portable_spec.envs import set_triton_cache_dir, triton_cache_dir


def serve_in_start_folder(at_start: str | None) -> str | None:
    """From now on, for the boot warm-ups and the serving after them, ``TRITON_CACHE_DIR`` names ``at_start`` or,
    where that is None (unset when recorded), the folder Triton uses when it is unset, so nothing that sets it "where
    unset" moves a later build. Not put back (the module docstring says why). Returns the folder (None only where
    Triton is not importable: the variable is then left as ``at_start`` says)."""
    folder = at_start if at_start is not None else tritons_default_folder()
    if triton_cache_dir() != folder:
        set_triton_cache_dir(folder)
    return folder


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
