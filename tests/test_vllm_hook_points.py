"""Every vLLM symbol portable_spec hooks, checked against the installed vLLM: if vLLM moves or changes one, this fails
here (cpu lane) instead of our override silently missing its target. The cpu lane runs this module against every
vLLM of the version span (``tests/version_span.py``): where a hooked symbol moved, the census and these tests say since
when (``version_gate.pick``); a divergence that does not exist on a version (``Divergence.requires``) is skipped with
the version gate's one-line reason."""

from __future__ import annotations

import dataclasses
import inspect
import os
from pathlib import Path
import types

import pytest
from fake_toolchain import fake_ptxas
from lane_tools import import_triton
import torch

from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.patch.manifest import CENSUS as PRODUCT_CENSUS
from portable_spec_harness.vllm_door.census import HARNESS_CENSUS
from portable_spec.vllm_adapter.patch.overrides import HookPointMissing, overridden
from version_span import needs

V1_DRAFTER = needs("v1_full_drafter")
MRV2_STANDALONE = needs("mrv2_standalone_graphs")

CENSUS = PRODUCT_CENSUS + HARNESS_CENSUS
"""Every place we change vLLM: the product's census and the harness's (``vllm_door/census.py``)."""


def params(fn) -> list[str]:
    return list(inspect.signature(fn).parameters)


def test_worker_builds_the_v1_runner_by_module_lookup_inside_init_device():
    from vllm.v1.worker.gpu_worker import Worker

    source = inspect.getsource(Worker.init_device)
    assert 'if self.device_config.device_type == "cuda":' in source  # the gate MusaWorker passes
    # Where init_device builds the V1 runner, by a module lookup at call time (what PortableWorker swaps).
    builder, lookup = version_gate.pick({
        "0.26.0": ("init_device", "from vllm.v1.worker.gpu_model_runner import (\n                GPUModelRunner as "
                                  "GPUModelRunnerV1,"),
        "0.33.0": ("_make_model_runner", "from vllm.v1.worker.gpu_model_runner import GPUModelRunner as "
                                         "GPUModelRunnerV1")})
    if builder != "init_device":  # init_device calls it (0.33: through _init_workspace_and_model_runner)
        assert "self._init_workspace_and_model_runner()" in source
        assert "self.model_runner: GPUModelRunner = self._make_model_runner()" in inspect.getsource(
            Worker._init_workspace_and_model_runner)
    built = inspect.getsource(getattr(Worker, builder))
    assert lookup in built and "GPUModelRunnerV1(self.vllm_config, self.device)" in built


def test_mrv2_worker_calls_warmup_kernels_by_module_lookup():
    """What the MRV2 sampled warm-up swaps: the worker module's ``warmup_kernels`` global, called by name inside
    ``compile_or_warm_up_model`` with the worker's step functions, before the JIT monitor is activated; and the
    runner parts it reads (request states, KV connector switch, speculative steps)."""
    if not version_gate.has("mrv2_sampled_warmup"):
        pytest.skip(version_gate.why_not("mrv2_sampled_warmup"))
    import vllm.v1.worker.gpu_worker as module
    from vllm.v1.worker.gpu import warmup
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner

    assert module.warmup_kernels is warmup.warmup_kernels
    # 0.33: compile_or_warm_up_model runs _compile_or_warm_up_model (inside EPLB's suppress), which holds the call.
    body, monitor = version_gate.pick({"0.26.0": ("compile_or_warm_up_model", "activate_jit_monitor("),
                                       "0.33.0": ("_compile_or_warm_up_model", "self._maybe_activate_jit_monitor()")})
    if body != "compile_or_warm_up_model":
        assert f"return self.{body}()" in inspect.getsource(module.Worker.compile_or_warm_up_model)
    source = "".join(inspect.getsource(getattr(module.Worker, body)).split())  # 0.33 breaks the call over lines
    call = "warmup_kernels(self.model_runner,self.execute_model,self.sample_tokens)"
    assert call in source and source.index(call) < source.index(monitor)
    if body != "compile_or_warm_up_model":  # 0.33 zeroes the null block after its warm-up; ours does the same after
        assert "model_runner.kv_block_zeroer.zero_block_ids([0])" in inspect.getsource(warmup._warmup_kernels)
    init = inspect.getsource(GPUModelRunner.__init__)
    assert "self.num_speculative_steps" in init and "self.kv_connector" in inspect.getsource(GPUModelRunner)
    assert "self._remove_request(req_id)" in inspect.getsource(GPUModelRunner.finish_requests)


def test_mrv2_028_sampling_kernels_vary_as_the_sampled_warm_up_models_them():
    """``mrv2_sampling_plan_028``'s facts, each in vLLM 0.28.0's source: the FP32 copy and the FlashInfer rule it
    shares with 0.33.0's model, where it differs (``_topk_topp_kernel`` specializes ``BATCH_SIZE`` and runs from 8 rows
    on a GPU; the rejection kernels take no row count; no draft gather kernel), that no JIT registry names a sampling
    kernel, what vLLM's own warm-up samples with, and the set of kernels each sampling path launches (a new one fails
    here, not at a first request). ``tests/test_mrv2_sampled_compiles_028.py`` runs the launches themselves."""
    import re

    plan = version_gate.pick({"0.26.0": None, "0.28.0": "0.28", "0.33.0": None})
    if plan is None:
        pytest.skip("the 0.28 MRV2 sampling plan is held to vLLM 0.28.0 only")
    from pathlib import Path

    import vllm
    from vllm.config.model import PROCESSED_LOGPROBS_MODES
    from vllm.v1.sample.ops import topk_topp_sampler, topk_topp_triton
    from vllm.v1.worker.gpu import warmup
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner
    from vllm.v1.worker.gpu.sample import gumbel, logprob, min_p, sampler, states
    from vllm.v1.worker.gpu.spec_decode import rejection_sampler, rejection_sampler_utils

    from portable_spec.kernels.fixed_tile import next_pow2
    from portable_spec.vllm_adapter.worker import mrv2_sampling_plan_033 as model  # 0.28.0's model keeps its names
    from portable_spec.vllm_adapter.worker.sampling_plan import TRITON_MIN_ROWS
    from portable_spec.vllm_adapter.worker.warmup_plan import OTHER

    def src(obj) -> str:
        return "".join(inspect.getsource(obj).split())

    def launched(obj) -> set[str]:
        return set(re.findall(r"(_\w+_kernel)\[", src(obj)))

    def params(kernel) -> list[str]:
        return list(inspect.signature(kernel.fn if hasattr(kernel, "fn") else kernel).parameters)

    warmups = Path(vllm.__file__).parent / "model_executor" / "warmup"
    sampling_kernels = {model.TEMPERATURE, model.MIN_P, model.GUMBEL, "_topk_topp_kernel", model.STATS,
                        model.REJECTION, model.RESAMPLE, model.LOG_SOFTMAX, model.RANKS, model.FLATTEN}
    registry_names = {name for f in warmups.glob("*.py") for name in sampling_kernels if name in f.read_text()}
    checks = [
        (set(PROCESSED_LOGPROBS_MODES), set(model.PROCESSED_MODES)),
        (logprob._MAX_TOPK_BLOCK, model.MAX_TOPK_BLOCK),
        ("topk_block_size=min(triton.next_power_of_2(num_logprobs),_MAX_TOPK_BLOCK)" in src(logprob), True),
        (model.logprobs_key(5), (next_pow2(6), OTHER)),
        # _topk_topp_kernel: BATCH_SIZE an ordinary integer argument (specialized), no split top-p constexpr.
        ("@triton.jitdef_topk_topp_kernel(" in src(topk_topp_triton), True),
        ("do_not_specialize" in src(topk_topp_triton), False),
        ("BATCH_SIZE" in params(topk_topp_triton._topk_topp_kernel), True),
        ("SPLIT_COVERS_PONLY" in src(topk_topp_triton), False),
        ("TOPK_ENABLED=topk_enabled,TOPP_ENABLED=topp_enabled," in src(topk_topp_triton), True),
        (f"ifHAS_TRITONandlogits.shape[0]>={TRITON_MIN_ROWS}:returnapply_top_k_top_p_triton(logits,k,p)"
         in src(topk_topp_sampler.apply_top_k_top_p), True),
        ("logits=torch.empty_like(logits,dtype=torch.float32).copy_(logits)"
         in src(sampler.Sampler.apply_sampling_params), True),
        ("ifnotnp.any(self.needs_logits_processing[idx_mapping_np]):returnlogits"
         in src(sampler.Sampler.apply_sampling_params), True),
        ("or(temperature!=0.0andtemperature!=1.0)orstates.min_p.np[req_idx]!=0.0orstates.top_k.np[req_idx]!="
         "states.vocab_sizeorstates.top_p.np[req_idx]!=1.0" in src(sampler.Sampler.add_request), True),
        ("orself.sampling_states.any_greedy(idx_mapping_np)orself.sampling_states.any_explicit_seed(idx_mapping_np)"
         in src(sampler.Sampler.sample), True),
        ("apply_temperature=False," in src(sampler.Sampler.sample), True),
        ("ifnp.all((temp_np==0.0)|(temp_np==1.0)):" in src(states.SamplingStates.apply_temperature), True),
        ("ifinput_batch.num_draft_tokens==0orself.rejection_samplerisNone:" in src(GPUModelRunner.sample), True),
        # the rejection sampler filters its logits rows with top-k/top-p (apply_sampling_params' default)
        ("processed_logits=self.sampler.apply_sampling_params(logits,expanded_idx_mapping,idx_mapping,"
         "idx_mapping_np,pos,draft_sampled,expanded_local_pos,)" in src(rejection_sampler.RejectionSampler._verify),
         True),
        ("draft_sampled=input_batch.input_ids[input_batch.logits_indices]"
         in src(rejection_sampler.RejectionSampler.__call__), True),
        # the rejection kernels take no row count (0.33.0's num_logits)
        ("num_logits" in params(rejection_sampler_utils._compute_local_logits_stats_kernel)
         + params(rejection_sampler_utils._compute_local_residual_mass_kernel), False),
        ("SamplingParams.for_sampler_warmup()" in src(warmup.warmup_kernels), True),
        (registry_names, set()),
        (launched(gumbel), {model.TEMPERATURE, model.GUMBEL}),
        (launched(min_p), {model.MIN_P}),
        (launched(logprob.compute_token_logprobs) | launched(logprob.compute_topk_scores),
         {model.LOG_SOFTMAX, model.RANKS, "_fill_logprob_token_ids_kernel"}),  # logprob_token_ids: not modeled
        (launched(rejection_sampler), {model.FLATTEN}),
        (launched(rejection_sampler_utils.rejection_sample), {
            model.STATS, model.CUMULATIVE, model.RESIDUAL, model.REJECTION, model.RESAMPLE,
            "_insert_resampled_kernel"}),  # no logits, no varying integer: vLLM's warm-up compiles its one variant
    ]
    wrong = [(i, found, expected) for i, (found, expected) in enumerate(checks) if found != expected]
    assert len(checks) == 27 and not wrong


def test_mrv2_033_sampling_kernels_vary_as_the_sampled_warm_up_models_them():
    """``mrv2_sampling_plan_033``'s facts, each in vLLM 0.33.0's source: what a kernel specializes on, when the logits
    are FP32, when the main sampler leaves Triton, where the rejection sampler runs, which kernels vLLM's registry
    warms, and the set of kernels each sampling path launches (a new one fails here, not at a first request)."""
    import re

    plan = version_gate.pick({"0.26.0": None, "0.28.0": None, "0.33.0": "0.33"})
    if plan is None or not version_gate.has("mrv2_sampled_warmup"):
        pytest.skip("the 0.33 MRV2 sampling plan is held to vLLM 0.33.0 only")
    from vllm.config.model import PROCESSED_LOGPROBS_MODES
    from vllm.v1.sample.ops import topk_topp_triton
    from vllm.v1.worker.gpu import warmup
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner
    from vllm.v1.worker.gpu.sample import gumbel, logprob, min_p, sampler, states
    from vllm.v1.worker.gpu.spec_decode import rejection_sampler, rejection_sampler_utils

    from portable_spec.vllm_adapter.worker import mrv2_sampling_plan_033 as model

    def src(obj) -> str:
        return "".join(inspect.getsource(obj).split())

    def launched(obj) -> set[str]:
        return set(re.findall(r"(_\w+_kernel)\[", src(obj)))

    checks = [
        (set(PROCESSED_LOGPROBS_MODES), set(model.PROCESSED_MODES)),
        (logprob._MAX_TOPK_BLOCK, model.MAX_TOPK_BLOCK),
        ("topk_block_size=min(triton.next_power_of_2(num_logprobs),_MAX_TOPK_BLOCK)" in src(logprob), True),
        ('@triton.jit(do_not_specialize_on_alignment=["BATCH_SIZE"])def_topk_topp_kernel(' in src(topk_topp_triton),
         True),
        ("k_ptriftopk_enabledelseNone,p_ptriftopp_enabledelseNone," in src(topk_topp_triton), True),
        ("logits=torch.empty_like(logits,dtype=torch.float32).copy_(logits)"
         in src(sampler.Sampler.apply_sampling_params), True),
        ("returntemperature!=0.0and(temperature!=1.0ormin_p!=0.0ortop_k!=self.vocab_sizeortop_p!=1.0)"
         in src(states.SamplingStates.add_request), True),
        ("orself.sampling_states.any_greedy(idx_mapping_np)orself.sampling_states.any_explicit_seed(idx_mapping_np)"
         in src(sampler.Sampler.sample), True),
        ("apply_temperature=False,is_drafting=False," in src(sampler.Sampler._sample_random), True),
        ("elifinput_batch.num_draft_tokens==0orself.rejection_samplerisNone:" in src(GPUModelRunner.sample), True),
        ("current_platform.is_rocm()or(current_platform.is_cuda()andself.speculative_configisnotNone)"
         in src(GPUModelRunner), True),
        ("SamplingParams(temperature=0)ifgreedyelseSamplingParams.for_sampler_warmup()" in src(warmup), True),
        (launched(gumbel), {model.TEMPERATURE, model.GUMBEL}),
        (launched(min_p), {model.MIN_P}),
        (launched(logprob.compute_token_logprobs) | launched(logprob.compute_topk_scores),
         {model.LOG_SOFTMAX, model.RANKS, "_fill_logprob_token_ids_kernel"}),  # logprob_token_ids: not modeled
        (launched(rejection_sampler), {model.FLATTEN, model.GATHER}),
        (launched(rejection_sampler_utils.rejection_sample), {
            model.STATS, model.CUMULATIVE, model.RESIDUAL, model.REJECTION, model.RESAMPLE,
            "_insert_resampled_kernel"}),  # no logits, no varying integer: vLLM's warm-up compiles its one variant
    ]
    wrong = [(i, found, expected) for i, (found, expected) in enumerate(checks) if found != expected]
    assert len(checks) == 17 and not wrong


def test_v1_runner_builds_its_drafter_by_module_lookup_and_has_capture_model():
    import vllm.v1.worker.gpu_model_runner as module

    assert hasattr(module, "EagleProposer") and hasattr(module, "GPUModelRunner")
    source = inspect.getsource(module.GPUModelRunner.__init__)
    assert "EagleProposer(self.vllm_config, self.device, self)" in source
    assert "DFlashProposer(self.vllm_config, self.device, self)" in source
    assert params(module.GPUModelRunner.capture_model) == ["self"]
    assert "self.seq_lens = torch.zeros(" in source


def test_proposer_chain_loop_shape_we_rely_on():
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    assert params(SpecDecodeBaseProposer.build_per_group_and_layer_attn_metadata) == [
        "self", "common_attn_metadata", "draft_index"]
    propose = inspect.getsource(SpecDecodeBaseProposer.propose)
    assert "common_attn_metadata.query_start_loc = self.arange[: batch_size + 1]" in propose
    assert "common_attn_metadata, draft_index=token_index + 1" in propose
    assert "ret_hidden_states = self.model(**model_kwargs)" in propose
    assert "self.hidden_states[:batch_size] = hidden_states" in propose
    assert params(SpecDecodeBaseProposer._get_positions)[:2] == ["self", "num_tokens"]
    assert params(SpecDecodeBaseProposer._get_slot_mapping) == ["self", "num_tokens", "slot_mapping"]
    init = inspect.getsource(SpecDecodeBaseProposer.__init__)
    for buffer in ("self.arange = torch.arange(", "self.input_ids = torch.zeros(", "self.hidden_states = torch.zeros(",
                   "self._slot_mapping_buffer = torch.zeros(", "self.token_arange_np = np.arange("):
        assert buffer in init, buffer


def test_eagle_proposer_receives_the_runner():
    from vllm.v1.spec_decode.eagle import EagleProposer

    assert params(EagleProposer.__init__) == ["self", "vllm_config", "device", "runner"]
    assert "runner" in inspect.getsource(EagleProposer.__init__)


def test_dflash_step_shape_we_rely_on():
    from vllm.v1.spec_decode.dflash import DFlashProposer

    first = inspect.getsource(DFlashProposer.set_inputs_first_pass)
    assert "new_query_start_loc = self.arange[: batch_size + 1] * num_query_per_req" in first
    assert "seq_lens=effective_seq_lens + num_query_per_req" in first
    assert "slot_mapping=query_slot_mapping" in first and "max_query_len=num_query_per_req" in first
    inputs = inspect.getsource(DFlashProposer.build_model_inputs_first_pass)
    assert "input_ids=self.input_ids[:num_input_tokens]" in inputs and "inputs_embeds=None" in inputs
    assert "precompute_and_store_context_kv" in inputs  # context K/V stays outside our graphs
    init = inspect.getsource(DFlashProposer.__init__)
    assert "self._slot_mapping_buffer = torch.zeros(" in init and "self.positions = torch.zeros(" in init


def test_draft_model_first_pass_shape_we_rely_on():
    """What ``FullGraphDraftModelProposer`` stands on: a draft model passes no hidden states, so vLLM appends the
    next token to each request's verified tokens (one extra slot per request: 2+K tokens for a verify-shaped pass),
    in a metadata object built fresh (``extend_all_queries_by_N``) that its chain loop then advances in place."""
    from vllm.v1.spec_decode.draft_model import DraftModelProposer
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer
    from vllm.v1.spec_decode.utils import extend_all_queries_by_N

    assert "pass_hidden_states_to_model=False" in inspect.getsource(DraftModelProposer.__init__)
    base_init = inspect.getsource(SpecDecodeBaseProposer.__init__)
    assert "1 if not self.parallel_drafting else self.num_speculative_tokens" in base_init
    assert "self.needs_extra_input_slots = self.net_num_new_slots_per_request > 0" in base_init
    first = inspect.getsource(SpecDecodeBaseProposer.set_inputs_first_pass)
    assert "new_cad = extend_all_queries_by_N(" in first and "return total_num_output_tokens, " in first
    extend = inspect.getsource(extend_all_queries_by_N)
    assert "seq_lens=cad.seq_lens + N" in extend and "max_query_len=cad.max_query_len + N" in extend
    propose = inspect.getsource(SpecDecodeBaseProposer.propose)
    # the metadata object our hook moves onto persistent buffers is the one the chain then advances
    assert "self.build_per_group_and_layer_attn_metadata(common_attn_metadata)" in propose
    assert "common_attn_metadata.seq_lens -= num_rejected_tokens_gpu" in propose
    assert not {"build_per_group_and_layer_attn_metadata", "propose"} & set(vars(DraftModelProposer))


def test_common_attention_metadata_fields():
    from vllm.v1.attention.backend import AttentionCGSupport, CommonAttentionMetadata

    names = {f.name for f in dataclasses.fields(CommonAttentionMetadata)}
    assert {"query_start_loc", "query_start_loc_cpu", "seq_lens", "num_reqs", "num_actual_tokens", "max_query_len",
            "max_seq_len", "block_table_tensor", "slot_mapping", "causal"} <= names
    assert AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE.value < AttentionCGSupport.UNIFORM_BATCH.value


def test_forward_context_and_platform_hooks():
    from vllm.forward_context import set_forward_context
    from vllm.platforms.interface import Platform

    assert params(set_forward_context)[:3] == ["attn_metadata", "vllm_config", "num_tokens"]
    assert "slot_mapping" in params(set_forward_context)
    for hook in ("apply_config_platform_defaults", "check_and_update_config", "get_global_graph_pool",
                 "support_static_graph_mode", "get_static_graph_wrapper_cls"):
        assert callable(getattr(Platform, hook)), hook


def test_our_subclasses_override_only_what_we_mean_to():
    from portable_spec.vllm_adapter.spec_decode.proposer import FullGraphEagleProposer
    from portable_spec.vllm_adapter.worker.v1_model_runner import PortableV1ModelRunner
    from portable_spec.vllm_adapter.worker.gpu_worker import PortableWorker

    assert set(vars(PortableWorker)) - {"__module__", "__doc__", "__qualname__", "__firstlineno__",
                                        "__static_attributes__"} == {"init_device",
                                                                   "compile_or_warm_up_model"}
    assert {"__init__", "capture_model", "propose_draft_token_ids"} <= set(vars(PortableV1ModelRunner))
    ours = {name for cls in FullGraphEagleProposer.__mro__[:4] for name in vars(cls) if not name.startswith("__")}
    upstream = {name for cls in FullGraphEagleProposer.__mro__[4:] for name in vars(cls)}
    assert FullGraphEagleProposer.__mro__[4].__name__ == "EagleProposer"
    # The upstream methods we wrap (each calls super()); everything else of ours is new, not a silent override.
    assert ours & upstream == {"propose", "set_inputs_first_pass", "build_per_group_and_layer_attn_metadata"}
    init = inspect.getsource(module_runner_init())
    assert "self.query_start_loc = self._make_buffer(" in init


@V1_DRAFTER
def test_the_v1_runners_draft_prep_we_fold_into_the_first_pass():
    """``spec_decode.draft_prep`` does what vLLM 0.26.0's runner and proposer do before and in the first pass (padded drafter
    batch, EAGLE): the same kernels with the same arguments, the same backup tokens, the same hand-off, the same
    first-pass inputs. If vLLM changes any of it, this fails and the fold must be re-derived."""
    from vllm.v1.spec_decode import llm_base_proposer, utils
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    assert params(GPUModelRunner.propose_draft_token_ids) == [
        "self", "scheduler_output", "sampled_token_ids", "sampling_metadata", "hidden_states",
        "sample_hidden_states", "aux_hidden_states", "spec_decode_metadata", "common_attn_metadata",
        "slot_mappings"]
    runner = inspect.getsource(GPUModelRunner.propose_draft_token_ids)
    eagle = runner[runner.index("spec_config.use_eagle()\n            or spec_config.use_dflash()"):]
    order = ["self.drafter.prepare_next_token_ids_padded(", "self._copy_valid_sampled_token_count(",
             "get_mtp_target_hidden_states", "self.drafter.prepare_inputs_padded(",
             "target_token_ids = self.input_ids.gpu[:total_num_tokens]",
             "target_positions = self._get_positions(total_num_tokens)",
             "[h[:total_num_tokens] for h in aux_hidden_states], dim=-1",
             "target_hidden_states = hidden_states[:total_num_tokens]", "self.drafter.propose("]
    at = [eagle.index(text) for text in order]
    assert at == sorted(at)
    assert "self._draft_probs = None\n        self._draft_prob_req_ids = None" in runner
    base = llm_base_proposer.SpecDecodeBaseProposer
    nxt = inspect.getsource(base.prepare_next_token_ids_padded)
    assert ("requests[\n                gpu_input_batch.req_ids[i]\n            ].get_token_id("
            "gpu_input_batch.num_tokens_no_spec[i] - 1)") in nxt
    assert "self.backup_next_token_ids.copy_to_gpu(num_reqs)" in nxt
    assert ("sampled_token_ids,\n            discard_request_mask,\n            backup_tokens_gpu,\n"
            "            next_token_ids,\n            valid_sampled_tokens_count,\n"
            "            gpu_input_batch.vocab_size,\n            num_tokens,\n            batch_size,\n"
            "            sampled_token_ids.stride(0),\n            BLOCK_SIZE_TOKENS=BLOCK_SIZE_TOKENS,") in nxt
    padded = inspect.getsource(base.prepare_inputs_padded)
    assert ("spec_decode_metadata.cu_num_draft_tokens,\n            valid_sampled_tokens_count,\n"
            "            common_attn_metadata.query_start_loc,\n            token_indices_to_sample,\n"
            "            num_rejected_tokens_gpu,\n            num_reqs,") in padded
    assert "slot_mapping=common_attn_metadata.slot_mapping[:total_num_tokens]" in padded
    for kernel, names in (("eagle_prepare_next_token_padded_kernel", [
            "sampled_token_ids_ptr", "discard_request_mask_ptr", "backup_next_token_ids_ptr", "next_token_ids_ptr",
            "valid_sampled_tokens_count_ptr", "vocab_size", "num_sampled_tokens_per_req", "num_reqs",
            "stride_sampled_token_ids", "BLOCK_SIZE_TOKENS"]),
            ("eagle_prepare_inputs_padded_kernel", [
                "cu_num_draft_tokens_ptr", "valid_sampled_tokens_count_ptr", "query_start_loc_gpu_ptr",
                "token_indices_to_sample_ptr", "num_rejected_tokens_gpu_ptr", "num_reqs"])):
        jit = getattr(utils, kernel)
        assert params(getattr(jit, "fn", jit)) == names, kernel  # a Triton JIT function, or vLLM's CPU placeholder
        assert getattr(llm_base_proposer, kernel) is getattr(utils, kernel)  # we launch it by the proposer's name
    first = inspect.getsource(base.set_inputs_first_pass)
    for line in ("self.input_ids[: num_tokens - 1] = target_token_ids[1:]",
                 "self.input_ids[token_indices_to_sample] = next_token_ids",
                 "self._set_positions(num_tokens, target_positions)",
                 "self.hidden_states[:num_tokens] = target_hidden_states"):
        assert line in first, line
    propose = inspect.getsource(base.propose)
    assert propose.index("self.model.combine_hidden_states(") < propose.index("self.set_inputs_first_pass(")
    assert "common_attn_metadata.slot_mapping" in propose.split("ret_hidden_states = self.model(")[0]
    # What vLLM's hand-off leaves for the next step (``spec_decode.draft_prep.hand_off_counts`` leaves the same).
    hand_off = inspect.getsource(GPUModelRunner._copy_valid_sampled_token_count)
    for line in ("if self.valid_sampled_token_count_event is None:\n            return",
                 "counts_cpu[: counts.shape[0]].copy_(counts, non_blocking=True)",
                 "self.valid_sampled_token_count_event.record()", "if self.use_async_spec_decode:",
                 "self.valid_sampled_token_count_gpu = valid_sampled_tokens_count",
                 "self.input_batch.prev_sampled_token_ids = next_token_ids.unsqueeze(1)"):
        assert line in hand_off, line
    assert hand_off.count("self.") == 8  # nothing else of the runner is read or written
    # The drafter gets unpadded metadata: one row per request, as many as the sampled rows.
    build = inspect.getsource(GPUModelRunner._build_attention_metadata)
    assert "spec_decode_common_attn_metadata.unpadded(num_tokens, num_reqs)" in build


def module_runner_init():
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    return GPUModelRunner.__init__


def test_first_pass_runs_on_the_runners_persistent_query_start_loc():
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    build = inspect.getsource(SpecDecodeBaseProposer.build_model_inputs_first_pass)
    assert '"input_ids": input_ids' in build and "self.input_ids[:num_input_tokens]" in build
    padded = inspect.getsource(SpecDecodeBaseProposer.prepare_inputs_padded)
    assert "query_start_loc=common_attn_metadata.query_start_loc" in padded
    assert "seq_lens=common_attn_metadata.seq_lens" in padded


def vllm_source(relative: str) -> str:
    """The text of an installed vLLM file, for modules that do not import on a CPU host."""
    import importlib.util
    from pathlib import Path

    return (Path(importlib.util.find_spec("vllm").origin).parent / relative).read_text()


def test_a_ragged_first_pass_is_told_on_the_host_and_replays_only_where_mixed_batches_are_exact():
    """What ``FullGraphEagleProposer._verify_shaped`` relies on: the drafter's first-pass metadata counts the real
    requests and tokens and the longest query as host integers; vLLM calls a batch uniform by exactly the test
    ``uniform_queries`` makes; ALWAYS graphs take mixed batches, UNIFORM_BATCH ones (FlashMLA, FlashAttnMLA) only
    uniform ones (FlashMLA reshapes the decode queries by the request count)."""
    from vllm.v1.attention.backend import AttentionCGSupport
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    padded = inspect.getsource(SpecDecodeBaseProposer.prepare_inputs_padded)
    for line in ("total_num_tokens = query_start_loc_cpu[-1].item()", "num_reqs=common_attn_metadata.num_reqs,",
                 "num_actual_tokens=total_num_tokens,", "max_query_len=new_query_len_per_req.max().item(),"):
        assert line in padded, line
    uniform = inspect.getsource(GPUModelRunner._is_uniform_decode)
    assert "(max_num_scheduled_tokens == uniform_decode_query_len)" in uniform
    assert "(num_tokens == max_num_scheduled_tokens * num_reqs)" in uniform
    support = inspect.getsource(AttentionCGSupport)
    assert "Cudagraph always supported; supports mixed-prefill-decode" in support
    assert "Cudagraph supported for batches the only contain query lengths that are\n    the same" in support
    flashmla = vllm_source("v1/attention/backends/mla/flashmla.py")
    assert "_cudagraph_support: ClassVar[AttentionCGSupport] = AttentionCGSupport.UNIFORM_BATCH" in flashmla
    assert "q = reshape_query_for_spec_decode(q, num_decodes)" in flashmla
    assert "_cudagraph_support: ClassVar[AttentionCGSupport] = AttentionCGSupport.UNIFORM_BATCH" in vllm_source(
        "v1/attention/backends/mla/flashattn_mla.py")


def test_the_greedy_draft_sample_our_fused_graphs_record():
    """``fused_chain.vocab_flags``: vLLM's greedy draft sample is ``compute_logits`` + argmax, fed back as the next
    input id, unless local argmax reduction or heterogeneous vocabularies are on; an EAGLE-3 draft vocabulary's
    ``d2t`` map is applied inside ``compute_logits``, so the fused graphs record it."""
    from vllm.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    sample = inspect.getsource(SpecDecodeBaseProposer._greedy_sample)
    assert sample.index("if self.use_local_argmax_reduction:\n            return self.model.get_top_tokens(") < (
        sample.index("if self.use_heterogeneous_vocab:")) < sample.index(
        "return self.model.compute_logits(hidden_states).argmax(dim=-1)")
    draft = inspect.getsource(SpecDecodeBaseProposer._sample_draft_tokens)
    assert "if not self._enable_probabilistic_draft_probs or sampling_metadata.all_greedy:\n" \
        "            return self._greedy_sample(hidden_states), None" in draft
    propose = inspect.getsource(SpecDecodeBaseProposer.propose)
    assert "input_ids = draft_token_ids_list[-1].int()" in propose
    assert "if self.use_heterogeneous_vocab:" in propose and "map_target_to_draft_ids(input_ids)" in propose
    assert 'name = name.replace("d2t", "draft_id_to_target_id")' in inspect.getsource(
        Eagle3LlamaForCausalLM.load_weights)


def test_each_eagle3_head_our_d2t_gather_stands_for_scatters_its_draft_logits():
    """``draft_sample.scatter_heads``: each one's ``compute_logits`` is the logits processor over its own lm_head,
    then a -inf tensor of the target vocabulary with the draft logits written at ``arange + d2t``, which the d2t
    gather reproduces (shown token for token in ``tests/test_eagle3_draft_vocabulary.py``); the heads' local argmax
    (``get_top_tokens``) is an argmax, then the same map."""
    from vllm.model_executor.models.interfaces import LocalArgmaxMixin

    from portable_spec.vllm_adapter.spec_decode.draft_sample import scatter_heads

    for head in scatter_heads():
        source = inspect.getsource(head.compute_logits)
        steps = ["logits = self.logits_processor(self.lm_head, hidden_states)",
                 "base = torch.arange(self.config.draft_vocab_size, device=logits.device)",
                 "targets = base + self.draft_id_to_target_id", 'float("-inf")', "logits_new[:, targets] = logits",
                 "return logits_new"]
        assert all(step in source for step in steps), head.__name__
        assert [source.index(step) for step in steps] == sorted(source.index(step) for step in steps), head.__name__
    top = inspect.getsource(LocalArgmaxMixin.get_top_tokens)
    assert "top = top + d2t[top]" in top


def test_lora_reaches_the_draft_through_shared_target_modules_and_keys_vllms_graphs():
    """``policy``'s LoRA decline: vLLM wraps the target for LoRA before the drafter loads and shares the target's
    embedding with a draft that has none (always MTP); LoRA wraps a plain vocabulary embedding; vLLM keys its own
    graphs on the adapters' state, which our draft keys do not carry."""
    from vllm.config import VllmConfig
    from vllm.forward_context import BatchDescriptor
    from vllm.lora.layers import VocabParallelEmbeddingWithLoRA
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    assert "lora_config" in {f.name for f in dataclasses.fields(VllmConfig)}
    load = inspect.getsource(GPUModelRunner.load_model)
    assert load.index("self.model = self.load_lora_model(") < load.index("self.drafter.load_model(self.model)")
    share = inspect.getsource(SpecDecodeBaseProposer._maybe_share_embeddings)
    assert "self.model.model.embed_tokens = target_embed_tokens" in share and "# MTP model" in share
    assert version_gate.pick({  # 0.28: subclasses of the plain embedding too (none of them an lm_head)
        "0.26.0": "type(source_layer) is maybe_get_oot_by_class(VocabParallelEmbedding)",
        "0.28.0": "return isinstance(source_layer, embedding_classes) and not isinstance(\n            source_layer, "
                  "lm_head_classes\n        )"}) in inspect.getsource(VocabParallelEmbeddingWithLoRA.can_replace_layer)
    assert {"has_lora", "num_active_loras"} <= {f.name for f in dataclasses.fields(BatchDescriptor)}


@V1_DRAFTER
def test_mtp_skip_topk_is_a_python_branch_vllms_eager_propose_sets_per_step():
    """``DrafterGraphMixin._set_mtp_skip_topk``: the name of the flag, who sets it and when. vLLM's propose sets
    ``skip_topk`` False before the first pass's forward and True after it (before the chain), only for drafts that
    share their top-k indices; the MTP model's ``set_skip_topk`` sets its layers' MLA attention flag, which the
    forward reads as a Python branch (so a graph keeps the branch of its capture); MTP layers start with False."""
    from vllm.model_executor.layers.mla import MultiHeadLatentAttentionWrapper
    from vllm.model_executor.models.deepseek_mtp import DeepSeekMultiTokenPredictor
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    propose = inspect.getsource(SpecDecodeBaseProposer.propose)
    guard = 'if self._share_mtp_indices and hasattr(self.model.model, "set_skip_topk"):'
    first_forward = propose.index("ret_hidden_states = self.model(**model_kwargs)")
    assert propose.index(guard + "\n            self.model.model.set_skip_topk(False)") < first_forward
    after = propose.index(guard + "\n            self.model.model.set_skip_topk(True)")
    assert first_forward < after < propose.index("for token_index in range(self.num_speculative_tokens - 1):")
    assert propose.count("set_skip_topk(") == 2  # nothing sets it inside the chain loop
    assert "self._share_mtp_indices = getattr(\n            draft_hf_config, \"index_share_for_mtp_iteration\"" in (
        inspect.getsource(SpecDecodeBaseProposer._maybe_share_lm_head))  # read when the drafter loads
    setter = inspect.getsource(DeepSeekMultiTokenPredictor.set_skip_topk)
    assert "mla_attn.skip_topk = skip" in setter
    assert "if self.indexer and self.is_sparse and not self.skip_topk:" in inspect.getsource(
        MultiHeadLatentAttentionWrapper.forward)
    assert "self_attn.skip_topk = skip" in vllm_source("models/deepseek_v32/nvidia/mtp.py")
    assert "if self.indexer is not None and not self.skip_topk:" in vllm_source(version_gate.pick({
        "0.26.0": "models/deepseek_v32/nvidia/attention.py", "0.28.0": "models/deepseek_v32/attention.py"}))
    assert "skip_topk=_skip_topk and not is_mtp_layer," in vllm_source("model_executor/models/deepseek_v2.py")


def test_overridden_restores_and_refuses_missing_attributes():
    import vllm.v1.worker.gpu_model_runner as module

    original = module.EagleProposer
    with overridden(module, "EagleProposer", int) as saved:
        assert module.EagleProposer is int and saved is original
    assert module.EagleProposer is original
    with pytest.raises(RuntimeError):
        with overridden(module, "EagleProposer", int):
            raise RuntimeError("body failed")
    assert module.EagleProposer is original
    with pytest.raises(HookPointMissing, match="pin vllm==0.26.0"):
        with overridden(module, "NoSuchProposer", int):
            pass


def test_drafter_forward_override_is_instance_level_and_reversible():
    from portable_spec.vllm_adapter.spec_decode.proposer import ForwardReplay

    class Proposer:
        def pending_key(self, kwargs):
            return None

    model, proposer = torch.nn.Linear(2, 2), Proposer()
    graphs = ForwardReplay(model, proposer)
    graphs.install()
    x = torch.ones(1, 2)
    assert torch.equal(model(x), torch.nn.Linear.forward(model, x))  # nothing pending: the model's own forward
    assert isinstance(model, torch.nn.Linear) and torch.equal(graphs.last_output, model(x))
    graphs.uninstall()
    assert "forward" not in model.__dict__


class _CompiledCall(torch.nn.Module):
    """A draft model whose class replaces ``__call__`` the way vLLM's ``@support_torch_compile`` does: the call runs a
    function of its own (the compiled code) and never reads ``self.forward``."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        raise AssertionError("the compiled call never runs forward")

    def __call__(self, x):
        self.calls += 1
        return x * 2


def test_drafter_replay_intercepts_a_model_whose_class_replaces_call():
    """vLLM's MTP heads (``DeepSeekMTP``) are compiled at the class itself: an instance ``forward`` is never read, and
    a replay hooked there never ran (the H100 context matrix of 2026-11-25: 9 MTP graphs captured, 0 replayed). The
    replay must sit on the call, and what runs without one is the class's own call."""
    from portable_spec.vllm_adapter.spec_decode.proposer import ForwardReplay

    class Step:
        outputs = torch.full((1, 2), 7.0)

    class Runner:
        def __init__(self):
            self.replayed = []

        def replay(self, key, pointers):
            self.replayed.append(key)
            return Step()

    class Proposer:
        def __init__(self):
            self.graph_runner, self.announced = Runner(), None

        def pending_key(self, kwargs):
            key, self.announced = self.announced, None
            return key

    model, proposer = _CompiledCall(), Proposer()
    graphs = ForwardReplay(model, proposer)
    graphs.install()
    assert graphs.installed and isinstance(model, _CompiledCall) and type(model).__name__ == "_CompiledCall"
    x = torch.ones(1, 2)
    assert torch.equal(model(x), x * 2) and model.calls == 1  # nothing announced: the class's own (compiled) call
    proposer.announced = "key"
    assert torch.equal(model(x=x), Step.outputs) and proposer.graph_runner.replayed == ["key"]
    assert model.calls == 1 and torch.equal(graphs.last_output, Step.outputs)
    assert torch.equal(graphs.eager_forward(x), x * 2) and model.calls == 2  # a capture records the compiled call
    graphs.uninstall()
    assert type(model) is _CompiledCall and not graphs.installed and model.__dict__.keys() >= {"calls"}
    assert torch.equal(model(x), x * 2) and proposer.graph_runner.replayed == ["key"]


def test_vllm_compiles_mtp_heads_at_their_class_and_eagle_heads_inside():
    """Which replay hook each draft class needs: vLLM's ``@support_torch_compile`` on ``DeepSeekMTP`` replaces its
    ``__call__``; the EAGLE heads keep ``nn.Module.__call__`` (their inner model is the compiled one)."""
    from vllm.model_executor.models.deepseek_mtp import DeepSeekMTP
    from vllm.model_executor.models.llama_eagle import EagleLlamaForCausalLM
    from vllm.model_executor.models.llama_eagle3 import Eagle3LlamaForCausalLM

    from portable_spec.vllm_adapter.spec_decode.proposer import calls_bypass_forward

    assert calls_bypass_forward(DeepSeekMTP)
    assert not calls_bypass_forward(EagleLlamaForCausalLM) and not calls_bypass_forward(Eagle3LlamaForCausalLM)


@V1_DRAFTER
def test_upstream_first_pass_alone_is_what_propose_with_one_token_runs():
    """The fused chain runs upstream's propose with K=1 for the first pass and continues from its state."""
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    assert params(SpecDecodeBaseProposer.propose)[:2] == ["self", "num_speculative_tokens"]
    propose = inspect.getsource(SpecDecodeBaseProposer.propose)
    assert "self.num_speculative_tokens = num_speculative_tokens" in propose
    assert "self.set_inputs_first_pass(" in propose
    early_exit = propose.index("if self.num_speculative_tokens == 1 or self.parallel_drafting:")
    assert propose.index("ret_hidden_states = self.model(**model_kwargs)") < early_exit  # the first forward ran
    assert "return draft_token_ids.view(-1, self.num_speculative_tokens)" in propose[early_exit:]
    # What the chain starts from, as upstream computes it after that exit.
    assert "positions = self.positions[token_indices_to_sample]" in propose
    assert "hidden_states = hidden_states[token_indices_to_sample]" in propose
    assert "common_attn_metadata.seq_lens -= num_rejected_tokens_gpu" in propose
    first = inspect.getsource(SpecDecodeBaseProposer.set_inputs_first_pass)
    assert "return num_tokens, token_indices_to_sample, cad" in first
    assert params(SpecDecodeBaseProposer._update_positions_dependent_metadata) == [
        "self", "positions", "common_attn_metadata", "batch_size", "input_batch_size", "block_size"]
    init = inspect.getsource(SpecDecodeBaseProposer.__init__)
    for flag in ("self.eplb_state", "self.constant_draft_positions", "self.use_local_argmax_reduction",
                 "self.use_heterogeneous_vocab", "self._share_mtp_indices", "self.needs_extra_input_slots",
                 "self.parallel_drafting", "self.uses_mrope", "self.uses_xdrope_dim",
                 "self._enable_probabilistic_draft_probs"):
        assert flag in init, flag


@V1_DRAFTER
def test_flash_attention_drafting_build_writes_no_persistent_buffer():
    """Why skipping FLASH_ATTN's per-step drafting build is safe: it is a fast build (no AOT schedule copied into
    the persistent scheduler buffer). From 0.28 the build also copies multimodal prefix ranges into persistent
    buffers, only for rows that reach into a range: prefill rows, never the drafter's chain steps (decode rows)."""
    from vllm.v1.attention.backend import AttentionMetadataBuilder

    assert "fast_build=True" in inspect.getsource(AttentionMetadataBuilder.build_for_drafting)
    try:
        from vllm.v1.attention.backends.flash_attn import FlashAttentionMetadataBuilder
    except ImportError as exc:  # pragma: no cover - depends on the host's vLLM build
        pytest.skip(f"flash_attn backend does not import here: {exc}")
    assert "build_for_drafting" not in vars(FlashAttentionMetadataBuilder)
    build = inspect.getsource(FlashAttentionMetadataBuilder.build)
    assert "self.aot_schedule and not fast_build" in build
    # Where the build copies a schedule into the persistent buffer (0.28: a helper the build calls).
    store = version_gate.pick({"0.26.0": "build", "0.28.0": "_store_scheduler_metadata"})
    assert "if self.use_full_cuda_graph and scheduler_metadata is not None:" in inspect.getsource(
        getattr(FlashAttentionMetadataBuilder, store))
    if store != "build":  # 0.28: no schedule without aot_schedule, and the multimodal ranges only where one is hit
        assert "if not aot_schedule:\n            return None" in inspect.getsource(
            FlashAttentionMetadataBuilder._get_scheduler_metadata)
        assert build.count("self._get_scheduler_metadata(") == build.count("aot_schedule=aot_schedule,") > 0
        assert "if num_mm_tokens > 0:" in build and "decode rows only ever get an optimistic" in build
    # The one other persistent write in that build, which the fused chain's blockers exclude (R-SWA models).
    assert "self.rswa_window is not None" in build and "persistent_rswa_prefix_lens" in build
    from vllm.config import ModelConfig

    assert "rswa_window" in inspect.getsource(ModelConfig)


def test_env_validation_reads_the_table_our_general_plugin_extends():
    """``general_plugin.declare_platform_env`` adds VLLM_PLATFORM to ``envs.environment_variables``; it silences the
    engine's warning only while ``validate_environ`` reads that table after the general plugins ran."""
    import vllm.envs as envs
    from vllm.engine.arg_utils import EngineArgs

    assert isinstance(envs.environment_variables, dict) and "VLLM_PLUGINS" in envs.environment_variables
    assert '"VLLM_PLATFORM"' not in inspect.getsource(envs)  # vLLM gives it no meaning of its own
    from vllm.platforms.interface import Platform

    # 0.33 moved the check onto the platform (a classmethod reading the same table).
    validate, reads, called = version_gate.pick({
        "0.26.0": (envs.validate_environ if hasattr(envs, "validate_environ") else None,
                   'env.startswith("VLLM_") and env not in environment_variables',
                   "envs.validate_environ(self.fail_on_environ_validation)"),
        "0.33.0": (getattr(Platform, "validate_environ", None),
                   'env.startswith("VLLM_") and env not in envs.environment_variables',
                   "current_platform.validate_environ(self.fail_on_environ_validation)")})
    assert params(validate)[-1:] == ["hard_fail"]
    assert reads in inspect.getsource(validate)
    assert "for factor, getter in environment_variables.items():" in inspect.getsource(envs.compile_factors)
    assert "load_general_plugins()" in inspect.getsource(EngineArgs.__post_init__)
    assert called in inspect.getsource(EngineArgs.create_engine_config)


# ---- the boot-time kernel warm-up (vllm_adapter.worker.kernel_warmup, warmup_plan) -----------------------------------------
def assigned_self_attributes(cls, methods, path: tuple[str, ...] = ()) -> set[str]:
    """``self.<path>.X = ...`` targets in the named methods of ``cls`` (vLLM's source)."""
    import ast
    import textwrap

    def owner(node) -> tuple[str, ...] | None:
        if isinstance(node, ast.Name):
            return (node.id,)
        inner = owner(node.value) if isinstance(node, ast.Attribute) else None
        return None if inner is None else inner + (node.attr,)

    names = set()
    for method in methods:
        tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(cls, method))))
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            names |= {t.attr for t in targets if isinstance(t, ast.Attribute) and owner(t.value) == ("self", *path)}
    return names


@V1_DRAFTER
def test_warm_up_runs_before_the_worker_activates_the_jit_monitor():
    from vllm.config import ObservabilityConfig
    from vllm.v1.worker.gpu_worker import Worker

    from portable_spec.vllm_adapter.worker.v1_model_runner import PortableV1ModelRunner

    source = inspect.getsource(Worker.compile_or_warm_up_model)
    assert source.index("self.model_runner.capture_model()") < source.index("activate_jit_monitor(")
    assert "verbose=self.observability_config.jit_monitor_verbose" in source
    assert "jit_monitor_verbose" in {f.name for f in dataclasses.fields(ObservabilityConfig)}
    ours = inspect.getsource(PortableV1ModelRunner.capture_model)
    assert ours.index("super().capture_model()") < ours.index("drafter.capture_graphs()") < ours.index(
        "warm_up_kernels(self)")


@V1_DRAFTER
def test_warm_up_puts_back_everything_a_v1_step_rebinds():
    """Every attribute the V1 step path assigns is restored by the warm-up, or is one it never reaches: a new one
    in a vLLM upgrade fails here."""
    from vllm.v1.spec_decode.dflash import DFlashProposer
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer
    from vllm.v1.worker.gpu_input_batch import InputBatch
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    from portable_spec.vllm_adapter.worker.kernel_warmup import (
        DRAFTER_STEP_STATE, INPUT_BATCH_STEP_STATE, RUNNER_STEP_STATE,
    )

    step_path = ("execute_model", "sample_tokens", "_update_states", "_prepare_inputs", "_prepare_input_ids",
                 "_preprocess", "_build_attention_metadata", "_determine_batch_execution_and_padding", "_model_forward",
                 "_sample", "_bookkeeping_sync", "_update_states_after_model_execute", "propose_draft_token_ids",
                 "_copy_valid_sampled_token_count", "_copy_draft_token_ids_to_cpu")
    never = {"calculate_kv_scales",  # a blocker: the warm-up does not run where the first forward sets KV scales
             "_num_valid_draft_tokens",  # the ngram_gpu drafter's branch
             "_pp_recv_work"}  # (0.28) pipeline parallel's pending receive: the warm-up declines PP
    assert assigned_self_attributes(GPUModelRunner, step_path) - never == set(RUNNER_STEP_STATE)
    batch_methods = [name for name, fn in vars(InputBatch).items() if inspect.isfunction(fn) and name != "__init__"]
    # add_request: the allowed-token mask, only for requests with allowed_token_ids (the warm-up's have none);
    # refresh_metadata: rebuilt for the empty batch by the warm-up's last step, as at boot.
    batch = assigned_self_attributes(InputBatch, batch_methods) | assigned_self_attributes(
        GPUModelRunner, step_path, ("input_batch",))
    assert batch - {"allowed_token_ids_mask", "allowed_token_ids_mask_cpu_tensor", "sampling_metadata"} == set(
        INPUT_BATCH_STEP_STATE)
    upstream = assigned_self_attributes(SpecDecodeBaseProposer, (
        "propose", "set_inputs_first_pass", "prepare_next_token_ids_padded", "prepare_inputs_padded",
        "build_per_group_and_layer_attn_metadata", "_update_positions_dependent_metadata"))
    upstream |= assigned_self_attributes(DFlashProposer, ("set_inputs_first_pass", "build_model_inputs_first_pass"))
    assert upstream <= set(DRAFTER_STEP_STATE)


@V1_DRAFTER
def test_the_kernel_arguments_the_warm_up_plan_models():
    """``warmup_plan``'s docstring: which arguments of each drafter/verify-path kernel vary with the batch."""
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.sample import rejection_sampler
    from vllm.v1.spec_decode import dflash, llm_base_proposer, utils
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    assert '@triton.jit(do_not_specialize=["max_spec_len"])\ndef rejection_greedy_sample_kernel(' in (
        inspect.getsource(rejection_sampler))
    sample = inspect.getsource(rejection_sampler.rejection_sample)
    assert "is_greedy = None" in sample and "rejection_greedy_sample_kernel[(batch_size,)](" in sample
    next_token = inspect.getsource(llm_base_proposer.SpecDecodeBaseProposer.prepare_next_token_ids_padded)
    assert "batch_size, num_tokens = sampled_token_ids.shape" in next_token
    assert "BLOCK_SIZE_TOKENS = next_power_of_2(num_tokens)" in next_token
    assert "eagle_prepare_inputs_padded_kernel[grid](" in inspect.getsource(
        llm_base_proposer.SpecDecodeBaseProposer.prepare_inputs_padded)
    step = inspect.getsource(utils.eagle_step_update_slot_mapping_and_metadata)
    assert "batch_size = positions_1d.shape[0]" in step and "batch_size=batch_size," in step
    first = inspect.getsource(dflash.DFlashProposer.set_inputs_first_pass)
    assert "BLOCK_SIZE = min(256, next_power_of_2(max_tokens_per_req))" in first
    assert "max_tokens_per_req = max_ctx_per_req + num_query_per_req" in first
    assert "total_input_tokens=num_context," in first and "HAS_NUM_REJECTED=has_num_rejected," in first
    # The drafter runs only where the drafts fit behind the sequence (warmup_plan.Limits.longest_query) ...
    fits = inspect.getsource(GPUModelRunner._input_fits_in_drafter)
    assert "self.num_spec_tokens + (\n            1 if self.speculative_config.use_dflash() else 0" in fits
    # ... and the scheduler gives each request K lookahead slots (DFlash K+1): the warm-up's blocks do the same.
    # 0.28 moved the count into VllmConfig.num_lookahead_tokens, which the scheduler reads.
    from vllm.config import VllmConfig

    init = inspect.getsource(Scheduler.__init__)
    counted_in, dflash_line = version_gate.pick({
        "0.26.0": (Scheduler.__init__, "self.num_lookahead_tokens = self.num_spec_tokens + 1"),
        "0.28.0": (getattr(VllmConfig, "num_lookahead_tokens", None), "return self.num_speculative_tokens + 1")})
    if counted_in is not Scheduler.__init__:
        assert "self.num_lookahead_tokens = vllm_config.num_lookahead_tokens" in init
        counted_in = counted_in.fget
    assert dflash_line in inspect.getsource(counted_in).split("use_dflash()")[1].split("if ")[0]


def test_the_v1_runner_finishes_before_it_adds_and_samples_after_execute():
    """The warm-up finishes a round's requests in the next round's first output (as the scheduler does) and calls
    sample_tokens when execute_model returned None."""
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    update = inspect.getsource(GPUModelRunner._update_states)
    assert update.index("self.input_batch.remove_request(req_id)") < update.index(
        "for new_req_data in scheduler_output.scheduled_new_reqs:")
    execute = inspect.getsource(GPUModelRunner.execute_model)
    assert execute.rstrip().endswith("return None") and "return EMPTY_MODEL_RUNNER_OUTPUT" in execute
    assert "num_spec_tokens_to_schedule = scheduler_output.num_spec_tokens_to_schedule" in inspect.getsource(
        GPUModelRunner.propose_draft_token_ids)
    assert SchedulerOutput.make_empty().num_spec_tokens_to_schedule == 0  # so the warm-up must set K itself


def test_triton_compile_counting_chains_and_restores_the_hook():
    knobs = import_triton().knobs
    from portable_spec.vllm_adapter.worker.kernel_warmup import counted_triton_compiles

    seen = []
    previous = knobs.runtime.jit_post_compile_hook
    knobs.runtime.jit_post_compile_hook = lambda **kw: seen.append(kw["fn"].name)
    try:
        with counted_triton_compiles() as counts:
            fn = types.SimpleNamespace(name="eagle_step_slot_mapping_metadata_kernel")
            knobs.runtime.jit_post_compile_hook(fn=fn, key=None)
            knobs.runtime.jit_post_compile_hook(fn=fn, key=None)
        assert counts == {"eagle_step_slot_mapping_metadata_kernel": 2} and len(seen) == 2
        knobs.runtime.jit_post_compile_hook(fn=fn, key=None)
        assert counts["eagle_step_slot_mapping_metadata_kernel"] == 2 and len(seen) == 3
    finally:
        knobs.runtime.jit_post_compile_hook = previous


def test_triton_build_counting_tells_compiled_from_disk_chains_and_restores(monkeypatch):
    knobs = import_triton().knobs
    from portable_spec.vllm_adapter.worker import triton_builds
    from portable_spec.vllm_adapter.worker.triton_builds import builds_summary, counted_triton_builds

    monkeypatch.setattr(triton_builds, "cuda_arch", lambda: 90)
    seen = []
    previous = knobs.compilation.listener
    knobs.compilation.listener = lambda **kw: seen.append(kw["cache_hit"])
    try:
        with counted_triton_builds() as builds:
            for hit in (False, True, True):
                knobs.compilation.listener(src=None, metadata={}, metadata_group={}, times=None, cache_hit=hit)
        ptxas = knobs.nvidia.ptxas.version  # no TRITON_PTXAS_PATH change in this process: the keyed one
        assert builds == {"compiled": 1, "from_disk": 2, "cache_dir": str(knobs.cache.dir), "ptxas": ptxas}
        assert seen == [False, True, True]
        assert builds_summary(builds) == (f"; Triton builds: 1 compiled, 2 from the disk cache {knobs.cache.dir}, "
                                          f"ptxas {ptxas}")
        knobs.compilation.listener(src=None, metadata={}, metadata_group={}, times=None, cache_hit=False)
        assert builds["compiled"] == 1 and len(seen) == 4
    finally:
        knobs.compilation.listener = previous
    assert knobs.compilation.listener is previous


def test_tritons_key_holds_the_ptxas_version_it_first_read_whatever_the_variable_says_later(monkeypatch, tmp_path):
    """What ``triton_builds.keyed_ptxas_version`` reports and ``worker/triton_cache.py`` relies on: Triton's CUDA
    backend puts ``get_ptxas_version`` into every kernel's key, and that function keeps the version it read first
    for the whole process, so a TRITON_PTXAS_PATH set afterwards (inductor sets it as it compiles) changes no key."""
    import_triton()
    from triton.backends.nvidia import compiler

    from portable_spec.vllm_adapter.worker.triton_builds import keyed_ptxas_version

    assert "get_ptxas_version" in inspect.getsource(compiler.CUDABackend.hash)
    monkeypatch.setenv("TRITON_PTXAS_PATH", str(fake_ptxas(tmp_path / "first", "12.8")))
    compiler.get_ptxas_version.cache_clear()
    try:
        assert keyed_ptxas_version(90) == "12.8"
        monkeypatch.setenv("TRITON_PTXAS_PATH", str(fake_ptxas(tmp_path / "later", "13.0")))
        assert keyed_ptxas_version(90) == "12.8" and "release 12.8" in compiler.get_ptxas_version(90)
        assert import_triton().knobs.nvidia.ptxas.version == "13.0"  # the variable moved; the key did not
        compiler.get_ptxas_version.cache_clear()
        assert keyed_ptxas_version(90) == "13.0"
    finally:
        compiler.get_ptxas_version.cache_clear()  # later tests read the restored variable afresh
    assert keyed_ptxas_version(None) is None


def test_inductor_puts_tritons_cache_under_its_own_folder_only_where_unset(monkeypatch, tmp_path):
    """What makes a compiling boot's warm-up build in the model's folder (worker/triton_cache.py): with
    TRITON_CACHE_DIR unset, inductor's Triton folder is ``triton/<device>`` under its own cache folder (vLLM points
    TORCHINDUCTOR_CACHE_DIR at the compiled model's), and a caller's TRITON_CACHE_DIR wins."""
    from torch._inductor.runtime.cache_dir_utils import triton_cache_dir

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "hash" / "inductor_cache"))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    assert triton_cache_dir(0) == str(tmp_path / "hash" / "inductor_cache" / "triton" / "0")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "callers"))
    assert triton_cache_dir(0) == str(tmp_path / "callers")


def test_inductors_autotuner_sets_tritons_cache_folder_where_it_finds_it_unset(monkeypatch, tmp_path):
    """What moved a compiling boot's warm-up kernels after its first one (worker/triton_cache.py): building inductor's
    ``CachingAutotuner`` (the warm-ups build some, for code vLLM compiles with ``torch.compile``) sets
    TRITON_CACHE_DIR to inductor's folder where it is unset, for the rest of the process; one that is set it keeps."""
    from autotuner_probe import build_an_inductor_autotuner

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "hash" / "inductor_cache"))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    build_an_inductor_autotuner()
    assert os.environ["TRITON_CACHE_DIR"].startswith(str(tmp_path / "hash" / "inductor_cache" / "triton"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "callers"))
    build_an_inductor_autotuner()
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "callers")


def test_tritons_launcher_is_looked_up_in_the_folder_named_at_its_lookup(monkeypatch, tmp_path):
    """What paused a compiling boot's first sampled batch of two under Model Runner V2 (worker/triton_cache.py):
    Triton builds a kernel's launcher, a C module keyed by its source, in the folder TRITON_CACHE_DIR names when it is
    built, and looks it up in the folder named at each later lookup: another folder runs the C compiler again, the
    first one finds it on disk."""
    from launcher_probe import build_launcher, c_builds

    builds = c_builds(monkeypatch)
    first, other = str(tmp_path / "first"), str(tmp_path / "other")
    for folder in (first, other, first, other):
        monkeypatch.setenv("TRITON_CACHE_DIR", folder)
        assert build_launcher().__name__ == "__triton_launcher"
    assert builds == [first, other]


# ---- the census (vllm_adapter.patch.manifest) drives the checks above -----------------------------------------------
def _resolve(ref: str):
    import importlib

    module, _, qualname = ref.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


CENSUS_TARGETS = [(d, target) for d in CENSUS for target in (d.ours, *d.targets_on())]


@pytest.fixture
def needs(request, tmp_path):
    """For an entry that lives in a package not installable here (``Divergence.needs``): that package's stand-in on
    the path (only ``vllm_musa``: the contract tests' stand-in, lane vllm-musa-contract)."""
    package = request.param
    if not package:
        yield None
        return
    assert package == "vllm_musa", package
    import vllm_musa_standin

    with vllm_musa_standin.installed(tmp_path / "standin") as root:
        yield root


@pytest.mark.parametrize("entry,target,needs", [(d, t, d.needs) for d, t in CENSUS_TARGETS],
                         ids=[f"{d.name}|{t}" for d, t in CENSUS_TARGETS], indirect=["needs"])
def test_every_census_symbol_resolves_in_the_installed_vllm(entry, target, needs):
    if not entry.applies():
        pytest.skip(version_gate.why_not(entry.requires))
    _resolve(target)  # ImportError / AttributeError: vLLM moved it (a hook's value may be None: it exists)


def test_census_moves_name_span_versions_and_listed_targets():
    for d in CENSUS:
        assert not d.requires or d.requires in version_gate.FEATURES, d.name
        for old, since, new in d.moved:
            assert old in d.targets and since in version_gate.SPAN and new != old, d.name


def test_the_census_is_whole_and_each_entry_says_why_and_how_it_is_undone():
    kinds = {"entry point", "subclass", "scoped override", "instance override", "kernel substitution", "table entry",
             "process setting"}
    assert len(CENSUS) >= 10 and len({d.name for d in CENSUS}) == len(CENSUS)
    for d in CENSUS:
        assert d.kind in kinds, d.name
        assert d.targets and all(":" in t for t in d.targets), d.name
        assert all(len(text) > 10 for text in (d.what, d.why, d.undone, d.upstream)), d.name
        assert (d.kind == "subclass") <= bool(d.overrides), d.name


@pytest.mark.parametrize("entry,needs", [(d, d.needs) for d in CENSUS if d.overrides],
                         ids=[d.name for d in CENSUS if d.overrides], indirect=["needs"])
def test_each_subclass_overrides_exactly_the_methods_the_census_lists(entry, needs):
    """What our class (with its mixins that have no entry of their own, or all of them for ``through_mixins``)
    redefines of its vLLM (or vendor) bases: exactly the census's list, so a silent override fails here."""
    if not entry.applies():
        pytest.skip(version_gate.why_not(entry.requires))
    ours = _resolve(entry.ours)
    own_entries = set() if entry.through_mixins else {
        _resolve(d.ours) for d in CENSUS if d is not entry and d.kind == "subclass" and not d.needs
        and d.applies()}  # an entry whose feature this vLLM lacks may not import here (mrv2_standalone_graphs)
    vllm_bases = [_resolve(entry.base)] if entry.base else [
        c for c in ours.__mro__ if c.__module__.startswith(("vllm.", "torch."))]
    assert vllm_bases, entry.name
    upstream = {name for base in vllm_bases for cls in base.__mro__ for name in vars(cls)}
    mine = {name for cls in ours.__mro__ if cls.__module__.startswith(("portable_spec.", "portable_spec_harness."))
            and cls not in own_entries
            for name in vars(cls)}
    identity = {"_enum", "device_name", "device_type", "dispatch_key", "ray_device_key", "dist_backend",
                "device_control_env_var",  # a platform's identity attributes, not behaviour
                "_abc_impl"}  # ABCMeta's per-class cache (a subclass of an ABC such as BaseModelLoader)
    redefined = {name for name in mine & upstream if (not name.startswith("__") or name == "__init__")} - identity
    later = {name for name, since in entry.overrides_since  # redefined before vLLM's bases have it
             if not version_gate.pick({version_gate.SPAN[0]: False, since: True})}
    listed = set(entry.overrides) | {name for name, _ in entry.overrides_since} - later
    assert redefined == listed, (entry.name, redefined ^ listed)
    assert not later & upstream, (entry.name, "in vLLM's bases before its stated version", later & upstream)
    assert later <= mine, (entry.name, "listed but not defined by our class", later - mine)


def test_vllm_activates_one_oot_platform_and_filters_every_group_by_vllm_plugins():
    """The two lines of vLLM 0.26.0 the composition with vllm-musa stands on (``platform/vllm_musa_stack.py``): two
    out-of-tree probes that answer are refused, and ``VLLM_PLUGINS`` filters entry points by name in every group."""
    import vllm.envs
    import vllm.platforms
    from vllm.plugins import load_plugins_by_group

    resolve = inspect.getsource(vllm.platforms.resolve_current_platform_cls_qualname)
    assert "platform_plugins = load_plugins_by_group(PLATFORM_PLUGINS_GROUP)" in resolve
    assert "if len(activated_oot_plugins) >= 2:" in resolve and "Only one platform plugin can be activated" in resolve
    assert resolve.index("activated_oot_plugins) >= 2") < resolve.index("len(activated_oot_plugins) == 1")
    load = inspect.getsource(load_plugins_by_group)
    assert "allowed_plugins = envs.VLLM_PLUGINS" in load
    assert "if allowed_plugins is None or plugin.name in allowed_plugins:" in load  # any group, by entry-point name
    assert 'os.environ["VLLM_PLUGINS"].split(",")' in inspect.getsource(vllm.envs)


def test_vllm_musa_composition_targets_resolve_on_the_contract_standin(tmp_path):
    """Our composed classes sit on vllm-musa's by name, in the method order the composition needs (the stand-in
    stands for vllm-musa: lane vllm-musa-contract); vLLM 0.26.0's device gate is the one vllm-musa's build opens."""
    import vllm_musa_standin
    from vllm.v1.worker.gpu_worker import Worker

    from portable_spec.vllm_adapter.platform.base import PortableSpecPlatformMixin
    from portable_spec.vllm_adapter.worker.gpu_worker import PortableWorker

    with vllm_musa_standin.installed(tmp_path / "standin"):
        platform = _resolve("portable_spec.vllm_adapter.platform.vllm_musa_platform:PortableVllmMusaPlatform")
        worker = _resolve("portable_spec.vllm_adapter.worker.vllm_musa_worker:PortableVllmMusaWorker")
        assert platform.__mro__[0:2] == (platform, PortableSpecPlatformMixin)
        assert platform.__mro__[3] is _resolve("vllm_musa.platform:MUSAPlatform")
        assert worker.__mro__[1:4] == (PortableWorker, _resolve("vllm_musa.worker:MTGPUWorker"), Worker)
    assert 'if self.device_config.device_type == "cuda":' in inspect.getsource(Worker.init_device)


def test_mrv2_managers_take_the_platforms_pool_and_call_torch_cuda_by_attribute():
    """Model Runner V2's graph managers ask vLLM's platform for their pool (so our platforms put MRV2's graphs in the
    port's one pool) and look ``torch.cuda.CUDAGraph``/``torch.cuda.graph`` up at each capture (so torchada's
    aliasing, and musa-sim's simulation of it, reaches them); the runner keeps its manager as ``cudagraph_manager``
    and its speculator as ``speculator`` (what the e2e facts read)."""
    from vllm.v1.worker.gpu.cudagraph_utils import CudaGraphManager
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner

    init, capture = inspect.getsource(CudaGraphManager.__init__), inspect.getsource(CudaGraphManager.capture)
    assert "self.pool = current_platform.get_global_graph_pool()" in init
    assert "torch.cuda.CUDAGraph()" in capture and "torch.cuda.graph(" in capture and "self.pool" in capture
    runner = inspect.getsource(GPUModelRunner)
    assert "self.cudagraph_manager = ModelCudaGraphManager(" in runner and "self.speculator = " in runner


def _code(fn) -> str:
    """A function's source with all whitespace removed: line breaks vLLM's formatter moves are no change to us."""
    return "".join(inspect.getsource(fn).split())


@MRV2_STANDALONE
def test_mrv2_builds_the_standalone_speculator_by_module_lookup_inside_init_device():
    """What ``worker/mrv2_speculator.py`` swaps: ``init_speculator`` imports ``StandaloneARSpeculator`` from the
    standalone_ar module at the call, for ``uses_draft_model()`` after every other method's branch; MRV2's runner
    calls it (its module-level name) in ``__init__``; the worker builds that runner inside ``init_device`` (its last call, ``_init_workspace_and_model_runner``)."""
    import vllm.v1.worker.gpu.model_runner as runner_module
    import vllm.v1.worker.gpu.spec_decode as spec_decode
    from vllm.v1.worker.gpu_worker import Worker

    init = _code(spec_decode.init_speculator)
    assert params(spec_decode.init_speculator) == ["vllm_config", "device", "req_states"]
    assert ("elifspeculative_config.uses_draft_model():fromvllm.v1.worker.gpu.spec_decode.standalone_ar.speculator"
            "import(StandaloneARSpeculator,)returnStandaloneARSpeculator(vllm_config,device)") in init
    assert init.index("use_eagle()") < init.index("uses_draft_model()")  # EAGLE/MTP keep their branches
    assert runner_module.init_speculator is spec_decode.init_speculator
    assert "self.speculator=init_speculator(self.vllm_config,self.device,self.req_states)" in _code(
        runner_module.GPUModelRunner.__init__)
    assert _code(Worker.init_device).endswith("self._init_workspace_and_model_runner()")
    assert "self.model_runner:GPUModelRunner=self._make_model_runner()" in _code(Worker._init_workspace_and_model_runner)
    assert "returnGPUModelRunnerV2(self.vllm_config,self.device)" in _code(Worker._make_model_runner)
    runner = _code(runner_module.GPUModelRunner)  # the speculator's graph lifecycle the runner drives
    assert "self.speculator.init_cudagraph_manager(cudagraph_mode)" in runner and "self.speculator.capture()" in runner


@MRV2_STANDALONE
def test_the_standalone_decode_loop_our_graphs_stand_in_for():
    """vLLM's eager decode loop as ``GraphedStandaloneARSpeculator`` mirrors it (the preamble, each step's inputs,
    slot mapping, metadata ``step=step + 1``, then the forward and ``sample_draft`` our graph records) and the
    graph API it records through, as target_dependent_ar uses it."""
    from vllm.v1.worker.gpu.cudagraph_utils import CudaGraphManager
    from vllm.v1.worker.gpu.spec_decode.speculator import DraftModelSpeculator
    from vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator import StandaloneARSpeculator as S
    from vllm.v1.worker.gpu.spec_decode.target_dependent_ar.cudagraph_utils import SpeculatorCudaGraphManager

    assert params(S._multi_step_decode) == ["self", "input_batch", "num_rejected", "num_reqs", "skip_attn",
                                            "num_tokens_across_dp"]
    assert params(S._run_model) == ["self", "input_ids", "positions", "attn_metadata", "slot_mappings",
                                    "num_tokens_across_dp"]
    assert "cudagraph_runtime_mode=CUDAGraphMode.NONE" in _code(S._run_model)
    assert "pass" in _code(S.init_cudagraph_manager) and "pass" in _code(S.capture)  # vLLM captures nothing
    loop = _code(S._multi_step_decode)
    for line in ("last_positions=self.expanded_positions[self.last_token_indices[:num_reqs]]",
                 "self.input_buffers.positions[:num_reqs].copy_(last_positions)",
                 "input_batch.seq_lens[:num_reqs]-num_rejected[:num_reqs].int()+1,max=self.max_model_len",
                 "self.input_buffers.query_start_loc[:num_reqs+1].copy_(self.arange_gpu[:num_reqs+1])",
                 "forstepinrange(1,self.num_speculative_steps):",
                 "self.input_buffers.input_ids[:num_reqs].copy_(self.draft_tokens[:num_reqs,step-1].int())",
                 "self.input_buffers.positions[:num_reqs]+1,max=self.max_model_len-1,",
                 "self.input_buffers.seq_lens[:num_reqs]+1,max=self.max_model_len,",
                 "block_tables.compute_slot_mappings(idx_mapping,q_start,positions,num_reqs)",
                 "num_query_per_req=1,seq_lens_cpu_upper_bound=input_batch.seq_lens_cpu_upper_bound,",
                 "step=step+1,", "self.current_draft_step.fill_(step)",
                 "self.draft_tokens[:num_reqs,step]=self.sample_draft(hidden_states[:num_reqs],"
                 "self.input_buffers.positions[:num_reqs],self.idx_mapping[:num_reqs],self.temperature,self.seeds,"
                 "self.current_draft_step,self.draft_logits,)"):
        assert line in loop, line
    assert params(DraftModelSpeculator.sample_draft)[:8] == [
        "self", "hidden_states", "sample_src_positions", "idx_mapping", "temperature", "seeds", "draft_step",
        "draft_logits"]
    assert params(SpeculatorCudaGraphManager.capture)[:7] == [
        "self", "forward_fn", "model_state", "input_buffers", "block_tables", "attn_groups", "kv_cache_config"]
    capture = _code(SpeculatorCudaGraphManager.capture)
    assert "ifself.decode_query_len==1:forward_kwargs[\"num_speculative_steps\"]" in capture
    assert "forward_fn(num_reqs,num_tokens,attn_metadata,slot_mappings,num_tokens_across_dp,cg_mode," in capture
    assert params(CudaGraphManager.dispatch)[:5] == ["self", "num_reqs", "num_tokens", "uniform_token_count",
                                                     "num_active_loras"]
    assert params(CudaGraphManager.run_fullgraph) == ["self", "desc"]
    # The padding convention our padded rows follow: a -1 row is skipped by the sampler and the slot mapping.
    assert "self.idx_mapping[num_reqs:].fill_(-1)" in _code(DraftModelSpeculator._copy_request_inputs)


@MRV2_STANDALONE
def test_the_standalone_step0_our_graphs_stand_in_for():
    """vLLM's eager step 0 (``_prefill``, attention on) as ``GraphedStandaloneARSpeculator.prepare_prefill`` and
    ``_prefill_step`` mirror it: vLLM's input kernel with these arguments, the slot mapping over the expanded query
    starts and positions, the metadata from the expanded query starts at ``step=0``, the forward over the expanded
    buffers and ``sample_draft`` at the last accepted token; the input kernel's padding rows (query starts held at
    the total, seq_lens and last indices 0) that our padded graph relies on; and vLLM's uniform-decode test."""
    import inspect

    import vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator as module
    from vllm.v1.worker.gpu.spec_decode.speculator import DraftModelSpeculator
    from vllm.v1.worker.utils import get_uniform_decode_token_count

    S = module.StandaloneARSpeculator
    assert params(S._prefill) == ["self", "input_batch", "num_rejected", "last_sampled", "num_reqs", "skip_attn",
                                  "num_tokens_across_dp"]
    assert S.num_extra_query_per_req == 1
    step0 = _code(S._prefill)
    for line in ("total_expanded=prepare_prefill_inputs(input_buffers=self.input_buffers,input_batch=input_batch,"
                 "last_sampled=last_sampled,num_rejected=num_rejected,expanded_input_ids=self.expanded_input_ids,"
                 "expanded_positions=self.expanded_positions,last_token_indices=self.last_token_indices,"
                 "max_num_reqs=self.max_num_reqs,max_model_len=self.max_model_len,)",
                 "block_tables.compute_slot_mappings(input_batch.idx_mapping,self.input_buffers.query_start_loc[:"
                 "num_reqs+1],self.expanded_positions[:total_expanded],total_expanded,out=self.expanded_slot_mappings,)",
                 "torch.from_numpy(qsl_np[:num_reqs+1]).int()+torch.from_numpy(self.arange_np[:num_reqs+1]).int()",
                 "step=0,", "self._run_model(self.expanded_input_ids[:total_expanded],"
                 "self.expanded_positions[:total_expanded],prefill_attn_md,",
                 "positions_buf=self.expanded_positions", "self.current_draft_step.fill_(0)",
                 "self.draft_tokens[:num_reqs,0]=self.sample_draft(hidden_states[last_indices],"
                 "positions_buf[last_indices],self.idx_mapping[:num_reqs],self.temperature,self.seeds,"
                 "self.current_draft_step,self.draft_logits,)"):
        assert line in step0, line
    jitted = module._prepare_prefill_inputs_kernel  # a JITFunction, or the plain function where Triton is off
    kernel = "".join(inspect.getsource(getattr(jitted, "fn", jitted)).split())
    for line in ("tl.store(out_query_start_loc_ptr+block,total_expanded,mask=mask)",
                 "tl.store(out_seq_lens_ptr+block,0,mask=mask)", "tl.store(last_token_indices_ptr+block,0,mask=mask)"):
        assert line in kernel, line
    assert params(module.prepare_prefill_inputs) == [
        "input_buffers", "input_batch", "last_sampled", "num_rejected", "expanded_input_ids", "expanded_positions",
        "last_token_indices", "max_num_reqs", "max_model_len"]
    assert params(DraftModelSpeculator._build_attn_metadata)[:6] == [
        "self", "num_reqs", "batch_desc", "query_start_loc_np", "seq_lens_cpu_upper_bound", "step"]
    assert params(get_uniform_decode_token_count) == ["num_reqs", "num_tokens", "max_query_len",
                                                      "decode_graph_eligible"]


def test_each_census_entry_is_pinned_by_tests_that_exist():
    names = set(globals())
    for d in CENSUS:
        assert set(d.pinned_by) <= names, (d.name, set(d.pinned_by) - names)


def test_every_override_in_our_code_is_in_the_census():
    """Each ``overridden(owner, "name", ...)`` call names an attribute some census entry lists (AST scan)."""
    import ast
    from pathlib import Path

    listed = {target.rpartition(":")[2].rpartition(".")[2] for d in CENSUS for target in d.targets}
    calls = []
    root = Path(__file__).resolve().parents[1]
    for path in [*(root / "portable_spec").rglob("*.py"), *(root / "harness").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "overridden":
                calls.append((path.name, node.args[1].value))
    assert len(calls) >= 4  # the scan does find them
    assert [c for c in calls if c[1] not in listed] == []


@V1_DRAFTER
def test_the_draft_recorder_reads_what_the_v1_runner_keeps_per_step():
    """``vllm_door.draft_recorder`` wraps the one call of ``propose_draft_token_ids`` per step and stamps each row
    with the position its first draft goes to, from the runner's device ``num_computed_tokens`` (this step's,
    corrected for the previous step's rejections), the scheduler's per-request token and draft counts, and the
    sampled tokens (rejected ones are -1). Rows are matched to prompts by vLLM's request ids."""
    import vllm.v1.worker.gpu_model_runner as module
    from vllm.entrypoints import offline_utils
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.engine import input_processor, output_processor
    from vllm.v1.sample import rejection_sampler
    from vllm.v1.worker.gpu_input_batch import InputBatch

    from portable_spec_harness.vllm_door.draft_recorder import REJECTED

    runner = module.GPUModelRunner
    assert inspect.getsource(module).count("self.propose_draft_token_ids(") == 1  # one call per step
    sample = inspect.getsource(runner.sample_tokens)
    assert ("self._draft_token_ids = self.propose_draft_token_ids(\n                    scheduler_output,\n"
            "                    sampled_token_ids,") in sample
    assert "self.num_computed_tokens = torch.zeros(" in inspect.getsource(runner.__init__)
    prepare = inspect.getsource(runner._prepare_inputs)
    assert "update_num_computed_tokens_for_batch_change(\n                self.num_computed_tokens," in prepare
    assert ("self.seq_lens[:num_reqs] = (\n            self.num_computed_tokens[:num_reqs] + num_scheduled_tokens_gpu"
            in prepare)
    fields = {f.name for f in dataclasses.fields(SchedulerOutput)}
    assert {"num_scheduled_tokens", "scheduled_spec_decode_tokens"} <= fields
    assert int(getattr(rejection_sampler.PLACEHOLDER_TOKEN_ID, "value", rejection_sampler.PLACEHOLDER_TOKEN_ID)) \
        == REJECTED
    assert isinstance(InputBatch.req_ids, property) and isinstance(InputBatch.num_reqs, property)
    # The runner sees "<external>-<8 random characters>"; RequestOutput.request_id is the external counter.
    assert 'request.request_id = f"{request.external_req_id}-{random_uuid():.8}"' in inspect.getsource(
        input_processor.InputProcessor.assign_request_id)
    assert "request_id = str(next(self.request_counter))" in inspect.getsource(
        offline_utils.OfflineInferenceMixin._add_request)
    assert "request_id=external_req_id,  # request_id is what was provided externally" in inspect.getsource(
        output_processor)


@V1_DRAFTER
def test_the_injected_bugs_hook_where_the_drafter_calls():
    """Each injected bug (``vllm_door.bug_injection``) wraps a function our drafter calls by attribute or global
    name lookup at request time, so the wrapper is what runs: the slot copy of every first pass, the step kernel's
    metadata update of every chain step, our fused chain, our count hand-off."""
    from vllm.v1.spec_decode.llm_base_proposer import SpecDecodeBaseProposer

    from portable_spec_harness.vllm_door.bug_injection import BUGS, resolve_owner
    from portable_spec.vllm_adapter.spec_decode import draft_prep, fused_chain

    for bug in BUGS.values():
        assert bug.attr in vars(resolve_owner(bug.owner)), bug.name
    assert params(SpecDecodeBaseProposer._update_positions_dependent_metadata) == [
        "self", "positions", "common_attn_metadata", "batch_size", "input_batch_size", "block_size"]
    update = inspect.getsource(SpecDecodeBaseProposer._update_positions_dependent_metadata)
    assert "seq_lens=common_attn_metadata.seq_lens," in update  # the step kernel advances seq_lens in place
    propose = inspect.getsource(SpecDecodeBaseProposer.propose)
    assert "self._get_slot_mapping(\n                slot_mapping_size, common_attn_metadata.slot_mapping\n" in propose
    assert "positions = self._update_positions_dependent_metadata(" in propose
    assert params(fused_chain.FusedChainMixin._run_fused_chain) == [
        "self", "key", "batch", "positions", "cad", "num_rejected"]
    chain = inspect.getsource(fused_chain.FusedChainMixin._run_fused_chain)
    assert "self._update_positions_dependent_metadata(positions, cad," in chain
    assert params(draft_prep.hand_off_counts) == ["runner", "next_token_ids", "valid_counts"]
    prep = inspect.getsource(draft_prep.DraftPrepMixin.propose_with_prep)
    assert "self._get_slot_mapping(first_key.num_tokens, cad.slot_mapping[:num_tokens])" in prep
    assert "hand_off_counts(runner, " in prep and "return self._run_fused_chain(" in prep
    for body in (fused_chain.FusedChainMixin._fused_chain_body, fused_chain.FusedChainMixin._fused_first_body):
        assert "= greedy_draft_tokens(self, self.draft_sample, " in inspect.getsource(body)  # a global lookup
