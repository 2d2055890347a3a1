"""The capture-size planner inside a real vLLM 0.26.0 ``VllmConfig`` built by ``EngineArgs.create_engine_config()``
(platform pinned by conftest: ``CpuGraphTestPlatform`` carries the same hooks as our CUDA/ROCm/MUSA classes)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vllm_configs import engine_config, speculative

QWEN3 = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 256,
         "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 64, "vocab_size": 1024, "max_position_embeddings": 2048, "torch_dtype": "bfloat16",
         "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False}
LLAMA = {**QWEN3, "architectures": ["LlamaForCausalLM"], "model_type": "llama"}
DFLASH = {**QWEN3, "architectures": ["DFlashDraftModel"], "num_hidden_layers": 1, "layer_types": ["full_attention"],
          "dflash_config": {"mask_token_id": 1000, "target_layer_ids": [0, 1]}, "block_size": 9}
EAGLE = {**LLAMA, "architectures": ["EagleLlamaForCausalLM"], "num_hidden_layers": 1}


def model_dir(root: Path, name: str, config: dict) -> str:
    path = root / name
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    return {"qwen3": model_dir(root, "qwen3", QWEN3), "dflash": model_dir(root, "dflash", DFLASH),
            "llama": model_dir(root, "llama", LLAMA), "eagle": model_dir(root, "eagle", EAGLE)}


def assert_valid_size_list(cc) -> None:
    sizes = cc.cudagraph_capture_sizes
    assert sizes == sorted(set(sizes)) and sizes[-1] == cc.max_cudagraph_capture_size


@pytest.fixture(scope="module")
def dflash_config(vllm_platform, models):
    return engine_config(models["qwen3"], speculative("dflash", models["dflash"], 8), max_num_seqs=8)


def test_dflash_k8_capture_sizes_are_block_aligned(dflash_config):
    cc = dflash_config.compilation_config
    assert cc.cudagraph_capture_sizes == [9, 18, 36, 72]
    assert_valid_size_list(cc)
    plan = dflash_config.additional_config["portable_spec"]["plan"]
    assert plan["first_step"] == {"query_len": 9, "sizes": [9, 18, 36, 72], "mode": "FULL"}
    assert plan["chain_step"] is None
    assert dflash_config.additional_config["portable_spec"]["user_sizes"] is None


def test_config_replace_reruns_the_hook_idempotently(dflash_config, vllm_platform):
    replaced = dataclasses.replace(dflash_config)
    assert replaced.compilation_config.cudagraph_capture_sizes == [9, 18, 36, 72]
    assert replaced.additional_config == dflash_config.additional_config
    type(vllm_platform).check_and_update_config(replaced)
    assert replaced.compilation_config.cudagraph_capture_sizes == [9, 18, 36, 72]
    assert_valid_size_list(replaced.compilation_config)


def test_eagle_sizes_are_multiples_of_one_plus_k_and_drafter_steps_are_recorded(vllm_platform, models):
    cfg = engine_config(models["llama"], speculative("eagle", models["eagle"], 3), max_num_seqs=16)
    cc = cfg.compilation_config
    assert cc.cudagraph_capture_sizes and all(s % 4 == 0 for s in cc.cudagraph_capture_sizes)
    assert_valid_size_list(cc)
    plan = cfg.additional_config["portable_spec"]["plan"]
    assert plan["first_step"]["query_len"] == 4
    assert plan["chain_step"]["query_len"] == 1 and plan["chain_step"]["sizes"] == [1, 2, 4, 8, 16]


def test_user_sizes_are_recorded_before_vllm_fills_them(vllm_platform, models):
    cfg = engine_config(models["qwen3"], speculative("dflash", models["dflash"], 8), max_num_seqs=8,
                        compilation_config={"cudagraph_capture_sizes": [3, 9, 20, 27]})
    assert cfg.additional_config["portable_spec"]["user_sizes"] == [3, 9, 20, 27]
    assert cfg.compilation_config.cudagraph_capture_sizes == [9, 27]
    assert_valid_size_list(cfg.compilation_config)


def test_no_spec_config_leaves_vllm_sizes_alone(vllm_platform, models):
    cfg = engine_config(models["qwen3"], max_num_seqs=8)
    assert cfg.compilation_config.cudagraph_capture_sizes == [1, 2, 4, 8, 16]
    assert "plan" not in cfg.additional_config.get("portable_spec", {})


def test_musa_platform_config_and_worker_gate_musa_sim(models):
    """musa-sim: PortableMusaPlatform pinned in a fresh process (torch_musa absent, the port injected)."""
    code = textwrap.dedent(f"""
        import torch
        torch.utils.rename_privateuse1_backend("musa")
        import vllm.platforms
        from portable_spec.ports.musa_port import MusaPort
        from portable_spec_harness.musa_sim import SimulatedMusa
        from portable_spec.ports.current import install_device_port
        from portable_spec.vllm_adapter.platform.musa import PortableMusaPlatform
        install_device_port(MusaPort(device_module=SimulatedMusa(), label="musa-sim"))
        vllm.platforms._current_platform = PortableMusaPlatform()
        from vllm.engine.arg_utils import EngineArgs
        cfg = EngineArgs(model={models['qwen3']!r}, skip_tokenizer_init=True, max_num_seqs=8, speculative_config={{
            "method": "dflash", "model": {models['dflash']!r}, "num_speculative_tokens": 8}}).create_engine_config()
        print("WORKER", cfg.parallel_config.worker_cls)
        print("SIZES", cfg.compilation_config.cudagraph_capture_sizes)
        print("DEVICE", cfg.device_config.device_type)
        from vllm.v1.attention.selector import AttentionSelectorConfig
        dflash_draft = AttentionSelectorConfig(head_size=64, dtype=torch.bfloat16, kv_cache_dtype="auto",
                                               block_size=16, use_non_causal=True)
        print("ATTN", vllm.platforms.current_platform.get_attn_backend_cls(None, dflash_draft))
        try:
            vllm.platforms.current_platform.get_attn_backend_cls("FLASH_ATTN", dflash_draft)
        except Exception as exc:
            print("REFUSED", type(exc).__name__, str(exc).splitlines()[0])
        from portable_spec.vllm_adapter.worker.musa_worker import MusaWorker
        worker = MusaWorker(cfg, local_rank=0, rank=0, distributed_init_method="tcp://127.0.0.1:29555")
        try:
            worker.init_device()
        except Exception as exc:  # no device here: it must fail past the device-type gate, not at it
            import traceback
            frames = [f.name for f in traceback.extract_tb(exc.__traceback__)]
            print("INIT", type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
            print("FRAMES", " ".join(frames))
        print("AFTER", worker.device_config.device_type)
        from vllm.v1.spec_decode import utils  # its defining module: a binding site in every version
        kernel = utils.eagle_prepare_next_token_padded_kernel
        print("KERNEL", getattr(kernel, "fn", kernel).__module__)
    """)
    env = {k: v for k, v in os.environ.items() if k != "VLLM_PLATFORM"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.split(" ")[0].isupper())
    assert lines["WORKER"] == "portable_spec.vllm_adapter.worker.musa_worker.MusaWorker"
    assert lines["SIZES"] == "[9, 18, 36, 72]"
    assert lines["DEVICE"] == "musa"
    # declared table, not a device run: without the mate package MUSA FLASH_ATTN is skipped, TRITON_ATTN is chosen
    assert lines["ATTN"] == "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"
    assert lines["REFUSED"].startswith("PortableSpecError") and "FLASH_ATTN" in lines["REFUSED"]
    assert "Unsupported device type" not in lines["INIT"]
    frames = lines["FRAMES"].split()
    # ours -> vLLM's instrument wrapper -> vLLM's init_device -> deeper: the failure lies past the device-type gate
    assert frames[1] == "init_device" and "sync_wrapper" in frames, frames
    vllm_init = frames.index("sync_wrapper") + 1
    assert frames[vllm_init] == "init_device" and len(frames) > vllm_init + 1, frames
    assert lines["AFTER"] == "musa"
    # The MUSA-Triton-safe substitute is bound on every vLLM of the span (derived per version, issue 40).
    assert lines["KERNEL"] == "portable_spec.kernels.eagle_prepare_next_token", lines["KERNEL"]


EAGLE_K = 3
"""1+K = 4: above a max capture size of 2, which vLLM's config accepts."""


def test_with_our_drafter_off_the_plan_does_not_need_the_drafters_sizes(vllm_platform, models, monkeypatch):
    """``PORTABLE_SPEC_DRAFT_GRAPH=none``: vLLM's drafter runs and needs no FULL draft size, so 1+K above the max
    capture size is no reason to stop the engine; the target keeps vLLM's sizes."""
    from portable_spec.envs import DRAFT_GRAPH_ENV

    monkeypatch.setenv(DRAFT_GRAPH_ENV, "none")
    cfg = engine_config(models["llama"], speculative("eagle", models["eagle"], EAGLE_K), max_num_seqs=4,
                        compilation_config={"max_cudagraph_capture_size": 2})
    assert cfg.compilation_config.cudagraph_capture_sizes == [1, 2]
    state = cfg.additional_config["portable_spec"]
    assert state["plan"]["first_step"]["mode"] == "NONE" and "plan_error" not in state


@pytest.mark.parametrize("compilation", [{"max_cudagraph_capture_size": 2}, {"cudagraph_capture_sizes": [1, 2]}],
                         ids=["max_size", "user_sizes"])
def test_a_plan_that_cannot_be_made_keeps_vllms_sizes_warns_once_and_leaves_the_drafter_upstream(
        vllm_platform, models, monkeypatch, caplog, compilation):
    """Our drafter on (the default), but no FULL draft graph fits: the engine still boots with vLLM's sizes, one
    warning names the reason and the vLLM settings that fix it (also across the hook's re-runs on replaced
    configs), and the drafter stays on vLLM's path."""
    from portable_spec.envs import DRAFT_GRAPH_ENV
    from portable_spec.vllm_adapter.spec_decode.policy import draft_graph_mode

    monkeypatch.delenv(DRAFT_GRAPH_ENV, raising=False)
    with caplog.at_level("WARNING", logger="portable_spec"):
        cfg = engine_config(models["llama"], speculative("eagle", models["eagle"], EAGLE_K), max_num_seqs=4,
                            compilation_config=compilation)
        type(vllm_platform).check_and_update_config(dataclasses.replace(cfg))
    assert cfg.compilation_config.cudagraph_capture_sizes == [1, 2]
    assert_valid_size_list(cfg.compilation_config)
    warnings = [r.getMessage() for r in caplog.records if "no capture plan" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert "1+num_speculative_tokens = 4 is above the max capture size 2" in warnings[0]
    assert "compilation_config.max_cudagraph_capture_size" in warnings[0] and " --" not in warnings[0]
    state = cfg.additional_config["portable_spec"]
    assert "plan" not in state and state["plan_error"] in warnings[0]
    assert draft_graph_mode(cfg) == "upstream"
