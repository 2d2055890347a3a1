"""``VLLM_PLATFORM=musa`` with vllm-musa installed: vllm-musa's platform class with our hooks on top.

vLLM imports this module only when our probe answers with it (``vllm_musa_stack.py``: vllm-musa installed, and
``VLLM_PLUGINS`` keeping its platform plugin out and its general plugin in). vllm-musa's class is resolved here by
its qualname (``vllm_musa_contract.PLATFORM_QUALNAME``), so nothing of ours imports vllm-musa anywhere else.

Everything stays vllm-musa's (device identity, MCCL communicator, its compiled ops and object patches, attention
selection over its backends, sleep mode, its config defaults) except what the mixins add: the capture-size planner
and torchada's live-graph budget (``PortableSpecPlatformMixin`` around vllm-musa's own ``check_and_update_config``,
which runs first, so its DFlash block-aligned sizes are what our planner starts from), our worker in place of
``MTGPUWorker`` when the user left ``worker_cls`` on "auto" (``PortableVllmMusaWorker``: vllm-musa's worker with our
V1 runner and substitutes), and the one graph pool (``SharedPoolMixin``; vllm-musa leaves the pool to vLLM's base).

Two class attributes tell our worker and drafter policy what vllm-musa does itself: the kernels it patches (our
substitute for each is left to it) and the drafters it captures in FULL graphs itself (ours steps aside for those).
Declared and tested against a stand-in (lane vllm-musa-contract); not run on MUSA hardware.
"""

from __future__ import annotations

from typing import ClassVar, Mapping

from vllm.utils.import_utils import resolve_obj_by_qualname

from portable_spec.vllm_adapter.platform import vllm_musa_contract as contract
from portable_spec.vllm_adapter.platform.base import PortableSpecPlatformMixin, SharedPoolMixin
from portable_spec.vllm_adapter.platform.qualnames import COMPOSED_MUSA_WORKER
from portable_spec.vllm_adapter.platform.vllm_musa_stack import drafter_left_to_vllm_musa

VllmMusaPlatform = resolve_obj_by_qualname(contract.PLATFORM_QUALNAME)
"""vllm-musa's ``MUSAPlatform`` (its MTML or non-MTML class, whichever it chose at import)."""


class PortableVllmMusaPlatform(PortableSpecPlatformMixin, SharedPoolMixin, VllmMusaPlatform):  # type: ignore[misc]
    port_name = "musa"
    worker_cls = COMPOSED_MUSA_WORKER
    stack: ClassVar[str] = contract.DISTRIBUTION
    substitutes_left_to_stack: ClassVar[Mapping[str, str]] = contract.DEFERRED_SUBSTITUTES
    """Our MUSA substitutes whose kernel vllm-musa patches itself: not bound here (``worker.gpu_worker``)."""

    @classmethod
    def drafter_left_to_stack(cls, method: str) -> str | None:
        """Why vllm-musa captures this drafter in FULL graphs itself (our policy then leaves it alone), or None."""
        return drafter_left_to_vllm_musa(method)
