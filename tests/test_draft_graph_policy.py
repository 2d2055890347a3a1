"""When our FULL drafter graphs apply to a real vLLM 0.26.0 config, and when vLLM's own drafter stays in charge."""

from __future__ import annotations

import pytest

from portable_spec.errors import PortableSpecError
from portable_spec_harness.model_zoo import build_pair
from portable_spec.vllm_adapter.spec_decode.policy import DRAFT_GRAPH_ENV, draft_graph_mode
from shared_zoo import shared_zoo
from vllm_configs import engine_config


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return build_pair("llama_eagle", shared_zoo(tmp_path_factory), variant="perfect")


def config(pair, *, spec_extra=None, **kwargs):
    spec = {**pair["speculative_config"], **(spec_extra or {})}
    return engine_config(pair["target"], spec, max_num_seqs=8, max_model_len=512, **kwargs)


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    monkeypatch.delenv(DRAFT_GRAPH_ENV, raising=False)


def test_eagle_with_full_target_graphs_gets_our_drafter(vllm_platform, pair):
    assert draft_graph_mode(config(pair)) == "full"


@pytest.mark.parametrize("value", ["piecewise", "none", "PIECEWISE"])
def test_env_turns_it_off(vllm_platform, pair, monkeypatch, value):
    monkeypatch.setenv(DRAFT_GRAPH_ENV, value)
    assert draft_graph_mode(config(pair)) == "upstream"


def test_bad_env_value_is_a_one_line_error(vllm_platform, pair, monkeypatch):
    monkeypatch.setenv(DRAFT_GRAPH_ENV, "always")
    with pytest.raises(PortableSpecError, match=r"^PORTABLE_SPEC_DRAFT_GRAPH='always' is not one of full, piecewise, "
                                                r"none; unset it or pick one of those$"):
        draft_graph_mode(config(pair))


@pytest.mark.parametrize("spec_extra,kwargs", [
    ({"enforce_eager": True}, {}),
    ({"disable_padded_drafter_batch": True}, {"async_scheduling": False}),
    ({}, {"compilation_config": {"cudagraph_mode": "PIECEWISE"}}),
    ({}, {"enforce_eager": True}),
])
def test_upstream_keeps_the_drafter_when_the_config_says_so(vllm_platform, pair, spec_extra, kwargs, caplog):
    with caplog.at_level("INFO", logger="portable_spec.vllm_adapter"):
        assert draft_graph_mode(config(pair, spec_extra=spec_extra, **kwargs)) == "upstream"
    assert "drafter left to upstream vLLM" in caplog.text


def test_no_speculation_is_upstream(vllm_platform, pair):
    cfg = engine_config(pair["target"], max_num_seqs=8)
    assert draft_graph_mode(cfg) == "upstream"


def test_lora_keeps_every_drafter_graph_on_vllms_path(vllm_platform, pair, caplog):
    """A LoRA config: the draft may run the target's LoRA-wrapped embedding, whose output follows each step's
    adapters, and our graphs are not keyed on them (vLLM's are: ``BatchDescriptor.has_lora``). One log line."""
    with caplog.at_level("INFO", logger="portable_spec.vllm_adapter"):
        assert draft_graph_mode(config(pair, enable_lora=True)) == "upstream"
    lines = [r.getMessage() for r in caplog.records if "drafter left to upstream vLLM" in r.getMessage()]
    assert len(lines) == 1 and "LoRA" in lines[0]


def test_a_separate_draft_model_gets_our_drafter_unless_its_vocabulary_is_mapped(vllm_platform, tmp_path_factory,
                                                                               caplog):
    """``draft_model`` with the target's vocabulary: ours. With ``use_heterogeneous_vocab`` vLLM maps ids between
    two vocabularies every step: vLLM's drafter, one log line."""
    dm = build_pair("llama_ctx_draft_model", shared_zoo(tmp_path_factory))
    cfg = config(dm)
    assert cfg.speculative_config.method == "draft_model" and draft_graph_mode(cfg) == "full"
    mapped = config(dm)
    object.__setattr__(mapped.speculative_config, "use_heterogeneous_vocab", True)
    with caplog.at_level("INFO", logger="portable_spec.vllm_adapter"):
        assert draft_graph_mode(mapped) == "upstream"
    lines = [r.getMessage() for r in caplog.records if "left to upstream" in r.getMessage()]
    assert len(lines) == 1 and "use_heterogeneous_vocab" in lines[0]


def test_a_config_no_planner_ran_for_keeps_vllms_drafter_and_the_drafter_never_replans(vllm_platform, pair, caplog):
    """vLLM's built-in platform runs no config hook, so no plan is stored (as here, with the stored state removed):
    the policy leaves the drafter to vLLM in one line naming the fix, and the drafter's plan reader refuses instead
    of re-planning with fewer inputs than the config hook has."""
    from portable_spec.vllm_adapter.platform.drafter_plan import drafter_plan

    cfg = config(pair)
    assert drafter_plan(cfg).method == "eagle"  # the hook's plan, as stored
    cfg.additional_config.pop("portable_spec")
    with caplog.at_level("INFO", logger="portable_spec.vllm_adapter"):
        assert draft_graph_mode(cfg) == "upstream"
    (line,) = [r.getMessage() for r in caplog.records if "drafter left to upstream vLLM" in r.getMessage()]
    assert line == ("portable_spec: drafter left to upstream vLLM (no capture plan: no capture planner ran for this "
                    "config (it runs in our platform's config hook; vLLM's built-in platform has none): set "
                    "VLLM_PLATFORM=cuda for our drafter graphs)")
    with pytest.raises(RuntimeError, match="none is stored"):
        drafter_plan(cfg)
