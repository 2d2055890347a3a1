"""What portable_spec relies on in vllm-musa (``MooreThreads/vllm-musa``, package ``vllm_musa``), in one list.

When vllm-musa is installed, ``VLLM_PLATFORM=musa`` composes with it (``vllm_musa_stack.py``: which probe wins,
``VLLM_PLUGINS``; ``vllm_musa_platform.py`` and ``worker/vllm_musa_worker.py``: the classes). Everything that
composition assumes about vllm-musa is an item here: entry points, qualnames, the methods we override, inherit or leave to it
(with their parameters), the environment variables we read (through ``portable_spec.envs``; we set none), the
kernels it patches, so that our substitute for the same kernel is left to it, and the attention backends it
registers.

Each item says where it was read: vllm-musa's public sources as the search tools store them, version 0.1.28
(``vllm_musa/__init__.py`` ``__version__``), each file at the commit recorded below. vllm-musa cannot be installed
here at a matching version (it builds its own patched vLLM 0.28.0 against torch_musa; this project has no MUSA
host), so the list is tested against a stand-in
package the tests build with these entry points, qualnames and parameters (``tests/vllm_musa_standin.py``, lane
``vllm-musa-contract``); ``tests/test_vllm_musa_contract.py`` fails when the list and the stand-in differ. Whether
the list still matches vllm-musa itself is what a real MTT host shows. Data only: no vLLM or vllm-musa import.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

REPO = "MooreThreads/vllm-musa"
VERSION_READ = "0.1.28"
DISTRIBUTION = "vllm-musa"
PACKAGE = "vllm_musa"

# The commits the items were read from (as the search tools store the files; the newest stored version of each).
INIT_AT = "038cfc6ea3fb2f3f8d1b7d8d4b82579bea3e812e"  # vllm_musa/__init__.py, __version__ = "0.1.28"
PYPROJECT_AT = "705ddecd1a8477fdd38b6bd71574d2514e0a008d"  # pyproject.toml (newest stored; its static version reads
# 0.1.1, later releases read __version__ dynamically; the entry points are the ones __init__.py @ INIT_AT defines)
PLATFORM_AT = "038cfc6ea3fb2f3f8d1b7d8d4b82579bea3e812e"  # vllm_musa/platform.py
WORKER_AT = "c9928667cb1a81476bcdedb3b61f2a0e64646843 and 634c9d658c8aa269e465d87fd30538d8e39ea543"  # worker.py
SERIES_AT = "af16fcaf5bf8491254bd8754c95ece5156b91b23"  # vllm_musa/patches/series/*.patch
PROPOSER_PATCH_AT = "a93b0bc8b65f3fdf3e6e3353160937e8458aeb84"  # series/0030 (llm_base_proposer)
SPEC_UTILS_AT = "06f0eb2e6a22071e99fb94eac96e51ba4cbf78a9"  # vllm_musa/v1/spec_decode/utils.py
EAGLE_RUNNER_AT = "06f0eb2e6a22071e99fb94eac96e51ba4cbf78a9"  # vllm_musa/v1/spec_decode/eagle_full_loop_runner.py and
# its dispatcher, the object patch vllm_musa/patches/vllm__v1__spec_decode__eagle.patch.py
MANIFEST_AT = "0e0bd229f51182fd21caf6d3ea29f1941ce5aa08"  # vllm_musa/patches/manifest.py (its divergence census)
PINS_AT = "0227a5c748d9672b1a354712b75f315fda774eb8"  # third_party/PINS: VLLM_TAG=v0.28.0 (also @ af16fcaf)
VLLM_PIN = "0.28.0"
"""The vLLM vllm-musa builds (``third_party/PINS`` @ PINS_AT, ``VLLM_TAG=v0.28.0`` at a fixed commit)."""


@dataclass(frozen=True)
class EntryPoint:
    group: str
    name: str
    value: str
    read_from: str


PLATFORM_PLUGIN = EntryPoint("vllm.platform_plugins", "musa", "vllm_musa:musa_platform_plugin",
                             f"pyproject.toml @ {PYPROJECT_AT}; vllm_musa/__init__.py @ {INIT_AT}")
GENERAL_PLUGIN = EntryPoint("vllm.general_plugins", "musa_custom_ops", "vllm_musa:register_custom_ops",
                            f"pyproject.toml @ {PYPROJECT_AT}; vllm_musa/__init__.py @ {INIT_AT} (applies its "
                            "run-time object patches, registers its ops, communicators and attention backends)")
ENTRY_POINTS = (PLATFORM_PLUGIN, GENERAL_PLUGIN)

PROBE_ANSWER = "vllm_musa.platform.MUSAPlatform"
"""What ``musa_platform_plugin()`` returns whenever torchada reports MUSA or ``import torch_musa`` works, else None
(``vllm_musa/__init__.py`` @ INIT_AT): on a MUSA host it always answers, so with ours answering too vLLM would refuse
to start ("Only one platform plugin can be activated")."""
PLATFORM_QUALNAME = "vllm_musa.platform.MUSAPlatform"
"""The class we subclass, by name (``vllm_musa/platform.py`` @ PLATFORM_AT: an alias of ``MtmlMUSAPlatform`` or
``NonMtmlMUSAPlatform``, both ``MUSAPlatformBase(Platform)``)."""
WORKER_QUALNAME = "vllm_musa.worker.MTGPUWorker"
"""The worker we subclass, by name (``vllm_musa/worker.py`` @ WORKER_AT: ``MTGPUWorker(Worker)``)."""
OUR_PLUGIN = "portable_spec"
"""Our entry-point name in both groups (pyproject.toml): one name in ``VLLM_PLUGINS`` keeps both."""
VLLM_PLUGINS_VALUE = f"{OUR_PLUGIN},{GENERAL_PLUGIN.name}"
"""The ``VLLM_PLUGINS`` that composes: our plugins and vllm-musa's general plugin, not its platform plugin."""


@dataclass(frozen=True)
class Method:
    owner: str
    """The qualname of vllm-musa's class (``PLATFORM_QUALNAME`` or ``WORKER_QUALNAME``)."""
    name: str
    parameters: str
    """Its parameters as ``parameters_of`` renders them (no ``self``/``cls``, no annotations); "" for ``absent``."""
    use: str
    """``override`` (our class redefines it and calls vLLM-musa's through ``super()``), ``inherit`` (we call it as
    vllm-musa wrote it), ``absent`` (vllm-musa must NOT define it: we rely on vLLM's base or ours)."""
    why: str
    read_from: str


_P = f"vllm_musa/platform.py @ {PLATFORM_AT}"
_W = f"vllm_musa/worker.py @ {WORKER_AT}"
METHODS = (
    Method(PLATFORM_QUALNAME, "apply_config_platform_defaults", "(vllm_config)", "override",
           "our mixin records the user's capture sizes after vllm-musa's defaults (engine-plan defaults, custom "
           "ops 'all')", _P),
    Method(PLATFORM_QUALNAME, "check_and_update_config", "(vllm_config)", "override",
           "our mixin sets worker_cls before calling it (vllm-musa sets MTGPUWorker only when worker_cls is "
           "'auto', so ours stays) and plans the capture sizes after it (it coerces DFlash to block-aligned FULL "
           "sizes first; the planner keeps them block-aligned)", _P),
    Method(PLATFORM_QUALNAME, "get_attn_backend_cls", "(selected_backend, attn_selector_config, num_heads=None)",
           "inherit", "attention selection stays vllm-musa's (its FLASH_ATTN/FLASHMLA/TURBOQUANT classes)", _P),
    Method(PLATFORM_QUALNAME, "get_device_communicator_cls", "()", "inherit",
           "the communicator stays vllm-musa's (MCCL through vLLM's CUDA communicator under torchada)", _P),
    Method(PLATFORM_QUALNAME, "get_global_graph_pool", "", "absent",
           "vllm-musa leaves the graph pool to vLLM's base class: our SharedPoolMixin's one pool replaces nothing "
           "of vllm-musa's (its EagleFullLoopRunner, when on, asks current_platform.get_global_graph_pool() too, "
           "so it would capture into our pool: eagle_full_loop_runner.py @ EAGLE_RUNNER_AT)", _P),
    Method(PLATFORM_QUALNAME, "finalize_config", "(vllm_config)", "inherit",
           "vllm-musa validates its RuntimePlan's compile ranges after vLLM finalizes the config; ours does not "
           "touch compile ranges", _P),
    Method(PLATFORM_QUALNAME, "validate_cudagraph_config", "(vllm_config, uniform_decode_query_len)", "inherit",
           "vllm-musa checks the resolved capture sizes (ours, once planned) against its fused-MoE RuntimePlan: "
           "a contextual capture policy refuses speculative decoding outright (uniform_decode_query_len != 1), "
           "so with such a plan vllm-musa refuses, ours or not; without one it checks nothing of ours", _P),
    Method(WORKER_QUALNAME, "__init__", "(vllm_config, local_rank, rank, distributed_init_method, "
                                        "is_driver_worker=False)", "inherit",
           "vLLM's worker signature; vllm-musa materializes its run-time plan there", _W),
    Method(WORKER_QUALNAME, "init_device", "()", "override",
           "our PortableWorker.init_device binds substitutes and, for our drafter, builds our V1 runner around it; "
           "its super() reaches vLLM's through MTGPUWorker's (one stored version defines init_device: super(), then "
           "it primes its kernels; the other inherits vLLM's)", _W),
    Method(WORKER_QUALNAME, "execute_dummy_batch", "()", "inherit",
           "vllm-musa's dummy batch calls the model runner's _dummy_run(uniform_decode_query_len, "
           "uniform_decode=True); our V1 runner keeps vLLM's _dummy_run (re-read @ 634c9d6)", _W),
)


@dataclass(frozen=True)
class Patch:
    patch: str
    what: str
    read_from: str


RELIED_PATCHES = (
    Patch("0036-MUSA-vllm.v1.worker.gpu_worker", "vLLM's Worker.init_device accepts device_type 'musa': the "
          "composed worker is not given MusaWorker's device-type trick", f"series @ {SERIES_AT}"),
    Patch("0030-MUSA-vllm.v1.spec_decode.llm_base_proposer", "the draft model is wrapped in FULL graphs by vllm-musa "
          "only with VLLM_MUSA_DRAFT_FULL_WRAP=1 (default 0 on MUSA)", f"series @ {PROPOSER_PATCH_AT}"),
    Patch("vllm__v1__spec_decode__eagle (object patch, required)", "its general plugin replaces vLLM's "
          "EagleProposer.propose with a dispatcher that calls the original unless VLLM_MUSA_EAGLE_RUNNER=1 (default "
          "0) on MUSA: our FullGraphEagleProposer's super().propose reaches vLLM's; with it 1, the EagleFullLoopRunner "
          "(topk 1, the whole N-step chain as one graph per observed batch size, captured at the first propose) "
          "answers instead and ours steps aside for EAGLE_RUNNER_METHODS",
          f"vllm_musa/patches/vllm__v1__spec_decode__eagle.patch.py @ {EAGLE_RUNNER_AT}; manifest @ {MANIFEST_AT}"),
)

EAGLE_RUNNER_METHODS = ("eagle", "eagle3", "mtp")
"""The methods whose vLLM proposer is an ``EagleProposer`` (DFlash's and the draft model's are not), so vllm-musa's
propose dispatcher sits under ours."""

DEFERRED_SUBSTITUTES: dict[str, str] = {
    "eagle_prepare_next_token_padded_kernel": f"vllm_musa/v1/spec_decode/utils.py @ {SPEC_UTILS_AT} (its own "
                                              "kernel, bound over vllm.v1.spec_decode.utils)",
    "find_seq_idx": f"series 0024-MUSA-vllm.v1.attention.ops.triton_attention_helpers @ {SERIES_AT}",
    "compute_tile_loop_bounds": f"series 0065-MUSA-vllm.v1.attention.ops.triton_attention_helpers @ {SERIES_AT}",
    "_load_q_td": f"series 0064-MUSA-vllm.v1.attention.ops.triton_unified_attention @ {SERIES_AT}",
    "_load_kv_tile_td": f"series 0064-MUSA-vllm.v1.attention.ops.triton_unified_attention @ {SERIES_AT}",
    "_store_output_td": f"series 0064-MUSA-vllm.v1.attention.ops.triton_unified_attention @ {SERIES_AT}",
    "_penalties_kernel": f"series 0033-MUSA-vllm.v1.worker.gpu.sample.penalties @ {SERIES_AT}",
    "_topk_topp_kernel": f"series 0027-MUSA-vllm.v1.sample.ops.topk_topp_triton @ {SERIES_AT}",
}
"""Our MUSA substitutes whose kernel vllm-musa patches itself (its build applies the series to vLLM's source; the
spec-decode kernel is a run-time object patch): on vllm-musa we bind none of these, its kernel runs. Our other MUSA
substitutes (``kernel_unified_attention``'s parameter annotations, ``_load_ptr``, ``tl_rand32``, ``tl_rand64``, MRV2's
``_rejection_kernel``, ``_fill_logprob_token_ids_kernel`` and ``_apply_write_kernel``; 0.28.0's
``_update_committed_marker_cache_kernel`` and DFlash2's ``gumbel_noised_argmax``, which bind nothing on 0.26.0, were not
looked up in the series) have no
vllm-musa patch covering them in the stored series (none names ``buffer_utils``, whose staged write still calls ``_load_ptr``): they
are bound on top, each on its own (one that cannot bind on vllm-musa's vLLM is logged and left). For
``_load_ptr``, series 0032 (``vllm.v1.worker.gpu.block_table``) has the block-table kernels call a ``_load_int32_ptr`` of its own,
so ours over ``block_table._load_ptr`` is never called there, while ``buffer_utils``'s multi-group write still calls
``_load_ptr`` and gets ours. vllm-musa's build also patches ``eagle_prepare_inputs_padded_kernel`` (series 0031, an
empty-query early return), which we do not substitute. On vLLM 0.28.0 (``VLLM_PIN``) none of our MUSA substitutes
bind (``version_gate``'s ``kernel_substitutes_musa``: 0.26.0 only), so this list decides only on a 0.26.0 stack."""

ATTENTION_BACKENDS: dict[str, str] = {
    "FLASH_ATTN": "vllm_musa.v1.attention.backends.flash_attn.MUSAFlashAttentionBackend",
    "TURBOQUANT": "vllm_musa.v1.attention.backends.turboquant.MUSATurboQuantAttentionBackend",
    "FLASHMLA": "vllm_musa.v1.attention.backends.mla.flashmla.MUSAFlashMLABackend",
    "FLASHMLA_SPARSE": "vllm_musa.v1.attention.backends.mla.flashmla_sparse.MUSAFlashMLASparseBackend",
}
"""What vllm-musa registers over vLLM's ``AttentionBackendEnum`` members (``register_attention_backends`` in
``vllm_musa/platform.py`` @ PLATFORM_AT; it also registers TREE_ATTN where vLLM's enum still has that member,
which vLLM 0.26.0, 0.28.0 and 0.33.0 do not). Its selection order: FLASH_ATTN, TRITON_ATTN, TURBOQUANT; with MLA
FLASHMLA, FLASHMLA_SPARSE, TRITON_MLA. The capability table (``attention_caps/table.py``) has rows for the ones it
covers (not MLA or sparse): FLASH_ATTN and TURBOQUANT name these classes."""


@dataclass(frozen=True)
class Env:
    name: str
    owner: str
    default: str
    what: str
    read_from: str


ENV_READ = (
    Env("VLLM_PLUGINS", "vLLM", "", "the plugin filter that keeps vllm-musa's platform plugin out and its general "
        "plugin in", "vllm/plugins/__init__.py (load_plugins_by_group) in vLLM 0.26.0"),
    Env("VLLM_MUSA_DRAFT_FULL_WRAP", "vllm-musa", "0", "'1': vllm-musa wraps the EAGLE-family draft in FULL graphs "
        "itself (ours steps aside)", f"series 0030 @ {PROPOSER_PATCH_AT}"),
    Env("VLLM_MUSA_DFLASH_FULL_WRAP", "vllm-musa", "1", "anything but '0': vllm-musa captures the DFlash draft in FULL "
        "graphs itself (ours steps aside)", f"{_P} (check_and_update_config) and series 0035 (gpu_model_runner)"),
    Env("VLLM_MUSA_EAGLE_RUNNER", "vllm-musa", "0", "'1': on MUSA vllm-musa's propose dispatcher replays its "
        "EagleFullLoopRunner (the EAGLE chain as one graph) instead of vLLM's loop (ours steps aside for "
        "EAGLE_RUNNER_METHODS); its docstring calls the runner off pending replay-correctness fixes",
        f"vllm_musa/patches/vllm__v1__spec_decode__eagle.patch.py @ {EAGLE_RUNNER_AT}"),
)
ENV_SET: tuple[Env, ...] = ()
"""We set none of vllm-musa's or vLLM's variables."""


def parameters_of(fn: Any) -> str:
    """``fn``'s parameters as ``(a, b, c=1)``: names and defaults, no annotations, no ``self``/``cls`` (a classmethod
    read from its class is already bound)."""
    params = [p for p in inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")]
    return "(" + ", ".join(p.name if p.default is inspect.Parameter.empty else f"{p.name}={p.default!r}"
                           for p in params) + ")"
