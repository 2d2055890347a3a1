"""Which vLLM runner our zoo targets get, decided by vLLM's own rule (not by the CPU host's lack of Triton).

vLLM 0.26.0 and 0.28.0: the MoE target (Mixtral) is not a default Model Runner V2 architecture, so it runs the V1
runner, where our FULL drafter applies; the dense Llama target defaults to MRV2 unless VLLM_USE_V2_MODEL_RUNNER=0.
From 0.29 (checked on 0.33.0) both run MRV2 unless VLLM_USE_V2_MODEL_RUNNER=0: our V1 drafter does not exist there
(``version_gate``: ``v1_full_drafter``)."""

from __future__ import annotations

import pytest

from portable_spec_harness.model_zoo import build_pair
from portable_spec.vllm_adapter.patch import version_gate
from version_span import needs
from shared_zoo import shared_zoo
from vllm_configs import pair_config


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    root = shared_zoo(tmp_path_factory)
    return {name: build_pair(name, root, variant="perfect") for name in ("mixtral_eagle", "llama_eagle")}


@needs("v1_full_drafter")
def test_moe_target_runs_the_v1_runner_by_vllms_own_rule(vllm_platform, zoo, monkeypatch):
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    cfg = pair_config(zoo["mixtral_eagle"], max_num_seqs=8, max_model_len=512)
    assert cfg.model_config.is_moe
    assert cfg._is_default_v2_model_runner_model() is False
    assert cfg.use_v2_model_runner is False


@needs("v1_full_drafter")
def test_dense_target_defaults_to_mrv2_unless_v1_is_forced(vllm_platform, zoo, monkeypatch):
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    cfg = pair_config(zoo["llama_eagle"], max_num_seqs=8, max_model_len=512)
    assert not cfg.model_config.is_moe
    assert cfg._is_default_v2_model_runner_model() is True  # on a GPU host with Triton: MRV2
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    assert cfg.use_v2_model_runner is False


@pytest.mark.skipif(version_gate.has("v1_full_drafter"), reason="vLLM still runs MoE targets on the V1 runner here")
def test_every_target_runs_mrv2_where_our_v1_drafter_does_not_exist(vllm_platform, zoo, monkeypatch):
    """vLLM 0.33: no default-architecture rule; with Triton (a GPU host; this CPU host has none, so it is patched in)
    both targets run MRV2, and only VLLM_USE_V2_MODEL_RUNNER=0 gives the V1 runner."""
    import vllm.config.vllm as config_module

    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    monkeypatch.setattr(config_module, "HAS_TRITON", True)
    assert not hasattr(config_module.VllmConfig, "_is_default_v2_model_runner_model")
    for name in ("mixtral_eagle", "llama_eagle"):
        cfg = pair_config(zoo[name], max_num_seqs=8, max_model_len=512)
        assert cfg.model_config.is_moe == (name == "mixtral_eagle")
        assert cfg.use_v2_model_runner is True, name
        monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
        assert cfg.use_v2_model_runner is False, name
        monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER")
