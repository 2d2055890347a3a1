"""The tests the cpu lane runs against every other vLLM of the version span (issue 26): the one list.

vLLM 0.26.0's virtualenv runs the whole suite; each ``ci/requirements-cpu-<version>.txt`` virtualenv runs these
modules only: the adapter's unit tests that import vLLM, the config tests (the planner inside a real ``VllmConfig``,
the runner vLLM picks), the plugin tests (entry points, vLLM's own resolver), the hook points (the census checked
against that vLLM) and the attention claims (the capability table declared for that vLLM against its backend
classes). What a version cannot have is skipped with the version gate's one-line reason
(``portable_spec.vllm_adapter.version_gate``), never left to fail.

``python tests/version_span.py`` prints the paths (what ``ci/lanes/cpu.sh`` passes to pytest: naming the files,
not selecting by marker, keeps a module the span does not run from being imported there at all).
"""

from __future__ import annotations

from pathlib import Path

MODULES = (
    # hook points
    "test_vllm_hook_points.py",
    "test_mrv2_cuda_parity.py",
    # config
    "test_vllm_config.py",
    "test_runner_choice.py",
    "test_draft_graph_policy.py",
    "test_mrv2_sizes.py",
    # the V1 runner's live graphs per capture size against this vLLM's own dispatcher keys and the GPU's counts
    "test_graphs_per_target_size.py",
    # which drafts this vLLM compiles (no PIECEWISE graphs for one it does not), read from its model classes
    "test_graph_pieces.py",
    "test_mrv2_standalone.py",
    # Model Runner V2's sampled warm-up: 0.26.0's, 0.28.0's and 0.33.0's kernel models, scheduler outputs of that
    # vLLM's classes; on 0.28.0 the compile keys of its own Sampler and RejectionSampler against the plan
    "test_mrv2_warmup.py",
    "test_mrv2_sampling_plan_028.py",
    "test_mrv2_sampled_compiles_028.py",
    "test_mrv2_sampling_plan_033.py",
    # structured output's bitmask kernel (xgrammar's, launched by vLLM's apply_grammar_bitmask) warmed at boot
    "test_structured_warmup.py",
    # an MoE target's eager token counts: every fused-MoE kernel variant, judged with this vLLM's config lookup
    "test_moe_size_warmup.py",
    "test_real_shapes_config.py",
    # attention claims (the table declared for this vLLM against its backend classes and sources)
    "test_attention_caps_versions.py",
    "test_attention_agreement.py",
    # plugin
    "test_vllm_plugin.py",
    "test_platform_registry.py",
    "test_rocm_platform.py",
    # the MUSA class against this vLLM's Platform: raising methods, the draft model's shared layer indices
    "test_musa_platform_span.py",
    # MUSA's kernel substitutes: derived from this vLLM's kernels with its rewrite counts, bound, and bitwise vLLM's
    "test_musa_substitutes_span.py",
    # the Triton 3.2 check's launch table: each row as this vLLM launches the kernel, every MRV2 kernel covered
    "test_triton_table_span.py",
    # the ROCm compile step's rows as this vLLM launches them, every ROCm-path kernel covered (~35 s; 2 real compiles)
    "test_rocm_compile.py",
    # unit tests of the adapter and the version gate
    "test_version_gate.py",
    "test_adapter_logs.py",
    "test_musa_worker_pool.py",
    "test_capture_sizes.py",
    "test_envs.py",
    "test_layout.py",
)


def paths() -> list[str]:
    """The modules as paths relative to the repository root."""
    here = Path(__file__).resolve().parent
    return [str((here / name).relative_to(here.parent)) for name in MODULES]


def needs(feature: str):
    """Skip a test where the installed vLLM lacks ``feature`` (``version_gate``), with the gate's one-line reason."""
    import pytest

    from portable_spec.vllm_adapter.patch import version_gate

    return pytest.mark.skipif(not version_gate.has(feature), reason=version_gate.why_not(feature) or "")


if __name__ == "__main__":
    print(*paths())
