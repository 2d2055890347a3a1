"""The census: every place portable_spec changes what vLLM does, with why, how it is undone and where it stands
upstream (as vllm-musa's ``patches/manifest.py`` lists its own patches).

Nothing here runs: the entries are data. ``tests/test_vllm_hook_points.py`` is driven from them: every ``targets``
symbol must resolve in the installed vLLM, every ``overrides`` set must equal what our subclass really overrides of
its vLLM base, every ``pinned_by`` test must exist, and every ``overridden(...)`` call in our code must name a target
listed here. A new divergence without an entry, or a vLLM that moves a symbol, fails there.

Kinds:
- ``entry point``: vLLM loads our code through its plugin groups (``pyproject.toml``).
- ``subclass``: our class replaces vLLM's where vLLM lets a name choose it (platform qualname, ``worker_cls``);
  ``overrides`` are the vLLM methods it redefines (each calls ``super()`` unless ``what`` says otherwise).
- ``scoped override``: ``patch.overrides.overridden`` swaps one module attribute for one call and restores it.
- ``instance override``: an attribute set on one object we own a reference to, removed by us.
- ``kernel substitution``: module globals that hold a vLLM Triton kernel rebound to ours
  (``portable_spec/kernels/substitutions.py`` is the table, ``kernels/registry.py`` binds and unbinds).
- ``table entry``: a key added to one of vLLM's registries.
- ``process setting``: an environment variable our worker sets in the engine's process from boot on (named in the
  environment table, ``portable_spec/envs.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

PLATFORMS = ("cuda", "rocm", "musa")
"""Every platform our layer serves on (vLLM's own ``cpu`` gets nothing from us)."""


@dataclass(frozen=True)
class Divergence:
    name: str
    kind: str
    ours: str
    """Where our side lives (``module:qualname``)."""
    targets: tuple[str, ...]
    """The vLLM (or Triton) symbols we hook, ``module:qualname`` (``qualname`` may be dotted); each must resolve."""
    what: str
    why: str
    undone: str
    upstream: str
    overrides: tuple[str, ...] = ()
    """For ``subclass``: exactly the methods of its vLLM bases ``ours`` redefines (through itself and the mixins in
    its bases that have no entry of their own)."""
    overrides_since: tuple[tuple[str, str], ...] = ()
    """For ``subclass``: ``(method, since)`` for methods ``ours`` redefines that its vLLM bases have only from vLLM
    ``since`` on (a version of the span): counted with ``overrides`` there, and absent from the bases before."""
    base: str = ""
    """For a mixin: the vLLM class it is mixed into (a subclass's bases say it themselves)."""
    pinned_by: tuple[str, ...] = ()
    """Tests in ``tests/test_vllm_hook_points.py`` that pin the vLLM source this entry relies on."""
    needs: str = ""
    """A package besides vLLM that ``ours`` and ``targets`` live in (``vllm_musa``): the hook-point tests resolve
    such an entry against the stand-in the contract tests build (lane vllm-musa-contract), since it is not
    installable here."""
    through_mixins: bool = False
    """For a ``subclass`` composed of mixins that have entries of their own: ``overrides`` counts what the mixins
    redefine of ``base`` too (the class itself adds no override; what it changes is that the mixins now sit on a
    vendor's class)."""
    requires: str = ""
    """A ``version_gate`` feature this divergence belongs to: on a vLLM without it the divergence never happens (the
    gate logs why), so its hook points are not checked there."""
    moved: tuple[tuple[str, str, str], ...] = ()
    """``(target, since, new target)``: from vLLM ``since`` on (a version of the span), ``target`` lives at ``new
    target``."""
    platforms: tuple[str, ...] = PLATFORMS
    """The platforms (``VLLM_PLATFORM`` values) on which this divergence happens: "where does MUSA differ" is the
    entries whose tuple names MUSA and not every platform (``portable-spec census --platform musa``)."""

    def applies(self, version: tuple[int, int, int] | None = None) -> bool:
        """Whether this divergence exists on ``version`` (default: the installed vLLM)."""
        from portable_spec.vllm_adapter.patch import version_gate

        return not self.requires or version_gate.has(self.requires, version)

    def targets_on(self, version: tuple[int, int, int] | None = None) -> tuple[str, ...]:
        """``targets`` where ``version`` (default: the installed vLLM) has them."""
        from portable_spec.vllm_adapter.patch import version_gate

        where = {target: version_gate.pick({version_gate.SPAN[0]: target, **{since: new for old, since, new
                                                                             in self.moved if old == target}},
                                            version)
                 for target in self.targets}
        return tuple(where[target] for target in self.targets)


_A = "portable_spec.vllm_adapter"

CENSUS: tuple[Divergence, ...] = (
    Divergence(
        "platform plugin", "entry point", f"{_A}.plugin.platform_plugin:platform_qualname",
        ("vllm.plugins:load_plugins_by_group", "vllm.platforms:resolve_current_platform_cls_qualname"),
        what="VLLM_PLATFORM=cuda|rocm|musa makes vLLM resolve our platform class (an unusable value imports "
             "platform_error, which raises one line).",
        why="The only supported way to give vLLM an out-of-tree platform.",
        undone="Unset VLLM_PLATFORM: the probe returns None and vLLM's built-in detection runs.",
        upstream="vLLM's documented platform plugin mechanism; nothing to upstream."),
    Divergence(
        "general plugin: VLLM_PLATFORM declared", "table entry", f"{_A}.plugin.general_plugin:declare_platform_env",
        ("vllm.envs:environment_variables", "vllm.envs:validate_environ", "vllm.envs:compile_factors"),
        what="Adds VLLM_PLATFORM to vllm.envs.environment_variables (setdefault, never replacing a key vLLM defines).",
        why="Else validate_environ warns about an unknown VLLM_ variable (and fails under "
            "fail_on_environ_validation); known variables also key vLLM's compile cache, which the platform changes.",
        undone="Only while our platform is selected; the key lives for the process.",
        upstream="Would go away if vLLM declared VLLM_PLATFORM itself.",
        pinned_by=("test_env_validation_reads_the_table_our_general_plugin_extends",),
        moved=(("vllm.envs:validate_environ", "0.33.0", "vllm.platforms.interface:Platform.validate_environ"),)),
    Divergence(
        "platform classes: capture plan, worker, one pool", "subclass", f"{_A}.platform.base:PortableSpecPlatformMixin",
        ("vllm.platforms.interface:Platform.apply_config_platform_defaults",
         "vllm.platforms.interface:Platform.check_and_update_config"),
        what="Records the user's capture sizes before vLLM fills its default list; after vLLM's own checks, "
             "rewrites cudagraph_capture_sizes to the planner's (multiples of 1+K, DFlash block-aligned, pruned to "
             "the live-graph budget) and stores the drafter's plan in additional_config['portable_spec']; a plan "
             "it cannot make keeps vLLM's sizes (one warning; the drafter stays on vLLM's path), and with "
             "PORTABLE_SPEC_DRAFT_GRAPH=none|piecewise the plan needs no drafter size; under Model Runner V2 it "
             "keeps vLLM's sizes (one line says why: MRV2's draft decode steps need the sizes below 1+K) and only "
             "drops the largest where MRV2's target and speculator graphs together exceed a live-graph limit "
             "(platform/mrv2_sizes.py); sets worker_cls to our worker when the user left it on auto.",
        why="vLLM keeps one capture-size list for target and drafter and no drafter plan.",
        undone="Unset VLLM_PLATFORM (vLLM's own class); a user's explicit --worker-cls is kept.",
        upstream="Model Runner V2 plans its speculator's sizes itself; the V1 runner has no such hook.",
        overrides=("apply_config_platform_defaults", "check_and_update_config"),
        base="vllm.platforms.interface:Platform",
        pinned_by=("test_forward_context_and_platform_hooks",
                   "test_mrv2_managers_take_the_platforms_pool_and_call_torch_cuda_by_attribute")),
    Divergence(
        "platform classes: shared graph pool", "subclass", f"{_A}.platform.base:SharedPoolMixin",
        ("vllm.platforms.interface:Platform.get_global_graph_pool",),
        what="vLLM's global graph pool is our port's one pool per device, so vLLM's graphs and our drafter's share "
             "it (Model Runner V2's managers take it too: every graph they capture lands in the port's pool).",
        why="Private pools broke replay on torch_musa 2.9 (vllm-musa MUSA-0109) and waste memory anywhere.",
        undone="Unset VLLM_PLATFORM.", upstream="Nothing to upstream (vLLM asks the platform for the pool).",
        overrides=("get_global_graph_pool",), base="vllm.platforms.interface:Platform",
        pinned_by=("test_forward_context_and_platform_hooks",
                   "test_mrv2_managers_take_the_platforms_pool_and_call_torch_cuda_by_attribute")),
    Divergence(
        "MUSA platform start-up methods", "subclass", f"{_A}.platform.musa:PortableMusaPlatform",
        ("vllm.platforms.interface:Platform.manual_seed_all", "vllm.platforms.interface:Platform.num_compute_units",
         "vllm.platforms.interface:Platform.check_if_supports_dtype",
         "vllm.platforms.interface:Platform.get_attn_backend_cls"),
        what="A standalone vLLM platform for MUSA (device identity, MUSA attention rows, start-up methods the base "
             "class leaves raising), without vllm-musa; where vLLM picks Model Runner V2 one warning names the fix "
             "(MRV2 needs compiled ops only vllm-musa has on MUSA).",
        why="Drives the MUSA code path on CPU and under musa-sim; serving on real MUSA needs vllm-musa.",
        undone="VLLM_PLATFORM other than musa.", upstream="vllm-musa is the upstream for MUSA.",
        overrides=("check_and_update_config", "check_if_supports_dtype", "get_attn_backend_cls",
                   "get_current_memory_usage",
                   "get_device_capability", "get_device_communicator_cls", "get_device_name", "get_device_total_memory",
                   "get_static_graph_wrapper_cls", "is_sleep_mode_available", "manual_seed_all", "num_compute_units",
                   "opaque_attention_op", "set_device", "support_static_graph_mode", "supports_fp8"),
        # the separate draft model's layers share the target's layer indices (bind_kv_cache asks; the base raises)
        overrides_since=(("check_runner_kv_caches_multi_layer", "0.28.0"),),
        platforms=("musa",)),
    Divergence(
        "platform plugin composed with vllm-musa", "entry point", f"{_A}.plugin.platform_plugin:platform_qualname",
        ("vllm.plugins:load_plugins_by_group", "vllm.platforms:resolve_current_platform_cls_qualname",
         "vllm_musa:musa_platform_plugin", "vllm_musa:register_custom_ops"),
        what="With vllm-musa installed, VLLM_PLATFORM=musa answers PortableVllmMusaPlatform when VLLM_PLUGINS keeps "
             "vllm-musa's platform plugin out and its general plugin in (portable_spec,musa_custom_ops); unset or "
             "naming 'musa', our probe steps aside (one warning) and vllm-musa serves alone; keeping ours but not "
             "musa_custom_ops answers the error class (one line naming the value).",
        why="vLLM activates one out-of-tree platform plugin and vllm-musa's answers on every MUSA host; VLLM_PLUGINS "
            "is vLLM's filter of entry points by name, in every group.",
        undone="Unset VLLM_PLUGINS (or VLLM_PLATFORM): vllm-musa's probe alone decides.",
        upstream="vLLM's documented plugin mechanism; nothing to upstream.",
        pinned_by=("test_vllm_activates_one_oot_platform_and_filters_every_group_by_vllm_plugins",),
        needs="vllm_musa",
        platforms=("musa",)),
    Divergence(
        "vllm-musa platform with our hooks", "subclass", f"{_A}.platform.vllm_musa_platform:PortableVllmMusaPlatform",
        ("vllm_musa.platform:MUSAPlatform", "vllm.platforms.interface:Platform.apply_config_platform_defaults",
         "vllm.platforms.interface:Platform.check_and_update_config",
         "vllm.platforms.interface:Platform.get_global_graph_pool"),
        what="vllm-musa's MUSAPlatform (resolved by name) under our mixins: capture plan and live-graph budget around "
             "its check_and_update_config, our composed worker when worker_cls is auto, the one graph pool. It "
             "also names the kernels vllm-musa patches (our substitutes for them are not bound) and the drafters "
             "vllm-musa captures itself (ours steps aside).",
        why="On a real MUSA host vLLM only runs through vllm-musa (its ops, MCCL, attention, patched vLLM build).",
        undone="VLLM_PLUGINS without portable_spec, or unset (vllm-musa alone).",
        upstream="vllm-musa is the upstream for MUSA; our hooks are for its drafter graphs and planner.",
        overrides=("apply_config_platform_defaults", "check_and_update_config", "get_global_graph_pool"),
        base="vllm_musa.platform:MUSAPlatform", through_mixins=True,
        pinned_by=("test_vllm_musa_composition_targets_resolve_on_the_contract_standin",), needs="vllm_musa",
        platforms=("musa",)),
    Divergence(
        "vllm-musa worker with ours", "subclass", f"{_A}.worker.vllm_musa_worker:PortableVllmMusaWorker",
        ("vllm_musa.worker:MTGPUWorker", "vllm.v1.worker.gpu_worker:Worker.init_device"),
        what="vllm-musa's MTGPUWorker (resolved by name) under PortableWorker.init_device: binds the MUSA "
             "substitutes vllm-musa does not patch, each on its own (one that cannot bind is logged and left), and "
             "builds our V1 runner for our drafter; the device type stays 'musa' (no MusaWorker trick).",
        why="vllm-musa's worker does its device set-up; vLLM's device gate already accepts 'musa' in its build.",
        undone="As for the platform: without the composed platform this worker is never named.",
        upstream="vllm-musa's worker, unchanged beneath ours.",
        overrides=("init_device", "compile_or_warm_up_model"), base="vllm_musa.worker:MTGPUWorker",
        pinned_by=("test_vllm_musa_composition_targets_resolve_on_the_contract_standin",), needs="vllm_musa",
        platforms=("musa",)),
    Divergence(
        "worker: kernel substitutes and our V1 runner", "scoped override", f"{_A}.worker.gpu_worker:PortableWorker",
        ("vllm.v1.worker.gpu_worker:Worker.init_device", "vllm.v1.worker.gpu_model_runner:GPUModelRunner"),
        what="Binds our platform's kernel substitutes, then, for the V1 runner with our drafter on, swaps "
             "vllm.v1.worker.gpu_model_runner.GPUModelRunner for PortableV1ModelRunner for the one init_device call "
             "that builds it.",
        why="Worker.init_device builds the V1 runner by that module name; no config names the runner class.",
        undone="Restored when init_device returns or raises; Model Runner V2, PORTABLE_SPEC_DRAFT_GRAPH=none, LoRA "
               "and a config without a capture plan skip it (spec_decode.policy).",
        upstream="A runner-class hook in vLLM would replace the override.",
        overrides=("init_device", "compile_or_warm_up_model"),
        pinned_by=("test_worker_builds_the_v1_runner_by_module_lookup_inside_init_device",
                   "test_our_subclasses_override_only_what_we_mean_to",
                   "test_lora_reaches_the_draft_through_shared_target_modules_and_keys_vllms_graphs")),
    Divergence(
        "MUSA worker: device gate and sleep pool", "subclass", f"{_A}.worker.musa_worker:MusaWorker",
        ("vllm.v1.worker.gpu_worker:Worker.init_device", "vllm.v1.worker.gpu_worker:Worker._maybe_get_memory_pool_context"),
        what="device_config.device_type reads 'cuda' for the one init_device call (restored after, also on "
             "error); no sleep-mode memory pool unless sleep mode is on.",
        why="vLLM 0.26.0's Worker.init_device raises for any device type but cuda, and asks every non-CUDA-alike "
            "platform for a sleep-mode allocator MUSA has none of.",
        undone="Scoped to the call; sleep mode on gets vLLM's path.", upstream="vllm-musa patches the same gate.",
        overrides=("init_device", "_maybe_get_memory_pool_context", "compile_or_warm_up_model"),
        pinned_by=("test_worker_builds_the_v1_runner_by_module_lookup_inside_init_device",),
        platforms=("musa",)),
    Divergence(
        "V1 runner: our proposers", "scoped override", f"{_A}.worker.v1_model_runner:PortableV1ModelRunner",
        ("vllm.v1.worker.gpu_model_runner:EagleProposer", "vllm.v1.worker.gpu_model_runner:DFlashProposer",
         "vllm.v1.worker.gpu_model_runner:DraftModelProposer",
         "vllm.v1.worker.gpu_model_runner:GPUModelRunner.__init__"),
        what="While GPUModelRunner.__init__ runs, the runner module's EagleProposer/DFlashProposer/DraftModelProposer "
             "are our FULL-graph subclasses.",
        why="The runner builds its drafter by those module names.",
        undone="Restored when __init__ returns or raises.", upstream="A drafter-class hook would replace it.",
        pinned_by=("test_v1_runner_builds_its_drafter_by_module_lookup_and_has_capture_model",),
        requires="v1_full_drafter"),
    Divergence(
        "V1 runner: capture, warm-up, draft prep", "subclass", f"{_A}.worker.v1_model_runner:PortableV1ModelRunner",
        ("vllm.v1.worker.gpu_model_runner:GPUModelRunner.capture_model",
         "vllm.v1.worker.gpu_model_runner:GPUModelRunner.propose_draft_token_ids",
         "vllm.v1.worker.gpu_model_runner:GPUModelRunner._copy_valid_sampled_token_count"),
        what="After vLLM's capture_model: the drafter captures its graphs, an MoE target runs vLLM's _dummy_run at "
             "the token counts it runs eagerly (moe_size_warmup), and the kernel warm-up runs real steps. "
             "propose_draft_token_ids first offers the step to the drafter's propose_with_prep (the runner's draft "
             "prep inside the first pass's graph, with the count hand-off _copy_valid_sampled_token_count makes); "
             "it declines, and vLLM's method runs, wherever that is not exact.",
        why="Graphs at boot, no JIT on requests, and the V1 runner's per-step draft prep off the host.",
        undone="PORTABLE_SPEC_DRAFT_GRAPH=none or piecewise (vLLM's runner), PORTABLE_SPEC_WARMUP=off.",
        upstream="Model Runner V2 records its first pass as one graph and warms its kernels itself.",
        overrides=("__init__", "capture_model", "propose_draft_token_ids"),
        pinned_by=("test_the_v1_runners_draft_prep_we_fold_into_the_first_pass",
                   "test_warm_up_runs_before_the_worker_activates_the_jit_monitor",
                   "test_warm_up_puts_back_everything_a_v1_step_rebinds"),
        requires="v1_full_drafter"),
    Divergence(
        "EAGLE proposer: FULL graphs", "subclass", f"{_A}.spec_decode.proposer:FullGraphEagleProposer",
        ("vllm.v1.spec_decode.eagle:EagleProposer",
         "vllm.v1.spec_decode.llm_base_proposer:SpecDecodeBaseProposer.build_per_group_and_layer_attn_metadata",
         "vllm.v1.spec_decode.llm_base_proposer:SpecDecodeBaseProposer.propose",
         "vllm.v1.spec_decode.llm_base_proposer:SpecDecodeBaseProposer.set_inputs_first_pass",
         "vllm.v1.spec_decode.llm_base_proposer:SpecDecodeBaseProposer._greedy_sample",
         "vllm.model_executor.models.llama_eagle3:Eagle3LlamaForCausalLM.compute_logits",
         "vllm.model_executor.models.qwen3_eagle3:Eagle3Qwen3ForCausalLM.compute_logits",
         "vllm.model_executor.models.deepseek_eagle3:Eagle3DeepseekV2ForCausalLM.compute_logits",
         "vllm.v1.attention.backends.utils:NULL_BLOCK_ID",
         "vllm.v1.worker.gpu_model_runner:GPUModelRunner._build_attention_metadata"),
        what="Each metadata build announces which captured key the next forward replays (a ragged first pass "
             "only where the draft attention's graphs take mixed batches, AttentionCGSupport.ALWAYS); a chain step "
             "that replays a larger graph is built for that graph's batch, as vLLM's runner builds its own padded "
             "FULL graphs (padding rows: length-1 requests on the null block, no KV write; DFlash's padded block "
             "alike, with empty padding requests); propose runs "
             "the fused chain (one graph per step) after upstream's first pass; set_inputs_first_pass records the "
             "first pass's state for it. The fused graphs sample with vLLM's _greedy_sample, except for an EAGLE-3 "
             "draft vocabulary (those heads' compute_logits scatters the draft logits through d2t into a -inf "
             "target-vocabulary tensor): there they take the argmax over the draft logits and gather the target id "
             "through d2t, the same token (spec_decode.draft_sample; a map that does not rise strictly keeps the "
             "scatter).",
        why="vLLM 0.26.0's V1 drafter runs PIECEWISE at best.",
        undone="PORTABLE_SPEC_DRAFT_GRAPH=none|piecewise; per step, anything not captured runs upstream's code.",
        upstream="Model Runner V2's speculator has FULL graphs of its own.",
        overrides=("__init__", "build_per_group_and_layer_attn_metadata", "propose", "set_inputs_first_pass"),
        pinned_by=("test_proposer_chain_loop_shape_we_rely_on", "test_our_subclasses_override_only_what_we_mean_to",
                   "test_upstream_first_pass_alone_is_what_propose_with_one_token_runs",
                   "test_a_ragged_first_pass_is_told_on_the_host_and_replays_only_where_mixed_batches_are_exact",
                   "test_the_greedy_draft_sample_our_fused_graphs_record",
                   "test_each_eagle3_head_our_d2t_gather_stands_for_scatters_its_draft_logits"),
        requires="v1_full_drafter"),
    Divergence(
        "DFlash proposer: FULL graphs", "subclass", f"{_A}.spec_decode.proposer:FullGraphDFlashProposer",
        ("vllm.v1.spec_decode.dflash:DFlashProposer",
         "vllm.v1.spec_decode.llm_base_proposer:SpecDecodeBaseProposer.build_per_group_and_layer_attn_metadata"),
        what="The block step's metadata is copied into persistent buffers and its forward replays a block-aligned "
             "graph, the metadata built for that graph's batch (empty padding requests on the null block, as vLLM "
             "pads); the context K/V stays eager.",
        why="As for EAGLE: the V1 DFlash drafter has no FULL graphs.",
        undone="As for EAGLE.", upstream="As for EAGLE.",
        overrides=("__init__", "build_per_group_and_layer_attn_metadata"),
        pinned_by=("test_dflash_step_shape_we_rely_on",),
        requires="v1_full_drafter"),
    Divergence(
        "Draft-model proposer: FULL graphs", "subclass", f"{_A}.spec_decode.draft_model:FullGraphDraftModelProposer",
        ("vllm.v1.spec_decode.draft_model:DraftModelProposer",
         "vllm.v1.spec_decode.llm_base_proposer:SpecDecodeBaseProposer.build_per_group_and_layer_attn_metadata",
         "vllm.v1.spec_decode.llm_base_proposer:SpecDecodeBaseProposer.set_inputs_first_pass",
         "vllm.v1.spec_decode.utils:extend_all_queries_by_N"),
        what="The first pass's metadata (query_start_loc and seq_lens, which upstream builds fresh each step) is "
             "copied into persistent buffers and pointed there, same values; a uniform first pass of 2+K tokens per "
             "request at a captured size and every chain step (padded as for EAGLE) replay per-size FULL graphs; "
             "sampling stays upstream's, eager.",
        why="vLLM 0.26.0 and 0.28.0 run the separate draft model on the V1 runner with PIECEWISE graphs at most, and "
            "a draft model's many layers make its forwards launch-bound.",
        undone="As for EAGLE; a heterogeneous-vocabulary draft stays on vLLM's path (policy).",
        upstream="vLLM 0.33.0's Model Runner V2 standalone speculator captures no graphs.",
        overrides=("__init__", "build_per_group_and_layer_attn_metadata"),
        pinned_by=("test_draft_model_first_pass_shape_we_rely_on",),
        requires="v1_full_drafter"),
    Divergence(
        "MTP shared top-k indices: skip_topk per captured step", "instance override",
        f"{_A}.spec_decode.proposer:DrafterGraphMixin._set_mtp_skip_topk",
        ("vllm.model_executor.models.deepseek_mtp:DeepSeekMultiTokenPredictor.set_skip_topk",
         "vllm.model_executor.layers.mla:MultiHeadLatentAttentionWrapper.forward",
         "vllm.v1.spec_decode.llm_base_proposer:SpecDecodeBaseProposer.propose"),
        what="For a draft sharing its top-k indices across steps (index_share_for_mtp_iteration), each capture run "
             "sets the MTP layers' skip_topk through vLLM's own set_skip_topk as vLLM's eager propose sets it for "
             "that step: False for the first pass, True for chain steps; after capture, False.",
        why="skip_topk is a Python branch in the MLA attention's forward (run the indexer or not): a graph keeps "
            "the branch of its capture, and a chain graph captured with the indexer on would recompute indices "
            "vLLM's chain steps reuse.",
        undone="Set back to False after capture, as vLLM builds MTP layers; at run time upstream's propose sets it "
               "around every forward a replay stands in for.",
        upstream="Not a vLLM change: vLLM's own setter, called as its eager path calls it.",
        pinned_by=("test_mtp_skip_topk_is_a_python_branch_vllms_eager_propose_sets_per_step",),
        requires="v1_full_drafter"),
    Divergence(
        "draft model forward", "instance override", f"{_A}.spec_decode.proposer:ForwardReplay",
        ("torch.nn:Module.__call__", "vllm.model_executor.models.deepseek_mtp:DeepSeekMTP.__call__"),
        what="The draft model's instance attribute 'forward' replays the captured graph for an announced key and "
             "calls the class's forward otherwise; a draft class whose __call__ vLLM's @support_torch_compile "
             "replaced (MTP heads) gets, on that instance only, a same-named subclass whose __call__ does the same "
             "around the class's own (compiled) call.",
        why="proposer.model stays the real module for every isinstance check and attribute vLLM reads; a compiled "
            "class's call never reads forward, so the replay must sit on the call there.",
        undone="ForwardReplay.uninstall() deletes the instance attribute (and restores the instance's class).",
        upstream="Not a vLLM change: the module is ours to wrap once vLLM built it.",
        pinned_by=("test_drafter_forward_override_is_instance_level_and_reversible",
                   "test_drafter_replay_intercepts_a_model_whose_class_replaces_call",
                   "test_vllm_compiles_mtp_heads_at_their_class_and_eagle_heads_inside"),
        requires="v1_full_drafter"),
    Divergence(
        "Model Runner V2: sampled rounds after its boot warm-up", "scoped override",
        f"{_A}.worker.mrv2_warmup:with_sampled_rounds",
        ("vllm.v1.worker.gpu_worker:warmup_kernels", "vllm.v1.worker.gpu_worker:Worker.compile_or_warm_up_model",
         "vllm.v1.worker.gpu.warmup:warmup_kernels"),
        what="For the one compile_or_warm_up_model call of PortableWorker under Model Runner V2, swaps the worker "
             "module's warmup_kernels for one that runs vLLM's, then rounds of sampled requests (top-k, top-p, "
             "both, temperature, min-p, with and without logprobs, seeded and not, greedy with a sampled one "
             "joining; worker/mrv2_sampling_plan.py from vLLM 0.26.0, worker/mrv2_sampling_plan_028.py from 0.28.0 and "
             "worker/mrv2_sampling_plan_033.py from 0.33.0: greedy and temperature rounds with each logprobs width "
             "as well) through the worker's "
             "execute_model/sample_tokens, finishing every request.",
        why="MRV2's own warm-up runs one batch of one sampling variant, so its sampler and rejection sampler "
            "kernels (_temperature_kernel, _topk_topp_kernel, _compute_local_logits_stats_kernel, "
            "_rejection_kernel, _resample_kernel, ...) compile again at the first sampled request of another "
            "variant (0.28.0 and 0.33.0: the main sampler's _gumbel_sample_kernel on FP32 logits where FlashInfer "
            "samples, _topk_log_softmax_kernel per logprobs width, the rejection kernels on the model's dtype; "
            "0.28.0: _topk_topp_kernel per row class everywhere, no JIT registry names it; 0.33.0: the rejection "
            "kernels per row class, and, where vLLM's JIT registry does not warm it (MUSA), _topk_topp_kernel).",
        undone="Restored when compile_or_warm_up_model returns or raises; PORTABLE_SPEC_WARMUP=off, pipeline/data "
               "parallel, KV/EC transfer, EPLB, no speculation, adaptive verification, batch-sharded sampling, "
               "watermarking skip the rounds (one log line).",
        upstream="vLLM's MRV2 compiles these at the first sampled request.",
        pinned_by=("test_mrv2_worker_calls_warmup_kernels_by_module_lookup",
                   "test_mrv2_028_sampling_kernels_vary_as_the_sampled_warm_up_models_them",
                   "test_mrv2_033_sampling_kernels_vary_as_the_sampled_warm_up_models_them"),
        requires="mrv2_sampled_warmup", platforms=("cuda", "rocm", "musa"),
        moved=(("vllm.v1.worker.gpu_worker:Worker.compile_or_warm_up_model", "0.33.0",
                "vllm.v1.worker.gpu_worker:Worker._compile_or_warm_up_model"),)),
    Divergence(
        "Model Runner V2: our standalone draft model speculator", "scoped override",
        f"{_A}.worker.mrv2_speculator:installed",
        ("vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator:StandaloneARSpeculator",
         "vllm.v1.worker.gpu.spec_decode:init_speculator", "vllm.v1.worker.gpu.model_runner:GPUModelRunner.__init__",
         "vllm.v1.worker.gpu_worker:Worker.init_device"),
        what="For the one init_device call of PortableWorker under Model Runner V2 with method draft_model, the "
             "standalone_ar speculator module's StandaloneARSpeculator is our GraphedStandaloneARSpeculator, so "
             "init_speculator (which imports it from that module at the call) builds ours.",
        why="MRV2 builds its speculator by that module name inside GPUModelRunner.__init__, which init_device runs; "
            "no config names the speculator class.",
        undone="Restored when init_device returns or raises; PORTABLE_SPEC_DRAFT_GRAPH=none|piecewise, "
               "enforce_eager, a graph mode without FULL decode graphs, LoRA, adaptive verification, "
               "watermarking or data parallelism keep vLLM's class (one log line).",
        upstream="vLLM 0.33.0's StandaloneARSpeculator captures no graphs (\"CUDA graph not yet supported\").",
        pinned_by=("test_mrv2_builds_the_standalone_speculator_by_module_lookup_inside_init_device",),
        requires="mrv2_standalone_graphs"),
    Divergence(
        "Model Runner V2 standalone draft model: FULL step-0 and decode graphs", "subclass",
        f"{_A}.spec_decode.standalone_ar:GraphedStandaloneARSpeculator",
        ("vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator:StandaloneARSpeculator._multi_step_decode",
         "vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator:StandaloneARSpeculator._prefill",
         "vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator:prepare_prefill_inputs",
         "vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator:StandaloneARSpeculator._run_model",
         "vllm.v1.worker.gpu.spec_decode.speculator:DraftModelSpeculator._build_attn_metadata",
         "vllm.v1.worker.utils:get_uniform_decode_token_count",
         "vllm.v1.worker.gpu.spec_decode.target_dependent_ar.cudagraph_utils:SpeculatorCudaGraphManager",
         "vllm.v1.worker.gpu.spec_decode.speculator:DraftModelSpeculator.sample_draft",
         "vllm.v1.worker.gpu.spec_decode.speculator:DraftModelSpeculator._build_uniform_attn_metadata",
         "vllm.v1.worker.gpu.block_table:BlockTables.compute_slot_mappings",
         "vllm.v1.worker.gpu.cudagraph_utils:CudaGraphManager.dispatch",
         "vllm.v1.worker.gpu.cudagraph_utils:CudaGraphManager.run_fullgraph"),
        what="init_cudagraph_manager builds two MRV2 SpeculatorCudaGraphManagers (FULL_DECODE_ONLY, the platform's "
             "pool) as TargetDependentARSpeculator builds its decode one: step 0 at 2+K tokens per request, the "
             "decode steps (K > 1) at one; capture records vLLM's _run_model + sample_draft per size; _prefill, where "
             "every request decodes (vLLM's uniform-decode test), runs vLLM's input kernel, the slot mapping into the "
             "block tables' persistent buffer and vLLM's attention metadata for the pass, then replays; "
             "_multi_step_decode prepares each step's inputs, slot mapping and attention metadata as vLLM's eager "
             "loop does (plus the graph's padding rows) and replays where a size is captured. Elsewhere both call "
             "vLLM's eager code.",
        why="vLLM 0.33.0 runs every standalone draft step eagerly: a many-layer draft model is launch-bound at low "
            "concurrency.",
        undone="As the scoped override above; per batch, a size with no graph, a batch with a prefill or ragged "
               "queries (step 0), a dummy run without attention and the profile run take vLLM's eager steps.",
        upstream="Would go away when vLLM's StandaloneARSpeculator captures graphs itself.",
        overrides=("__init__", "init_cudagraph_manager", "capture", "_prefill", "_multi_step_decode"),
        pinned_by=("test_the_standalone_decode_loop_our_graphs_stand_in_for",
                   "test_the_standalone_step0_our_graphs_stand_in_for"),
        requires="mrv2_standalone_graphs"),
    Divergence(
        "Triton compile counter during the warm-up", "scoped override", f"{_A}.worker.kernel_warmup:counted_triton_compiles",
        ("triton.knobs:runtime.jit_post_compile_hook",),
        what="Counts the Triton compiles the warm-up causes (chaining any hook already set).",
        why="The warm-up's log line says how many kernels it compiled.",
        undone="Restored when the warm-up ends.", upstream="Triton's documented hook.",
        pinned_by=("test_triton_compile_counting_chains_and_restores_the_hook",),
        requires="v1_full_drafter"),
    Divergence(
        "Triton build counter during the warm-up", "scoped override", f"{_A}.worker.triton_builds:counted_triton_builds",
        ("triton.knobs:compilation.listener", "triton.backends.nvidia.compiler:get_ptxas_version"),
        what="Counts the Triton kernels the warm-up builds, compiled or loaded from Triton's disk cache (chaining any "
             "listener already set), and with PORTABLE_SPEC_LOG_TRITON_KEYS=on records each build's key parts.",
        why="The warm-up's log line says whether a slow warm-up compiled or found its kernels on disk, in which "
            "cache directory and with which ptxas version in the keys; the key parts tell two boots' keys apart.",
        undone="Restored when the warm-up ends.", upstream="Triton's documented compilation listener.",
        pinned_by=("test_triton_build_counting_tells_compiled_from_disk_chains_and_restores",
                   "test_tritons_key_holds_the_ptxas_version_it_first_read_whatever_the_variable_says_later"),
        requires="v1_full_drafter"),
    Divergence(
        "Triton cache folder of the boot warm-ups and of serving", "process setting",
        f"{_A}.worker.triton_cache:serve_in_start_folder",
        ("torch._inductor.runtime.cache_dir_utils:triton_cache_dir",
         "torch._inductor.runtime.triton_heuristics:CachingAutotuner",
         "triton.runtime.build:compile_module_from_src"),
        what="From our V1 runner's warm-ups (MoE sizes, kernel steps, structured output) on, and under Model Runner "
             "V2 from vLLM's warm-up with our sampled rounds on, TRITON_CACHE_DIR is what the process had when the "
             "runner was built (unset: Triton's default folder, named explicitly), not the folder inductor set it to "
             "while compiling the model or sets it to when it finds it unset later.",
        why="A boot that compiled the model built the warm-ups' kernels in that model's inductor folder; a boot that "
            "loads it looked in Triton's default folder and compiled them all again. And a kernel first launched "
            "while serving looks its launcher up in the folder named then: put back to inductor's folder after the "
            "warm-ups, a compiling boot rebuilt with the C compiler launchers the warm-ups had built, a pause of "
            "most of a second at its first sampled batch of two on Model Runner V2.",
        undone="Not put back: the engine's process keeps the folder (a caller's TRITON_CACHE_DIR is that folder, "
               "unchanged); PORTABLE_SPEC_WARMUP has no say, the runner names it either way.",
        upstream="Inductor sets TRITON_CACHE_DIR only where unset (triton_cache_dir under its cache folder; "
                 "CachingAutotuner does so when built); Triton keys a launcher by its C source alone and reads the "
                 "folder at each lookup.",
        pinned_by=("test_inductor_puts_tritons_cache_under_its_own_folder_only_where_unset",
                   "test_inductors_autotuner_sets_tritons_cache_folder_where_it_finds_it_unset",
                   "test_tritons_launcher_is_looked_up_in_the_folder_named_at_its_lookup")),
    Divergence(
        "kernel substitutions", "kernel substitution", "portable_spec.kernels.registry:install_substitutions",
        ("vllm.v1.spec_decode.utils:eagle_prepare_next_token_padded_kernel",
         "vllm.v1.attention.ops.triton_unified_attention:kernel_unified_attention",
         "vllm.v1.worker.gpu.block_table:_load_ptr",
         "vllm.v1.sample.ops.topk_topp_triton:_topk_topp_kernel"),
        what="Module globals holding vLLM Triton kernels and @triton.jit helpers rebound to ours (V1's drafter and "
             "TRITON_ATTN, Model Runner V2's block tables, sampler and rejection sampler, the top-k/top-p op both "
             "runners call): MUSA-Triton-3.2-safe rewrites on MUSA; batch-unspecialized launches on CUDA (same "
             "outputs). The table lists every module and attribute.",
        why="MUSA's Triton 3.2 rejects some of vLLM's kernels; on CUDA fewer variants compile at boot.",
        undone="kernels.registry.uninstall() restores every original; a port with no substitutions binds none.",
        upstream="vllm-musa patches kernels for MUSA in its own series: on vllm-musa our substitute for each kernel "
                 "it patches is left to it (vllm_musa_contract.DEFERRED_SUBSTITUTES), the rest are bound on top.",
        platforms=("cuda", "musa")),
)
