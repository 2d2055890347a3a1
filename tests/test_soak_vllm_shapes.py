"""What the soak relies on in vLLM 0.26.0, checked against the installed vLLM so that a wrong name fails here (cpu
lane) and not as a silent zero on the GPU: the Prometheus names and buckets, the ``vllm serve`` flags (parsed by
vLLM's own parser), the completion request fields (validated by vLLM's own request model), the response fields, the
worker-extension and dev-mode RPC mechanics, and the scheduler and detokenizer behaviour the judge's rules encode."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from pathlib import Path

import pytest

from portable_spec_harness import vllm_serve
from portable_spec_harness.soak import budget, metrics, worker_extension, servers, workload

from soak_fake_server import fake_detokenize, fake_greedy

VLLM = Path(__import__("importlib").util.find_spec("vllm").origin).parent
CLASS_OF = {"Counter": "_counter_cls", "Gauge": "_gauge_cls", "Histogram": "_histogram_cls"}


def spec(variant: str = "full_drafter", async_scheduling: bool = True) -> servers.ServerSpec:
    return servers.ServerSpec(pair="llama_ctx_eagle", variant=variant, async_scheduling=async_scheduling,
                              target="/zoo/t", draft="/zoo/d", method="eagle", runner="v1",
                              generation_config="/tmp/genconfig")


# ------------------------------------------------------------------------------------------------ metrics
@pytest.mark.parametrize("exposed", sorted(metrics.SOURCES))
def test_every_metric_name_is_defined_by_vllm_with_its_class(exposed):
    base, kind, where = metrics.SOURCES[exposed]
    source = (VLLM / where).read_text()
    at = source.find(f'"{base}"')
    assert at >= 0, f"{base} is not in vllm/{where}"
    if where.endswith("loggers.py"):  # the constructor call right before the name
        call = source.rfind("self._", 0, at)
        assert source[call:call + len(CLASS_OF[kind]) + 5].startswith(f"self.{CLASS_OF[kind]}"), (base, kind)
    else:  # spec-decode counters: a list of (name, doc) fed to _counter_cls
        assert kind == "Counter" and "self._counter_cls(name=name" in source


def test_prometheus_client_renders_the_names_the_soak_reads():
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

    registry = CollectorRegistry()
    Counter("vllm:num_preemptions", "d", ["model_name"], registry=registry).labels("m").inc(3)
    Gauge("vllm:num_requests_waiting", "d", ["model_name"], registry=registry).labels("m").set(2)
    Histogram("vllm:request_prefill_kv_computed_tokens", "d", ["model_name"], registry=registry,
              buckets=[50, budget.LONG_PREFILL_TOKEN_THRESHOLD, 200]).labels("m").observe(150)
    sample = metrics.parse(generate_latest(registry).decode())
    assert sample.get(metrics.PREEMPTIONS) == 3 and sample.get(metrics.WAITING) == 2
    assert sample.histogram_above(metrics.PREFILL_COMPUTED, budget.LONG_PREFILL_TOKEN_THRESHOLD) == 1


def test_the_long_prefill_threshold_and_n_are_bucket_bounds():
    from vllm.v1.metrics.loggers import build_1_2_5_buckets

    assert budget.LONG_PREFILL_TOKEN_THRESHOLD in build_1_2_5_buckets(budget.MAX_MODEL_LEN)
    source = (VLLM / "v1/metrics/loggers.py").read_text()
    n_hist = source[source.index('name="vllm:request_params_n"'):][:200]
    assert "buckets=[1, 2, 5, 10, 20]" in n_hist
    prefill = source[source.index('name="vllm:request_prefill_kv_computed_tokens"'):][:400]
    assert "build_1_2_5_buckets(max_model_len)" in prefill


# ------------------------------------------------------------------------------------------------ vllm serve
@pytest.mark.parametrize("variant,async_scheduling", [("nospec", True), ("eager_drafter", True),
                                                      ("full_drafter", True), ("full_drafter", False)])
def test_vllm_serve_parses_the_soak_command_line(vllm_platform, variant, async_scheduling):
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    s = spec(variant, async_scheduling)
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(servers.serve_args(s, 8123))
    validate_parsed_serve_args(args)
    assert args.model_tag == "/zoo/t" and args.port == 8123 and args.host == "127.0.0.1"
    assert args.enable_prompt_tokens_details and args.disable_uvicorn_access_log
    assert args.served_model_name == [servers.SERVED_MODEL]
    engine = AsyncEngineArgs.from_cli_args(args)
    assert engine.speculative_config == s.speculative
    assert engine.async_scheduling is async_scheduling
    assert engine.scheduling_policy == "priority"
    assert engine.num_gpu_blocks_override == budget.NUM_GPU_BLOCKS and engine.block_size == budget.BLOCK_SIZE
    assert engine.kv_cache_memory_bytes == budget.KV_CACHE_MEMORY_BYTES
    assert engine.long_prefill_token_threshold == budget.LONG_PREFILL_TOKEN_THRESHOLD
    assert engine.max_num_batched_tokens == budget.MAX_NUM_BATCHED_TOKENS
    assert engine.max_num_seqs == budget.MAX_NUM_SEQS and engine.max_model_len == budget.MAX_MODEL_LEN
    assert engine.enable_prefix_caching and engine.enable_chunked_prefill
    assert engine.worker_extension_cls == servers.WORKER_EXTENSION and engine.generation_config == "/tmp/genconfig"
    assert engine.structured_outputs_config.backend == "xgrammar"
    assert engine.structured_outputs_config.disable_any_whitespace


@pytest.mark.parametrize("tp", [1, 2])
def test_vllm_serve_parses_the_soak_command_line_at_tensor_parallel(vllm_platform, monkeypatch, tp):
    """``--tp 2 --disable-custom-all-reduce --no-fuse-allreduce-rms``: vLLM's own parser reads tensor parallel 2 and
    the two switches from every soak server's command line, and the server's environment keeps NVLink multicast
    off (at any TP); at TP=1 the command line carries none of it."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from portable_spec_harness.parallel import Parallel
    from portable_spec_harness.vllm_door.offline import MULTICAST_OFF_ENV

    for name in MULTICAST_OFF_ENV:  # not inherited from the shell: the server must get it from the spec
        monkeypatch.delenv(name, raising=False)
    s = dataclasses.replace(spec(), parallel=Parallel(tp, tp > 1, tp > 1))
    args = make_arg_parser(FlexibleArgumentParser()).parse_args(servers.serve_args(s, 8123))
    validate_parsed_serve_args(args)
    engine = AsyncEngineArgs.from_cli_args(args)
    assert engine.tensor_parallel_size == tp and engine.disable_custom_all_reduce is (tp > 1)
    assert engine.compilation_config.pass_config.fuse_allreduce_rms is (False if tp > 1 else None)
    assert engine.speculative_config == s.speculative  # the rest of the command line is unchanged
    env = servers.server_env(s)
    assert {k: env.get(k) for k in MULTICAST_OFF_ENV} == MULTICAST_OFF_ENV


def test_the_console_script_is_the_module_the_soak_runs():
    import importlib.metadata

    (script,) = [e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "vllm"]
    assert script.value == "vllm.entrypoints.cli.main:main"
    assert servers.serve_command(spec(), 1)[1:4] == ["-m", "vllm.entrypoints.cli.main", "serve"]
    assert 'if __name__ == "__main__":' in (VLLM / "entrypoints/cli/main.py").read_text()


# ------------------------------------------------------------------------------------------------ requests
def plan() -> workload.Workload:
    return workload.build("llama_ctx_eagle", 0, 60, fake_greedy, fake_detokenize)


def test_every_request_body_is_a_valid_vllm_completion_request(vllm_platform):
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest
    from vllm.sampling_params import StructuredOutputsParams

    from portable_spec_harness.soak.loadgen import request_body

    seen = set()
    for r in plan().judged_requests():
        request = CompletionRequest.model_validate(request_body(r, servers.SERVED_MODEL))
        params = request.to_sampling_params(r.body["max_tokens"], {})
        params._validate_spec_decode(object())  # min_p / logit_bias would be refused with speculation
        assert request.return_token_ids and request.priority == r.body["priority"]
        assert params.temperature == r.body["temperature"] and params.n == r.n
        assert params.ignore_eos == r.body["ignore_eos"] and params.seed == r.body.get("seed")
        assert params.max_tokens == r.body["max_tokens"]
        if r.stream:
            assert request.stream_options.include_usage
        if r.body.get("stop"):
            assert params.stop == r.body["stop"]
        if r.body.get("response_format"):
            assert isinstance(params.structured_outputs, StructuredOutputsParams)
            assert json.loads(params.structured_outputs.json) == workload.STRUCTURED_SCHEMA \
                if isinstance(params.structured_outputs.json, str) else \
                params.structured_outputs.json == workload.STRUCTURED_SCHEMA
        if r.body.get("cache_salt"):
            assert request.cache_salt == r.body["cache_salt"]
        seen.add(r.klass)
    assert seen == {*workload.CLASSES, "pressure"}


def test_the_pressure_wave_outgrows_the_cache_and_leaves_the_loads_plan_alone(monkeypatch):
    with_wave = plan()
    assert len(with_wave.pressure) == budget.MAX_NUM_SEQS
    assert all(r.greedy and r.compare == "nospec" and not r.stream for r in with_wave.pressure)
    assert len({r.body["cache_salt"] for r in with_wave.pressure}) == budget.MAX_NUM_SEQS  # no prefix-cache hits
    per_request = -(-(budget.PRESSURE_PROMPT + budget.PRESSURE_MAX_TOKENS + budget.K) // budget.BLOCK_SIZE)
    assert budget.MAX_NUM_SEQS * per_request >= 2 * budget.NUM_GPU_BLOCKS
    # the wave comes from its own stream: the load's requests are what they are without it
    monkeypatch.setattr(workload, "pressure_wave", lambda pair, seed: [])
    without = plan()
    assert without.pressure == [] and [r.body for r in with_wave.requests] == [r.body for r in without.requests]
    monkeypatch.undo()
    assert workload.pressure_wave("llama_ctx_eagle", 0)[0].body == with_wave.pressure[0].body
    assert workload.pressure_wave("llama_ctx_eagle", 1)[0].body["prompt"] != with_wave.pressure[0].body["prompt"]


def test_greedy_with_n_above_1_is_refused_and_the_plan_has_none(vllm_platform):
    from vllm.sampling_params import SamplingParams

    with pytest.raises(ValueError, match="n must be 1"):
        SamplingParams(temperature=0.0, n=2)
    assert all(r.n == 1 for r in plan().requests if r.greedy)


def test_response_fields_the_client_reads():
    from vllm.entrypoints.openai.completion.protocol import (CompletionResponseChoice,
                                                             CompletionResponseStreamChoice)
    from vllm.entrypoints.openai.engine.protocol import ErrorResponse, PromptTokenUsageInfo, UsageInfo

    for model in (CompletionResponseChoice, CompletionResponseStreamChoice):
        assert {"index", "text", "token_ids", "finish_reason", "stop_reason"} <= set(model.model_fields)
    assert {"prompt_tokens", "completion_tokens", "prompt_tokens_details"} <= set(UsageInfo.model_fields)
    assert "cached_tokens" in PromptTokenUsageInfo.model_fields
    assert set(ErrorResponse.model_fields) == {"error"}
    serving = (VLLM / "entrypoints/openai/completion/serving.py").read_text()
    assert 'yield "data: [DONE]\\n\\n"' in serving and "_convert_generation_error_to_streaming_response" in serving


def test_generation_config_eos_ids_stop_a_request_unless_it_ignores_eos(vllm_platform):
    from vllm.sampling_params import SamplingParams

    config = workload.Workload("p", 0, [], [77, 99]).generation_config()
    kept = SamplingParams(ignore_eos=False)
    kept.update_from_generation_config(config, workload.EOS_ID)
    assert set(kept.stop_token_ids) == {77, 99} and kept.eos_token_id == workload.EOS_ID
    ignored = SamplingParams(ignore_eos=True)
    ignored.update_from_generation_config(config, workload.EOS_ID)
    assert not ignored.stop_token_ids and ignored.eos_token_id is None


def test_the_json_schema_goes_through_xgrammar_on_this_vllm(vllm_platform):
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams

    if servers.structured_backend_available()[0] is False:
        pytest.skip("xgrammar is not installed here")
    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

    validate_xgrammar_grammar(SamplingParams(structured_outputs=StructuredOutputsParams(
        json=workload.STRUCTURED_SCHEMA)))


def test_the_gpu_hosts_staged_wheels_carry_the_structured_output_backend():
    """Every staged dependency list the GPU host installs from: the repository's own (one per other vLLM of the span,
    always here) and the steering repo's for vLLM 0.26.0 where shared/ sits beside the clone (read too, never
    required: nothing here depends on where the clone sits)."""
    root = Path(__file__).resolve().parents[1]
    lists = sorted((root / "ci" / "gpu-host").glob("vllm-*-deps-cp312.txt"))
    lists += [p for p in [root.parent / "shared/gpu-host/vllm-0.26.0-deps-cp312.txt"] if p.exists()]
    assert len(lists) >= 2, lists
    missing = [p.name for p in lists
               if not re.search(rf"^{servers.STRUCTURED_BACKEND_MODULE}==", p.read_text(), re.M)]
    assert missing == []


# ------------------------------------------------------------------------------------------------ the probe
def test_the_probe_can_extend_vllms_worker_and_ours():
    from vllm.v1.worker.gpu_worker import Worker
    from vllm.v1.worker.worker_base import WorkerWrapperBase

    from portable_spec.vllm_adapter.worker.gpu_worker import PortableWorker

    source = inspect.getsource(WorkerWrapperBase.init_worker)
    assert "parallel_config.worker_extension_cls" in source
    assert "worker_class.__bases__ = worker_class.__bases__ + (" in source
    assert "assert not hasattr(worker_class, attr)" in source
    own = [a for a in dir(worker_extension.SoakWorkerExtension) if not a.startswith("__")]
    assert own == [servers.PROBE_METHOD]
    assert not any(hasattr(cls, servers.PROBE_METHOD) for cls in (Worker, PortableWorker))
    assert f"{worker_extension.SoakWorkerExtension.__module__}.{worker_extension.SoakWorkerExtension.__qualname__}" == servers.WORKER_EXTENSION


def test_collective_rpc_runs_a_method_named_by_string_in_dev_mode():
    from vllm.entrypoints.serve.dev.rpc import api_router
    from vllm.v1.serial_utils import run_method

    assert any(getattr(r, "path", None) == "/collective_rpc" for r in api_router.router.routes)
    rpc = inspect.getsource(api_router.collective_rpc)
    assert 'body.get("method")' in rpc and '{"results": response}' in rpc
    build = inspect.getsource(__import__("vllm.entrypoints.openai.api_server", fromlist=["x"]).build_app)
    assert "if envs.VLLM_SERVER_DEV_MODE:" in build and "register_vllm_dev_api_routers(app)" in build
    assert vllm_serve.DEV_MODE_ENV == {"VLLM_SERVER_DEV_MODE": "1"}

    class Worker(worker_extension.SoakWorkerExtension):
        pass

    assert "func = getattr(obj, method)" in inspect.getsource(run_method)
    assert getattr(Worker(), servers.PROBE_METHOD).__func__ is worker_extension.SoakWorkerExtension.portable_spec_soak_facts


# ------------------------------------------------------------------------------------------------ the rules
def test_the_scheduler_rules_the_budget_and_judge_rely_on():
    from vllm.v1.core.sched.scheduler import Scheduler

    source = inspect.getsource(Scheduler.schedule)
    # priority policy: the victim is the lowest priority (highest value), latest arrival
    assert re.search(r"preempted_req = max\(\s*self\.running,\s*key=lambda r: \(r\.priority, r\.arrival_time\)",
                     source)
    # a running request gets at most the threshold (prefill chunks) and what is left of the budget; its drafts
    # are cut to what was scheduled
    assert "if 0 < self.scheduler_config.long_prefill_token_threshold < num_new_tokens:" in source
    assert "num_new_tokens = min(num_new_tokens, token_budget)" in source
    assert "spec_token_ids = spec_token_ids[:num_scheduled_spec_tokens]" in source
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler

    assert "schedule" not in vars(AsyncScheduler)  # async scheduling schedules by the same rules
    update = inspect.getsource(Scheduler._update_request_with_output)
    assert "del new_token_ids[num_new:]" in update  # EOS, stop ids, max_tokens, max_model_len: trimmed exactly
    # the gauges are the state after a step (finished requests gone); an abort alone steps nothing: the sentinel
    assert "self.make_stats(" in inspect.getsource(Scheduler.update_from_output)
    from vllm.v1.engine.core import EngineCore

    assert "finish_requests(request_ids, RequestStatus.FINISHED_ABORTED)" in inspect.getsource(
        EngineCore.abort_requests)


def test_a_stop_string_keeps_its_steps_later_token_ids():
    from vllm.v1.engine.detokenizer import BaseIncrementalDetokenizer

    update = inspect.getsource(BaseIncrementalDetokenizer.update)
    assert "for new_token_id in new_token_ids:\n            self.token_ids.append(new_token_id)" in update
    assert "self.output_text = self.output_text[:truncate_to]" in update
    assert "self.token_ids = " not in update and "del self.token_ids" not in update


def test_n_children_get_seed_plus_index():
    source = (VLLM / "v1/engine/parallel_sampling.py").read_text()
    assert "child_sampling_params.seed = seed + index" in source
    assert "iteration_stats.n_params_iter.append(n_param)" in source  # observed once the children finished


def test_the_probe_reads_what_the_judge_needs_from_a_worker(vllm_platform):
    from collections import Counter
    from types import SimpleNamespace

    from portable_spec_harness.soak import judge

    graphs = SimpleNamespace(replays=Counter(first_fused=3, chain_fused=6), pointer_mismatches=0, eager_keys={})
    drafter = SimpleNamespace(graph_runner=graphs, capture_stats={"graphs": 9, "failed": {}},
                              prep_declines={"first-pass batch size not captured": 2},
                              padded_metadata_builds=Counter(chain=4))

    class Worker(worker_extension.SoakWorkerExtension):
        model_runner = SimpleNamespace(drafter=drafter, attn_groups=[])
        vllm_config = SimpleNamespace(
            additional_config={}, use_v2_model_runner=False, speculative_config=SimpleNamespace(method="eagle"),
            scheduler_config=SimpleNamespace(async_scheduling=True, policy="priority", max_num_seqs=8,
                                             max_num_batched_tokens=1024, long_prefill_token_threshold=100,
                                             enable_chunked_prefill=True),
            cache_config=SimpleNamespace(enable_prefix_caching=True, num_gpu_blocks=160, block_size=16),
            parallel_config=SimpleNamespace(tensor_parallel_size=2))

    facts = Worker().portable_spec_soak_facts()
    assert json.loads(json.dumps(facts)) == facts
    assert facts["tensor_parallel_size"] == 2  # what the serving benchmark checks against --tp
    assert facts["replays"] == {"first_fused": 3, "chain_fused": 6} and facts["pointer_mismatches"] == 0
    assert facts["drafter"] == "types.SimpleNamespace" and facts["platform"].endswith("CpuGraphTestPlatform")
    read = {key for key in judge.drafter_facts(judge.ServerRun("x", "v", "ours", True, True, facts_after=facts))}
    derived = {"first_pass_replays", "chain_replays", "block_replays", "pointer_mismatches_during_load",
               "replays_after_load", "fused_first_pass_declines_during_load", "first_pass_replays_in_load",
               "padded_metadata_builds"}
    assert read - derived <= set(facts)  # every key the judge reads is one the probe writes
    assert facts["prep_declines"] == {"first-pass batch size not captured": 2}  # what the declines derive from
    assert facts["padded_metadata_builds"] == {"chain": 4}  # what the padded builds during the load derive from


def test_each_server_gets_its_variants_environment_and_dev_mode():
    env = servers.server_env(spec("full_drafter"))
    assert env["VLLM_PLATFORM"] == "cuda" and env["VLLM_USE_V2_MODEL_RUNNER"] == "0"
    assert env["VLLM_SERVER_DEV_MODE"] == "1" and "VLLM_ENABLE_V1_MULTIPROCESSING" not in env
    assert env["VLLM_CACHE_ROOT"].endswith("soak-llama_ctx_eagle-full_drafter")
    nospec = servers.server_env(spec("nospec"))
    assert "VLLM_PLATFORM" not in nospec
    moe = servers.server_env(dataclasses.replace(spec("eager_drafter"), runner="auto"))
    assert "VLLM_USE_V2_MODEL_RUNNER" not in moe and moe["VLLM_PLATFORM"] == "cuda"
    taken: set[int] = set()
    ports = {vllm_serve.free_port(taken) for _ in range(20)}
    assert len(ports) == 20 and all(p in vllm_serve.PORTS for p in ports) and ports == taken


def test_the_log_scan_reads_vllms_log_format():
    import logging

    from vllm import logger as vllm_logger
    from vllm.logging_utils import NewLineFormatter

    from portable_spec_harness.soak import logscan

    source = inspect.getsource(vllm_logger)
    assert 'if envs.NO_COLOR or envs.VLLM_LOGGING_COLOR == "0":' in source and vllm_serve.PLAIN_LOG_ENV == {"NO_COLOR": "1"}
    prefixes = (VLLM / "utils/system_utils.py").read_text()  # what a worker process puts before its lines
    assert 'prefix = f"({worker_name} pid={pid}) "' in prefixes
    formatter = NewLineFormatter(vllm_logger._FORMAT, vllm_logger._DATE_FORMAT)
    record = logging.LogRecord("vllm.v1.engine.core", logging.ERROR, "/x/core.py", 12, "EngineCore failed", None, None)
    record.fileinfo = "core.py"
    line = formatter.format(record)
    for text in (line, f"(EngineCore_DP0 pid=4242) {line}"):
        assert logscan.scan_text(text)["error_lines"] == 1, text
    record.levelno, record.levelname = logging.INFO, "INFO"
    assert logscan.scan_text(formatter.format(record))["error_lines"] == 0


def test_error_lines_after_vllms_shutdown_are_the_stops_not_the_loads():
    """The soak stops its servers with SIGTERM (abort, timeout 0): the API server then logs the engine's exit as an
    ERROR (the H100 soak of 2026-11-25, after '[shutdown] API server: shutdown triggered'). Only lines before vLLM's
    first shutdown line count; an error before it still fails."""
    from portable_spec_harness.soak import logscan

    launcher = (VLLM / "entrypoints/launcher.py").read_text()
    assert "[shutdown] API server: shutdown triggered" in launcher and logscan.SHUTDOWN == "[shutdown]"
    load = "(APIServer pid=1) INFO 11-25 17:03:37 [loggers.py:310] Engine 000: Running: 0 reqs"
    stop = "(APIServer pid=1) INFO 11-25 17:03:46 [launcher.py:100] [shutdown] API server: shutdown triggered"
    dead = "(APIServer pid=1) ERROR 11-25 17:03:46 [async_llm.py:704] AsyncLLM output_handler failed."
    scanned = logscan.scan_text("\n".join([load, stop, dead, dead]))
    assert scanned["error_lines"] == 0 and scanned["error_lines_after_shutdown"] == 2
    assert logscan.scan_text("\n".join([load, dead, stop]))["error_lines"] == 1


def test_the_seeded_requests_go_again_alone_without_prefix_hits_or_aborts():
    plan = workload.build("llama_ctx_eagle", 0, 96, fake_greedy, fake_detokenize)
    seeded = [r for r in plan.requests if r.compare == "eager"]
    solo = plan.solo_requests()
    assert seeded and len(solo) == len(seeded)
    for r, s in zip(seeded, solo):
        assert s.rid == r.rid + workload.SOLO_SUFFIX and s.compare == "eager" and s.abort_after_chunks == 0
        assert s.body["cache_salt"] == s.rid and s.body["stream"] is False
        assert {k: v for k, v in s.body.items() if k not in ("cache_salt", "stream")} == \
            {k: v for k, v in r.body.items() if k not in ("stream", "stream_options")}
