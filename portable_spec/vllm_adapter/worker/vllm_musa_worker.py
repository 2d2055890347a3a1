"""Our worker on vllm-musa: vllm-musa's ``MTGPUWorker`` with ``PortableWorker``'s ``init_device`` on top.

``PortableVllmMusaPlatform`` names it as ``worker_cls``. vllm-musa's worker is resolved here by its qualname
(``vllm_musa_contract.WORKER_QUALNAME``). The method order is ours, then vllm-musa's, then vLLM's:
``PortableWorker.init_device`` binds the MUSA substitutes vllm-musa does not patch itself and, where our drafter
applies, swaps in our V1 runner for the one call; its ``super()`` is ``MTGPUWorker.init_device`` (vllm-musa's
set-up), then vLLM's ``Worker.init_device``.

Nothing of ``MusaWorker`` is here: vllm-musa's build of vLLM already accepts ``device_type == "musa"`` in
``Worker.init_device`` (its patch 0036), so the device type stays "musa"; and its platform is CUDA-alike with a
sleep-mode allocator, so vLLM's memory-pool context needs no help.
"""

from __future__ import annotations

from vllm.utils.import_utils import resolve_obj_by_qualname

from portable_spec.vllm_adapter.platform import vllm_musa_contract as contract
from portable_spec.vllm_adapter.worker.gpu_worker import PortableWorker

MTGPUWorker = resolve_obj_by_qualname(contract.WORKER_QUALNAME)


class PortableVllmMusaWorker(PortableWorker, MTGPUWorker):  # type: ignore[misc, valid-type]
    """``PortableWorker.init_device`` around ``MTGPUWorker``'s; everything else is vllm-musa's worker."""
