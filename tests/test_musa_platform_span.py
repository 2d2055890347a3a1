"""Our MUSA platform class against the installed vLLM's ``Platform``, on every vLLM of the span (issue 40: the
musa-sim parts had only run on 0.26.0): every platform method vLLM's base class leaves raising is ours or named
off the serving path, and the KV-cache binding of an engine whose attention layers share layer indices (the
separate draft model: ``draft_model.model.layers.N`` beside the target's ``model.layers.N``) gets through our class
where vLLM asks the platform (0.28.0 on). vLLM's real ``bind_kv_cache`` and ``Platform``; our class is instantiated
without a device (``__new__``), since these methods read none."""

from __future__ import annotations

import inspect

import pytest
import torch

from portable_spec.vllm_adapter.patch import version_gate

# Platform methods whose vLLM default raises, and that no engine of ours at TP=1 without LoRA calls.
OFF_THE_SERVING_PATH = {
    "get_device_uuid": "no caller in vLLM 0.26.0",
    "get_all_gpu_pci_bus_ids": "VLLM_GPU_NIC_PCIE_MAPPING only (RDMA NIC selection)",
    "get_punica_wrapper": "LoRA only",
    "stateless_init_device_torch_dist_pg": "elastic expert parallelism / stateless groups only",
}


def test_the_musa_class_has_every_platform_method_vllm_starts_an_engine_with():
    """Every ``Platform`` method whose default raises is ours, or named here with why no engine of ours calls it:
    a new raising method in vLLM fails this test, not a MUSA engine at start-up (0.28.0 added
    ``check_runner_kv_caches_multi_layer``)."""
    from vllm.platforms.interface import Platform

    from portable_spec.vllm_adapter.platform.musa import PortableMusaPlatform

    raising = {name for name, member in vars(Platform).items() if callable(getattr(member, "__func__", member))
               and "NotImplementedError" in inspect.getsource(getattr(member, "__func__", member))}
    assert raising >= {"manual_seed_all", "check_if_supports_dtype", "num_compute_units", "set_device"}
    ours = {name for name in raising if getattr(PortableMusaPlatform, name).__qualname__.startswith("PortableMusa")}
    assert raising - ours == set(OFF_THE_SERVING_PATH), raising - ours


class Layer:
    """What ``bind_kv_cache`` binds a layer's cache on (0.26.0 assigns ``kv_cache``; 0.28.0 calls the method)."""

    kv_cache = None

    def bind_kv_cache(self, kv_cache: torch.Tensor) -> None:
        self.kv_cache = kv_cache


def draft_model_layer_names(target_layers: int = 2, draft_layers: int = 4) -> list[str]:
    """The attention layers of a Llama target and a Llama draft model as vLLM's V1 ``DraftModelProposer`` builds
    it (the prefix read from its ``_get_model``)."""
    from vllm.v1.spec_decode.draft_model import DraftModelProposer

    source = inspect.getsource(DraftModelProposer._get_model)
    assert 'prefix="draft_model"' in source, "vLLM builds the draft model under another prefix"
    return ([f"model.layers.{i}.self_attn.attn" for i in range(target_layers)]
            + [f"draft_model.model.layers.{i}.self_attn.attn" for i in range(draft_layers)])


def bind(platform, names: list[str], monkeypatch) -> tuple[list[torch.Tensor], dict[str, torch.Tensor], dict]:
    """vLLM's ``bind_kv_cache`` with ``platform`` as the current platform its module bound at import."""
    from vllm.v1.worker import utils

    monkeypatch.setattr(utils, "current_platform", platform)
    caches = {name: torch.full((1,), float(i)) for i, name in enumerate(names)}
    layers = {name: Layer() for name in names}
    runner: list[torch.Tensor] = []
    utils.bind_kv_cache(caches, layers, runner)
    return runner, caches, layers


def test_the_draft_models_layers_bind_their_kv_caches_under_the_musa_class(monkeypatch):
    """The separate draft model's layers share the target's layer indices, so ``bind_kv_cache`` asks the platform
    whether its runner copes; vLLM's base ``Platform`` refuses (the musa-sim draft-model part stopped there at
    KV-cache set-up). Where vLLM asks the platform (0.28.0 on) our MUSA class answers as vLLM's CUDA class does and
    every layer is bound; on 0.26.0 vLLM lets only CUDA-alike, XPU and CPU platforms through, so our standalone
    class (not CUDA-alike: no compiled ops without vllm-musa) cannot bind them there (``MusaSimPart.since``)."""
    from vllm.platforms.interface import UnspecifiedPlatform

    from portable_spec.vllm_adapter.platform.musa import PortableMusaPlatform

    names = draft_model_layer_names()
    with pytest.raises(NotImplementedError):  # the check is reached: two layers at one index, base Platform's answer
        bind(UnspecifiedPlatform(), names, monkeypatch)
    musa = PortableMusaPlatform.__new__(PortableMusaPlatform)
    if not version_gate.pick({"0.26.0": False, "0.28.0": True}):  # vLLM 0.26.0 asks is_cuda_alike(), not the class
        with pytest.raises(NotImplementedError):
            bind(musa, names, monkeypatch)
        return
    runner, caches, layers = bind(musa, names, monkeypatch)
    by_index = sorted(names, key=lambda n: int(n.split("layers.")[1].split(".")[0]))  # vLLM's order: layer index
    assert [id(t) for t in runner] == [id(caches[n]) for n in by_index]
    assert all(layers[n].kv_cache is caches[n] for n in names)


def test_eagle_heads_do_not_share_the_targets_layer_indices(monkeypatch):
    """The other V1 musa-sim parts never reach the check: an EAGLE head's layers continue the target's indices
    (``start_layer_id``), so even vLLM's base ``Platform`` binds them."""
    from vllm.platforms.interface import UnspecifiedPlatform

    names = ["model.layers.0.self_attn.attn", "model.layers.1.self_attn.attn", "model.layers.2.self_attn.attn"]
    runner, caches, _ = bind(UnspecifiedPlatform(), names, monkeypatch)
    assert len(runner) == 3
