"""The designed-weights model loader (real-shape harness only): ``--load-format portable_spec_designed``.

Registered through vLLM's loader registry (``register_model_loader``) by ``register``, the function of the general
plugin the harness writes onto ``PYTHONPATH`` (``portable_spec_harness.real_shapes.plugin``); nothing the product
installs registers it, and ``vllm serve`` loads it only under that ``PYTHONPATH`` (census entry "designed-weights
model loader").

For a model folder built by ``python -m portable_spec_harness.real_shapes build --mode designed`` it reads the
folder's marker and config.json, makes every weight on the model's device (``real_shapes.design``) and hands them,
under their checkpoint names, to the model's own ``load_weights`` (vLLM maps, stacks and shards them as for a real
checkpoint). Then it checks that every parameter was written (each is NaN-filled first; the heads that share the
target's embeddings leave theirs to the proposer) and that the construction holds on the device: the target's greedy
token and margin for every token, a draft model's (against its successor map ``g``) for every token, the EAGLE-3
head's for every token it can see, its RoPE profile up to ``max_model_len`` (``design.self_check``). Any failure is one line naming the fix.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import torch
from torch import nn
from vllm.config import ModelConfig
from vllm.model_executor.model_loader import register_model_loader
from vllm.model_executor.model_loader.base_loader import BaseModelLoader

from portable_spec.errors import PortableSpecError
from portable_spec_harness.real_shapes import design
from portable_spec.logs import share_vllm_log_handlers

LOAD_FORMAT = design.FORMAT
logger = logging.getLogger("portable_spec.vllm_adapter")
_state = {"registered": False}


class DesignedWeightsLoader(BaseModelLoader):
    """Writes a designed model's weights on its device (see the module docstring)."""

    def download_model(self, model_config: ModelConfig) -> None:
        design.read_marker(model_config.model)  # nothing to download; a folder without a marker fails here

    def load_weights(self, model: nn.Module, model_config: ModelConfig) -> None:
        started = time.perf_counter()
        marker, spec = design.read_marker(model_config.model)
        config = json.loads((Path(model_config.model) / "config.json").read_text())
        role, variant = marker["role"], marker["variant"]
        params = dict(model.named_parameters())
        device = next(iter(params.values())).device
        with torch.no_grad():
            for param in params.values():
                if param.is_floating_point():
                    param.fill_(float("nan"))
            model.load_weights(design.weights(role, config, spec, marker["family"], variant, device,
                                              model_config.dtype))
        unwritten = sorted(name for name, param in params.items()
                           if param.is_floating_point() and bool(torch.isnan(param).any()))
        shared = {name for name in unwritten  # a head's embeddings are the target's; a draft model writes its own
                  if role in ("eagle", "eagle3") and name.endswith("embed_tokens.weight")}
        if set(unwritten) - shared:
            raise PortableSpecError(f"real_shapes: the designed {role} left parameters unwritten: "
                                    f"{', '.join(sorted(set(unwritten) - shared))}; the construction does not match "
                                    f"{type(model).__name__}")
        report = design.self_check(role, config, spec, variant, device, model_config.dtype,
                                   model_config.max_model_len, loaded=_loaded_tensors(params, role, spec))
        share_vllm_log_handlers()  # in this process vLLM's logger has its handlers by now
        logger.info("real_shapes: designed %s weights (%s%s) written on %s in %.1f s: %s", role,
                    marker["family"], f", {variant} head" if variant else "", device,
                    time.perf_counter() - started, report)


def _loaded_tensors(params: dict[str, nn.Parameter], role: str, spec: design.Design) -> dict[str, torch.Tensor]:
    """What vLLM now holds for the readout check, where it holds whole tensors (one rank; vocabulary padding cut)."""
    whole = {"embed_tokens": "model.embed_tokens.weight", "lm_head": "lm_head.weight"}
    wanted = {"target": whole, "draft_model": whole, "eagle3": {"lm_head": "lm_head.weight"}}.get(role, {})
    rows = {"embed_tokens": spec.vocab_size, "lm_head": spec.active if role == "eagle3" else spec.vocab_size}
    out = {}
    for key, name in wanted.items():
        param = params.get(name)
        if param is not None and param.shape[0] >= rows[key]:
            out[key] = param.detach()[:rows[key]]
    return out


def register() -> None:
    """The general plugin's function: register the loader once per process (vLLM calls it in every process)."""
    if _state["registered"]:
        return
    share_vllm_log_handlers()
    register_model_loader(LOAD_FORMAT)(DesignedWeightsLoader)
    _state["registered"] = True
