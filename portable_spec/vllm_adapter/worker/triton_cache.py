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
warm-ups end. A caller's ``TRITON_CACHE_DIR`` is kept as given, as vLLM keeps it (0.33.0's ``initialize_inductor_cache``
calls it a caller override).

The folder is not the whole key. Triton keys a kernel by its ``ptxas`` version too (the CUDA backend's ``hash``), and
inductor, as it compiles, points ``TRITON_PTXAS_PATH`` at torch's own ``ptxas`` where unset
(``compile_tasks._set_triton_ptxas_path``), which torch's CUDA wheels ship in another version than the one bundled with
Triton. A loading boot compiles nothing in inductor, so its kernels were keyed with Triton's ``ptxas`` and missed the
compiling boot's entries in the same folder. ``pin_inductors_ptxas`` makes that choice when our runner is built, for
a model inductor compiles, so both kinds of boot assemble with one ``ptxas``: the one a compiling boot used anyway.

Under Model Runner V2 our worker does both before vLLM builds the runner (``gpu_worker``), and vLLM's warm-up with our
sampled rounds runs in the recorded folder (``mrv2_warmup.with_sampled_rounds``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from portable_spec.envs import set_triton_cache_dir, triton_cache_dir, triton_ptxas_path


@contextlib.contextmanager
def triton_cache_as(at_start: str | None) -> Iterator[str | None]:
    """While the block runs, ``TRITON_CACHE_DIR`` is ``at_start`` (unset where None); what it was is put back after,
    also when the block raises."""
    before = triton_cache_dir()
    if before == at_start:
        yield at_start
        return
    set_triton_cache_dir(at_start)
    try:
        yield at_start
    finally:
        set_triton_cache_dir(before)


def inductor_compiles(compilation_config: Any) -> bool:
    """Whether vLLM compiles this model with inductor: a compilation mode other than none, and the inductor backend
    ("" is vLLM's default, inductor on CUDA-alike platforms)."""
    mode = getattr(compilation_config, "mode", None)
    return mode is not None and int(mode) != 0 and getattr(compilation_config, "backend", "") in ("", "inductor")


def pin_inductors_ptxas(compilation_config: Any) -> str | None:
    """Where inductor compiles the model: ``TRITON_PTXAS_PATH`` set now as inductor sets it when it compiles (torch's
    ``ptxas``, where the wheel ships one and the variable is unset; inductor's own later call then changes nothing).
    Returns the variable as it stands after (None: unset, Triton's bundled ``ptxas``). A model run eagerly, or a torch
    without the function, is left as vLLM leaves it."""
    if inductor_compiles(compilation_config):
        try:
            from torch._inductor.runtime.compile_tasks import _set_triton_ptxas_path
        except ImportError:
            pass
        else:
            _set_triton_ptxas_path()
    return triton_ptxas_path()
