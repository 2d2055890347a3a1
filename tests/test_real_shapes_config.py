"""The real-shape pairs in vLLM's own config code and loader registry (CPU; no weights): ``EngineArgs(...)
.create_engine_config()`` builds the real ``ModelConfig`` / ``SpeculativeConfig`` of each pair at its real size,
tokenizer included; the designed-weights loader is found through vLLM's registry after ``register``, and through
vLLM's plugin loader from the dist-info the harness writes (never from the product's entry points)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("vllm")
pytest.importorskip("tokenizers")

from portable_spec_harness.real_shapes import PAIR_NAMES, build_pair, plugin, serve_args  # noqa: E402
from portable_spec_harness.real_shapes import shapes  # noqa: E402

DRAFT_CLASS = {"eagle": "EagleLlamaForCausalLM", "eagle3": "Eagle3LlamaForCausalLM", "draft_model": "LlamaForCausalLM"}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("real_shapes")
    return {(name, mode): build_pair(name, mode, root / f"{name}_{mode}")
            for name in PAIR_NAMES for mode in ("dummy", "designed")}


@pytest.mark.parametrize("name", PAIR_NAMES)
@pytest.mark.parametrize("mode", ["dummy", "designed"])
def test_vllm_builds_each_pairs_config_at_its_real_size(vllm_platform, built, name, mode):
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.models import ModelRegistry

    p = shapes.pair(name)
    variant = "dummy" if mode == "dummy" else "partial"
    args = serve_args(built[(name, mode)], variant, k=3)
    spec = json.loads(args[args.index("--speculative-config") + 1])
    cfg = EngineArgs(model=args[0], load_format=args[args.index("--load-format") + 1], speculative_config=spec,
                     max_model_len=4096, max_num_seqs=8).create_engine_config()
    model, draft = cfg.model_config, cfg.speculative_config.draft_model_config
    assert model.architectures == p.target["architectures"] and model.get_vocab_size() == p.target["vocab_size"]
    assert model.get_num_layers(cfg.parallel_config) == p.target["num_hidden_layers"]
    assert model.get_hidden_size() == p.target["hidden_size"] and model.get_head_size() == 128
    assert model.get_total_num_kv_heads() == p.target["num_key_value_heads"] and str(model.dtype) == "torch.bfloat16"
    assert cfg.load_config.load_format == ("dummy" if mode == "dummy" else "portable_spec_designed")
    assert cfg.speculative_config.method == p.method and cfg.speculative_config.num_speculative_tokens == 3
    assert ModelRegistry.resolve_model_cls(draft.architectures, draft)[0].__name__ == DRAFT_CLASS[p.method]
    assert ModelRegistry.resolve_model_cls(model.architectures, model)[0].__name__ == p.target["architectures"][0]
    assert draft.get_hidden_size() == p.head["hidden_size"] and draft.get_vocab_size() == p.target["vocab_size"]
    assert draft.hf_config.num_hidden_layers == p.head["num_hidden_layers"] == (16 if p.method == "draft_model" else 1)
    if p.method == "draft_model":
        # DraftModelProposer loads with the target's load config (its _get_model passes none): the pair's load format
        # reaches the draft with nothing more; the draft reads the target's tokenizer, so its folder needs none
        assert cfg.speculative_config.draft_load_config is None and draft.tokenizer == args[0]
        assert draft.get_head_size() == 64 and draft.get_total_num_kv_heads() == 8
        assert draft.hf_config.tie_word_embeddings is (mode == "dummy")  # designed: its own lm_head (design.py)
        assert cfg.speculative_config.draft_parallel_config.tensor_parallel_size == 1
        assert draft.hf_config.rope_parameters["factor"] == 32.0
    if p.method == "eagle3":
        assert draft.hf_config.draft_vocab_size == 32000
    if p.family == "qwen3_moe":
        hf = model.hf_config
        assert (hf.num_experts, hf.num_experts_per_tok, hf.moe_intermediate_size) == (128, 8, 768)
    else:
        assert model.hf_config.rope_parameters["rope_type"] == "llama3"
    assert cfg.model_config.tokenizer == args[0] and not cfg.model_config.skip_tokenizer_init


def test_the_loader_is_found_through_vllms_registry_after_register():
    from vllm.config.load import LoadConfig
    from vllm.model_executor.model_loader import get_model_loader

    from portable_spec_harness.vllm_door import designed_loader

    designed_loader.register()
    designed_loader.register()  # once per process, however often vLLM loads the plugin
    loader = get_model_loader(LoadConfig(load_format="portable_spec_designed"))
    assert type(loader) is designed_loader.DesignedWeightsLoader


def test_vllms_plugin_loader_registers_the_loader_from_the_written_dist_info_only(tmp_path):
    """In a fresh process: the product's entry points alone leave the format unknown; the harness's dist-info on
    PYTHONPATH (VLLM_PLUGINS naming it) makes vLLM's own ``load_general_plugins`` register it."""
    script = textwrap.dedent("""
        import json
        from vllm.config.load import LoadConfig
        from vllm.model_executor.model_loader import get_model_loader
        from vllm.plugins import load_general_plugins
        load_general_plugins()
        try:
            name = type(get_model_loader(LoadConfig(load_format="portable_spec_designed"))).__name__
        except ValueError as exc:
            name = str(exc)
        print(json.dumps(name))
    """)
    base = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    # The two processes are independent (each its own environment): they run side by side, on a 2-core lane
    # machine in the time of one import of vLLM instead of two.
    procs = {label: subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
             for label, env in (("product only", {**base, "VLLM_PLUGINS": "portable_spec"}),
                                ("harness plugin", {**base, **plugin.plugin_env(tmp_path, environ=base),
                                                    "VLLM_PLUGINS": f"portable_spec,{plugin.ENTRY_POINT}"}))}
    runs = {}
    for label, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        runs[label] = json.loads(out.strip().splitlines()[-1])
    assert runs == {"product only": "Load format `portable_spec_designed` is not supported",
                    "harness plugin": "DesignedWeightsLoader"}


@pytest.mark.parametrize("name", ["llama8b_eagle3", "qwen3moe30b_eagle3"])
def test_vllm_bench_random_dataset_samples_exact_lengths_from_the_tokenizer(built, name):
    """What ``vllm bench serve --dataset-name random`` does with the pair's tokenizer (vLLM's own get_tokenizer and
    RandomDataset): ids from the whole vocabulary, every prompt exactly its input length after decode / re-encode."""
    from vllm.benchmarks.datasets import RandomDataset
    from vllm.tokenizers import get_tokenizer

    p = shapes.pair(name)
    tok = get_tokenizer(serve_args(built[(name, "dummy")])[0])
    assert tok.vocab_size == len(tok) == p.target["vocab_size"]
    bos = tok.num_special_tokens_to_add()  # Llama's tokenizer adds <|begin_of_text|>, Qwen3's nothing
    assert bos == (p.vocabulary.bos is not None)
    requests = RandomDataset(random_seed=0).sample(tok, num_requests=6, input_len=512, output_len=64)
    assert len(requests) == 6 and all(r.prompt_len == 512 - bos and r.expected_output_len == 64 for r in requests)
    for r in requests:
        assert len(tok.encode(r.prompt, add_special_tokens=False)) == 512 - bos  # decode / re-encode kept it
        assert len(tok.encode(r.prompt)) == 512  # what the server tokenizes
