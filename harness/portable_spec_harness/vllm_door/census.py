"""The harness's entries of the census: the places where the harness, never ``vllm serve``, changes what vLLM does
(profiling, the e2e oracle's draft recorder and injected bugs, musa-sim's graph aliasing, the designed-weights
loader). Same ``Divergence`` type as the product's census (``portable_spec.vllm_adapter.patch.manifest.CENSUS``);
``tests/test_vllm_hook_points.py`` checks both."""

from __future__ import annotations

from portable_spec.vllm_adapter.patch.manifest import Divergence

_A = "portable_spec.vllm_adapter"

HARNESS_CENSUS: tuple[Divergence, ...] = (
    Divergence(
        "profiler scopes (bench only)", "scoped override", "portable_spec_harness.vllm_door.profile_scopes:installed",
        ("vllm.v1.worker.gpu_model_runner:GPUModelRunner.execute_model",
         "vllm.v1.engine.core:EngineCoreProc._process_engine_step"),
        what="Wraps the runners' phase methods in profiler scopes for the bench's per-step breakdown (and, in a "
             "serving benchmark's server, the engine core's step, for the phase clock's busy time).",
        why="Attribution of host and device time per phase.",
        undone="Only inside the bench's profiled pass, or in a serving benchmark's server between its probe's start "
               "and stop calls (serve_bench/worker_extension.py); restored on exit. Never on the serve path.",
        upstream="Measurement only."),
    Divergence(
        "per-step draft recorder (e2e harness only)", "scoped override",
        "portable_spec_harness.vllm_door.draft_recorder:recording",
        ("vllm.v1.worker.gpu_model_runner:GPUModelRunner.propose_draft_token_ids",
         f"{_A}.worker.v1_model_runner:PortableV1ModelRunner.propose_draft_token_ids"),
        what="Wraps propose_draft_token_ids on the class that defines it for the runner in use, recording each "
             "step's drafts per request with the position they go to; returns what the method returned.",
        why="The e2e oracle compares every step's drafts of our FULL drafter with the eager drafter's (issue 21).",
        undone="Bench/tests only: installed after boot by collective_rpc in the e2e child's greedy job "
               "(--record-drafts), removed before the engine's facts are read; never on the serve path.",
        upstream="Measurement only.",
        pinned_by=("test_the_draft_recorder_reads_what_the_v1_runner_keeps_per_step",),
        requires="v1_full_drafter"),
    Divergence(
        "torchada's graph aliasing, simulated (musa-sim harness only)", "instance override",
        "portable_spec_harness.musa_sim:alias_torch_cuda_graphs",
        ("torch.cuda:CUDAGraph", "torch.cuda:graph", "vllm.v1.worker.gpu.cudagraph_utils:CudaGraphManager.capture"),
        what="With PORTABLE_SPEC_SIM_TORCHADA_GRAPHS=on a musa-sim process rebinds torch.cuda.CUDAGraph and "
             "torch.cuda.graph to the simulated torch.musa's MUSAGraph and graph, so the graphs vLLM records "
             "through torch.cuda itself (Model Runner V2's CudaGraphManager.capture, vLLM's piecewise wrappers) "
             "keep the MUSA rules and count against the simulated live-graph cap.",
        why="On MUSA torchada aliases torch.cuda to torch.musa, so MRV2's target and speculator graphs are MUSAGraphs "
            "under torchada's cap; the musa-sim MRV2 parts must see them as such (issue 23).",
        undone="Harness only: a musa-sim process keeps it for its life, as torchada's aliasing is (tests undo it "
               "with the returned restore function); the V1 musa-sim variants leave it off; never on the serve "
               "path (the musa-sim plugin exists only on the harness's PYTHONPATH).",
        upstream="Simulation only: torchada itself does this on MUSA.",
        pinned_by=("test_mrv2_managers_take_the_platforms_pool_and_call_torch_cuda_by_attribute",),
        platforms=("musa",)),
    Divergence(
        "designed-weights model loader (real-shape harness only)", "subclass",
        "portable_spec_harness.vllm_door.designed_loader:DesignedWeightsLoader",
        ("vllm.model_executor.model_loader:register_model_loader",
         "vllm.model_executor.model_loader.base_loader:BaseModelLoader"),
        what="Adds load format portable_spec_designed to vLLM's loader registry: the loader makes a designed "
             "real-shape model's weights on the device (real_shapes/design.py) and hands them, under their "
             "checkpoint names, to the model's own load_weights; then checks every parameter was written and the "
             "construction holds.",
        why="Real-shape benchmarks with known acceptance (issue 24) without a 16-61 GB checkpoint on disk.",
        undone="Registered only in processes that load the general plugin the harness writes at run time "
               "(real_shapes/plugin.py on PYTHONPATH); the product's entry points never register it. It "
               "adds a name: no loader of vLLM's is replaced.",
        upstream="vLLM's documented register_model_loader hook; harness only, nothing to upstream.",
        overrides=("download_model", "load_weights")),
    Divergence(
        "injected drafter bugs (e2e harness only)", "scoped override",
        "portable_spec_harness.vllm_door.bug_injection:injected",
        ("vllm.v1.spec_decode.llm_base_proposer:SpecDecodeBaseProposer._get_slot_mapping",
         "vllm.v1.spec_decode.llm_base_proposer:SpecDecodeBaseProposer._update_positions_dependent_metadata",
         f"{_A}.spec_decode.fused_chain:FusedChainMixin._run_fused_chain",
         f"{_A}.spec_decode.draft_prep:hand_off_counts",
         f"{_A}.spec_decode.fused_chain:greedy_draft_tokens",
         f"{_A}.spec_decode.draft_model:FullGraphDraftModelProposer._classify"),
        what="PORTABLE_SPEC_INJECT_BUG=position_off_by_one|wrong_slot|stale_seq_lens|wrong_num_computed|"
             "draft_position_off_by_one|d2t_unmapped "
             "wraps one of these so our drafter makes that mistake (vLLM's methods act only on our proposers).",
        why="Shows the e2e exactness checks catch each bug (issue 21, item 3).",
        undone="Bench/tests only: the e2e child of our variant at TP=1 installs it for its life when the variable is "
               "set; unset, nothing is installed. Never on the serve path.",
        upstream="Fault injection only.",
        pinned_by=("test_the_injected_bugs_hook_where_the_drafter_calls",),
        requires="v1_full_drafter"),
)
