"""Whether Model Runner V2 builds our graphed standalone draft model speculator, and the one override that makes it.

Why here: MRV2's runner builds its speculator in ``GPUModelRunner.__init__`` through ``init_speculator``
(``v1/worker/gpu/spec_decode/__init__.py``), which imports ``StandaloneARSpeculator`` from
``spec_decode.standalone_ar.speculator`` inside the function, at the call, for ``method: draft_model``. vLLM 0.33.0
builds MRV2's runner inside ``Worker.init_device``. So swapping that one module attribute for the one
``init_device`` call of our worker reaches exactly that construction (``patch.overrides.overridden``: checked to
exist, restored on return or raise), and nothing else: every other method keeps vLLM's speculator class.

Our class (``spec_decode.standalone_ar``) is installed only where it is exact and its hook points were checked:
vLLM in ``mrv2_standalone_graphs`` (``version_gate``), ``PORTABLE_SPEC_DRAFT_GRAPH`` unset or ``full`` (``none`` or
``piecewise``: vLLM's class), a graph mode with FULL decode graphs, no eager flag, and none of what its graphs are not
keyed on (LoRA, adaptive verification's acceptance estimator, watermarked drafts). Each decline is one log line.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Iterator

from portable_spec.envs import DRAFT_GRAPH_ENV
from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.patch.overrides import overridden
from portable_spec.vllm_adapter.platform.drafter_request import requested_mode

logger = logging.getLogger("portable_spec.vllm_adapter")

FEATURE = "mrv2_standalone_graphs"
METHOD = "draft_model"


def declined(vllm_config: Any) -> str | None:
    """Why MRV2's standalone draft model keeps vLLM's eager speculator under ``vllm_config`` (one phrase), or None
    where ours applies. Only asked for ``method: draft_model`` under Model Runner V2."""
    spec = vllm_config.speculative_config
    compilation = vllm_config.compilation_config
    if (mode := requested_mode()) != "full":
        return f"{DRAFT_GRAPH_ENV}={mode}"
    if spec.enforce_eager or (vllm_config.model_config is not None and vllm_config.model_config.enforce_eager):
        return "enforce_eager=True"
    if compilation.cudagraph_mode.decode_mode().name != "FULL":
        return f"cudagraph_mode={compilation.cudagraph_mode.name} has no FULL decode graphs"
    if vllm_config.lora_config is not None:
        return "LoRA: the decode graphs are not keyed on adapters"
    if getattr(spec, "enable_adaptive_verification", False):
        return "adaptive verification: its acceptance estimator is not recorded in the decode graphs"
    if getattr(vllm_config, "watermark_config", None) is not None:
        return "watermarking: the watermarked draft sampler is not recorded in the decode graphs"
    if int(vllm_config.parallel_config.data_parallel_size or 1) > 1:
        return "data parallel: the decode dispatch would need a cross-rank agreement"
    return None


def applies(vllm_config: Any) -> bool:
    """Whether our class replaces vLLM's for this config; logs why not (once per reason kind) where it does not."""
    spec = vllm_config.speculative_config
    if not vllm_config.use_v2_model_runner or spec is None or spec.method != METHOD:
        return False
    if version_gate.say_unsupported(FEATURE, logger):
        return False
    if (reason := declined(vllm_config)) is not None:
        logger.info("portable_spec: Model Runner V2's draft model runs vLLM's eager speculator (%s)", reason)
        return False
    return True


@contextlib.contextmanager
def installed(vllm_config: Any) -> Iterator[bool]:
    """While the body runs (our worker's ``init_device``), MRV2's ``init_speculator`` builds our graphed class for
    ``draft_model`` where it ``applies``; yields whether it does. Nothing is swapped otherwise."""
    if not applies(vllm_config):
        yield False
        return
    import vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator as standalone_module

    from portable_spec.vllm_adapter.spec_decode.standalone_ar import GraphedStandaloneARSpeculator

    logger.info("portable_spec: Model Runner V2's draft model decode steps run FULL graphs (%s)",
                GraphedStandaloneARSpeculator.__name__)
    with overridden(standalone_module, "StandaloneARSpeculator", GraphedStandaloneARSpeculator):
        yield True
