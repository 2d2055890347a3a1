"""Which drafts vLLM compiles, as the config hook reads it from the installed vLLM's model sources (held here to the
imported classes): a draft it does not compile costs no PIECEWISE graphs. Why: the GPU (vLLM 0.28.0, musa-sim) held
32 live graphs beside our 9 for MiMo's MTP head where the count planned 50, because it gave the uncompiled head
layers + 1 pieces per size. If vLLM starts compiling a head (or stops), the expectation below fails and the count must
follow."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.platform.config_hook import target_graph_cost
from portable_spec.vllm_adapter.platform.graph_pieces import (classes_compile, compiled_by_vllm, draft_pieces,
                                                              model_module, pieces, source_compiles)
from shared_zoo import shared_zoo
from vllm_configs import zoo_config

DRAFT_COMPILED = {"mimo_ctx_mtp": False, "deepseek_mla_mtp": True, "llama_eagle": True, "llama_ctx_eagle3": True,
                  "qwen3_ctx_dflash": True, "llama_ctx_draft_model": True}
"""Each zoo pair's draft: does vLLM compile it (``@support_torch_compile`` in its model's module)?"""


@pytest.mark.parametrize("pair,compiled", sorted(DRAFT_COMPILED.items()))
def test_the_drafts_vllm_compiles(vllm_platform, tmp_path_factory, pair, compiled):
    config = zoo_config(pair, shared_zoo(tmp_path_factory))
    draft = config.speculative_config.draft_model_config
    assert compiled_by_vllm(draft) is compiled, (pair, draft.architectures)
    expected = pieces(draft, config.parallel_config) if compiled else 0
    assert draft_pieces(draft, config.parallel_config, fallback=99) == expected
    assert expected != 99 and (expected > 0) is compiled


@pytest.mark.skipif(not version_gate.has("v1_full_drafter"), reason=str(version_gate.why_not("v1_full_drafter")))
def test_an_uncompiled_mtp_head_adds_no_pieces_to_the_v1_count(vllm_platform, tmp_path_factory):
    """MiMo's MTP pair under FULL_AND_PIECEWISE: each size costs the target's pieces only."""
    config = zoo_config("mimo_ctx_mtp", shared_zoo(tmp_path_factory))
    target = pieces(config.model_config, config.parallel_config)
    assert target > 1 and pieces(config.speculative_config.draft_model_config, config.parallel_config) > 0
    assert target_graph_cost(config) == (target, True)


def test_an_architecture_vllm_cannot_resolve_counts_as_compiled(vllm_platform):
    """The safe side under a cap: an unknown model is counted with its pieces, and a config without architectures
    too."""
    unknown = SimpleNamespace(architectures=["NoSuchDraftForCausalLM"], get_num_layers=lambda parallel: 2)
    assert compiled_by_vllm(unknown) is True
    assert draft_pieces(unknown, None, fallback=7) == 3
    assert compiled_by_vllm(SimpleNamespace(architectures=None)) is True
    assert draft_pieces(SimpleNamespace(architectures=None), None, fallback=7) == 7  # no layer count: the fallback


def speculative_modules() -> list[str]:
    """The modules of every draft architecture this vLLM registers, and of the zoo's targets."""
    from vllm.model_executor.models import registry

    archs = [*registry._SPECULATIVE_DECODING_MODELS, "LlamaForCausalLM", "Qwen3ForCausalLM", "MixtralForCausalLM",
             "DeepseekV2ForCausalLM", "MiMoForCausalLM"]
    return sorted({m for m in (model_module((a,)) for a in archs) if m})


def test_reading_a_modules_source_agrees_with_its_imported_classes(vllm_platform):
    """The config hook reads a module not yet imported from its source (vLLM keeps model modules out of the front-end
    process); that reading must be what importing it shows, for every draft module this vLLM has."""
    import importlib

    modules = speculative_modules()
    compared, compiled = 0, 0
    for name in modules:
        read = source_compiles(name)
        try:
            module = importlib.import_module(name)
        except Exception:  # a module that cannot be imported on this host: its reading cannot be checked here
            continue
        assert read is not None and read == classes_compile(module), name
        compared += 1
        compiled += read
    assert compared >= 10 and 0 < compiled < compared, (compared, compiled, len(modules))


def test_a_module_without_source_counts_as_compiled(vllm_platform):
    from portable_spec.vllm_adapter.platform.graph_pieces import module_compiles

    assert source_compiles("portable_spec_no_such_module") is None
    assert module_compiles("portable_spec_no_such_module") is True
