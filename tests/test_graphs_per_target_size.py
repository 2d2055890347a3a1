"""Live graphs one target capture size costs, for every cudagraph mode vLLM has: a FULL graph is one executable,
PIECEWISE one per piece (vLLM splits the model at each attention layer: layers + 1 pieces), FULL_AND_PIECEWISE both.

Why: the MUSA plan prunes capture sizes to torchada's cap with this count; one piece too few under
FULL_AND_PIECEWISE lets the planned graphs exceed the cap, which the musa-sim budget part (FULL only) never sees."""

from __future__ import annotations

import pytest

from portable_spec_harness.model_zoo import build_pair
from portable_spec.vllm_adapter.platform.config_hook import graphs_per_target_size
from shared_zoo import shared_zoo


@pytest.fixture(scope="module")
def config(vllm_platform, tmp_path_factory):
    from vllm.engine.arg_utils import EngineArgs

    pair = build_pair("llama_eagle", shared_zoo(tmp_path_factory))
    return EngineArgs(model=pair["target"], skip_tokenizer_init=True, max_num_seqs=8, max_model_len=512,
                      speculative_config=pair["speculative_config"]).create_engine_config()


def test_every_cudagraph_mode_counts_a_full_graph_and_each_piece(config):
    from vllm.config.compilation import CUDAGraphMode

    layers = config.model_config.hf_config.num_hidden_layers
    assert layers >= 1
    pieces = layers + 1  # the pieces between and around the attention layers vLLM splits at
    counted = {}
    for mode in CUDAGraphMode:
        config.compilation_config.cudagraph_mode = mode
        full = 1 if mode.has_full_cudagraphs() else 0
        piecewise = pieces if mode.has_piecewise_cudagraphs() else 0
        counted[mode.name] = graphs_per_target_size(config)
        assert counted[mode.name] == max(1, full + piecewise), (mode, counted)
    assert counted["FULL_AND_PIECEWISE"] == counted["FULL"] + counted["PIECEWISE"] == 1 + pieces
    assert {"NONE", "FULL", "PIECEWISE", "FULL_AND_PIECEWISE", "FULL_DECODE_ONLY"} <= set(counted)
