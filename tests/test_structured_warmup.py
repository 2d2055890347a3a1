"""Structured output's bitmask kernel at boot (``vllm_adapter.worker.structured_warmup``), on CPU: the compile keys
of xgrammar's ``apply_token_bitmask_inplace_kernel`` that serving's steps reach through vLLM's own
``apply_grammar_bitmask`` against those the warm-up's launches reach.

Each launch's compile key is recorded with Triton's own binder (``triton_launch_keys.KeyRecorder``: nothing compiles
or runs) for several engines (vocabulary and its padding, logits dtype, K, request and
token limits): the warm-up's variants (``plan_variants``, through ``apply_variant``) and serving's mixes (every batch
size up to the engine's limit, drafts none / all K / mixed, the structured requests all, first, last, all but one,
alternate), each a fresh ``compute_logits``-shaped tensor. Every key serving reaches must be a warm-up key, every
warm-up key one serving reaches, and dropping any one variant must leave a serving key uncompiled. In-process: the
layout ``step_inputs`` hands vLLM's function (the scheduler's bitmask rows per request on this vLLM) masks exactly
the structured rows (xgrammar's CPU kernel), xgrammar's ``"auto"`` picks Triton on CUDA, the blockers, and the one
log line. Runs on every vLLM of the span (``version_span.py``); xgrammar is in each cpu-lane venv (vLLM requires it).
"""

from __future__ import annotations

import inspect
import logging
from types import SimpleNamespace

import pytest
import torch

xgrammar = pytest.importorskip("xgrammar", reason="xgrammar is not installed: vLLM cannot serve structured output")

from vllm.v1.structured_output.utils import apply_grammar_bitmask  # noqa: E402

from portable_spec.vllm_adapter.worker import structured_warmup as sw  # noqa: E402

ENGINES = {  # name: limits and compute_logits' layout
    "k3_vocab1000": {"vocab": 1000, "padded": 1024, "dtype": "bfloat16", "k": 3, "max_reqs": 8, "max_tokens": 8192},
    "nospec_vocab32000_fp16": {"vocab": 32000, "padded": 32000, "dtype": "float16", "k": 0, "max_reqs": 20,
                               "max_tokens": 2048},
    "k1_two_reqs_fp32": {"vocab": 50257, "padded": 50304, "dtype": "float32", "k": 1, "max_reqs": 2,
                         "max_tokens": 512},
    "k3_16_tokens": {"vocab": 1000, "padded": 1024, "dtype": "bfloat16", "k": 3, "max_reqs": 16, "max_tokens": 16},
}
STRUCTURED = {"all": lambda i, n: True, "first": lambda i, n: i == 0, "last": lambda i, n: i == n - 1,
              "all_but_first": lambda i, n: i > 0, "alternate": lambda i, n: i % 2 == 0}


def serving_steps(e: dict) -> list[list[tuple[int, bool]]]:
    """Steps an engine of these limits serves: (logits rows, structured) per request in batch order."""
    k, steps = e["k"], []
    for n in range(1, e["max_reqs"] + 1):
        for drafts in ([0] * n, [k] * n, [i % (k + 1) for i in range(n)]):
            for pick in STRUCTURED.values():
                reqs = [(1 + d, pick(i, n)) for i, d in enumerate(drafts)]
                if any(s for _, s in reqs) and sum(r for r, _ in reqs) <= e["max_tokens"]:
                    steps.append(reqs)
    return steps


def variants(e: dict) -> list[sw.Variant]:
    return sw.plan_variants(e["max_reqs"], e["max_tokens"], e["k"])


class DeviceLogits(torch.Tensor):
    """Logits vLLM's ``apply_grammar_bitmask`` takes for a device's (its only device test is ``is_cpu``)."""

    @property
    def is_cpu(self) -> bool:
        return False


def make_logits(rows: int, e: dict) -> torch.Tensor:
    """``compute_logits``' output: the padded vocabulary's rows in the model's dtype, sliced to the vocabulary."""
    full = torch.randn(rows, e["padded"]).to(getattr(torch, e["dtype"]))
    return full[:, :e["vocab"]].as_subclass(DeviceLogits)


@pytest.fixture(scope="module")
def observed() -> dict:
    """Per engine, the keys of each warm-up variant and of each serving step. Stand-ins put the CPU tensors on the
    device path: the logits' ``is_cpu`` is False (vLLM's function takes its GPU branch: the bitmask and the int32
    ``indices`` tensor copied to the logits' device, unpinned: no pinned allocator here); xgrammar's function is
    called with ``backend="triton"``, what its ``"auto"`` picks on a CUDA device
    (``test_xgrammar_picks_triton_for_cuda_logits``), only where vLLM leaves ``backend`` and ``vocab_size`` at their
    defaults; the device's SM count is an H100's (the ``NUM_SMS`` constexpr: one per device); the kernel is a
    ``KeyRecorder`` (Triton's binder: the key, nothing compiled or run)."""
    import vllm.utils.torch_utils as torch_utils
    import vllm.v1.structured_output.utils as so_utils
    from xgrammar.kernels import apply_token_bitmask_inplace_triton as xgr_triton

    from triton_launch_keys import KeyRecorder

    recorder = KeyRecorder(xgr_triton.apply_token_bitmask_inplace_kernel)
    library_apply = xgrammar.apply_token_bitmask_inplace

    def apply_as_on_cuda(logits, bitmask, *, vocab_size=None, indices=None, backend="auto"):
        assert backend == "auto" and vocab_size is None, "vLLM passes neither"
        assert indices is None or (isinstance(indices, torch.Tensor) and indices.dtype == torch.int32)
        library_apply(logits, bitmask, vocab_size=vocab_size, indices=indices, backend="triton")

    def keys_of(launch) -> set[str]:
        recorder.launches.clear()
        launch()
        return set(recorder.launches)

    found = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(so_utils, "PIN_MEMORY", False)
        mp.setattr(torch_utils, "PIN_MEMORY", False)
        mp.setattr(xgrammar, "apply_token_bitmask_inplace", apply_as_on_cuda)
        mp.setattr(xgr_triton, "apply_token_bitmask_inplace_kernel", recorder)
        mp.setattr(torch.cuda, "get_device_properties",
                   lambda device=None: SimpleNamespace(multi_processor_count=132, gcnArchName=""))
        for name, e in ENGINES.items():
            k, vocab, plan = e["k"], e["vocab"], variants(e)
            warm = make_logits(max(v.rows for v in plan), e)
            found[name] = {
                "warmup": [keys_of(lambda v=v: sw.apply_variant(warm, v, k, vocab)) for v in plan],
                "serving": [keys_of(lambda reqs=reqs: apply_grammar_bitmask(
                    *sw.step_inputs(reqs, k, vocab, "req-"), make_logits(sum(r for r, _ in reqs), e)))
                    for reqs in serving_steps(e)]}
    return found


def union(key_sets) -> set[str]:
    return set().union(*key_sets)


@pytest.mark.parametrize("name", ENGINES)
def test_the_warm_up_compiles_every_key_serving_reaches_and_no_other(observed, name):
    got = observed[name]
    serving, warm = union(got["serving"]), union(got["warmup"])
    assert serving and {key.split("|")[0] for key in serving} == {sw.KERNEL}
    assert all(len(keys) == 1 for keys in got["serving"] + got["warmup"])  # one launch per step
    assert not serving - warm, sorted(serving - warm)
    assert not warm - serving, sorted(warm - serving)
    assert len(warm) == len(got["warmup"])  # each variant its own key: nothing planned twice


def test_the_engines_reach_different_key_counts(observed):
    """Row classes an engine cannot reach are not planned: 6 keys with room for 17 rows beside a request, 4 at two
    requests of 2 rows, 3 where 16 tokens cap a step (no unmasked row beside 16 masked)."""
    counts = {name: len(union(got["serving"])) for name, got in observed.items()}
    assert counts == {"k3_vocab1000": 6, "nospec_vocab32000_fp16": 6, "k1_two_reqs_fp32": 4, "k3_16_tokens": 5}, \
        counts


@pytest.mark.parametrize("name", ENGINES)
def test_without_any_one_variant_a_serving_key_is_left(observed, name):
    """The test bites: each planned launch is the only one compiling some key serving reaches."""
    got = observed[name]
    serving = union(got["serving"])
    for i, variant in enumerate(variants(ENGINES[name])):
        others = union(keys for j, keys in enumerate(got["warmup"]) if j != i)
        assert serving - others, f"dropping {variant} leaves no serving key uncompiled"


def test_the_keys_differ_in_indices_and_row_class_only(observed):
    """What varies within one engine is the indices pointer (None is a constexpr) and num_rows' specialization."""
    keys = sorted(union(observed["k3_vocab1000"]["warmup"]))
    assert sum("('constexpr', None)" in k for k in keys) == 3
    assert sum("('constexpr', 1)" in k for k in keys) == 2
    assert all("('constexpr', 132), ('constexpr', 4096)" in k and "('*bf16', 'D')" in k for k in keys)


def test_the_plan_per_limits():
    assert [(v.rows, v.structured) for v in sw.plan_variants(8, 8192, 3)] == [(1, 1), (2, 2), (16, 16), (2, 1),
                                                                              (3, 2), (17, 16)]
    assert sw.Variant(17, 16).requests(3) == [(4, True)] * 4 + [(1, False)]
    assert [(v.rows, v.structured) for v in sw.plan_variants(1, 8192, 3)] == [(1, 1), (2, 2)]
    assert [(v.rows, v.structured) for v in sw.plan_variants(5, 8192, 3)] == [(1, 1), (2, 2), (16, 16), (2, 1),
                                                                              (3, 2), (17, 16)]
    assert [(v.rows, v.structured) for v in sw.plan_variants(4, 8192, 3)][-1] == (3, 2)


@pytest.mark.parametrize("reqs", [[(4, True), (1, False), (2, True)], [(1, False), (4, True)], [(3, True)] * 3,
                                  [(1, True), (1, False), (1, True), (1, False)]])
def test_step_inputs_mask_exactly_the_structured_rows(reqs, unpinned):
    """The layout the warm-up hands vLLM's ``apply_grammar_bitmask`` is one it accepts on this vLLM (its bitmask rows
    per request, its batch order): an all-zero bitmask masks every structured row and no other (CPU kernel)."""
    logits = torch.zeros(sum(r for r, _ in reqs), 100)
    apply_grammar_bitmask(*sw.step_inputs(reqs, 3, 100, fill=0), logits)
    masked = [bool(torch.isinf(row).all()) for row in logits]
    assert masked == [s for rows, s in reqs for _ in range(rows)]
    assert not any(torch.isinf(row).any() and not torch.isinf(row).all() for row in logits)


def test_xgrammar_picks_triton_for_cuda_logits():
    """The child pins ``backend="triton"``: what ``"auto"`` picks for a tensor on device type cuda."""
    source = inspect.getsource(xgrammar.apply_token_bitmask_inplace)
    assert 'elif logits.device.type == "cuda":\n            backend = "triton"' in source
    assert inspect.signature(xgrammar.apply_token_bitmask_inplace).parameters["backend"].default == "auto"
    source = inspect.getsource(apply_grammar_bitmask)
    assert "xgr.apply_token_bitmask_inplace(logits, grammar_bitmask, indices=index_tensor)" in source


@pytest.fixture
def unpinned(monkeypatch):
    """vLLM's host copies unpinned, as on a host without an accelerator (the test platform says pinning works)."""
    import vllm.utils.torch_utils as torch_utils
    import vllm.v1.structured_output.utils as so_utils

    monkeypatch.setattr(so_utils, "PIN_MEMORY", False)
    monkeypatch.setattr(torch_utils, "PIN_MEMORY", False)


def fake_runner(device: str = "cuda", **over) -> SimpleNamespace:
    parallel = SimpleNamespace(pipeline_parallel_size=over.pop("pp", 1))
    sched = SimpleNamespace(max_num_batched_tokens=8192, max_num_scheduled_tokens=None)
    cfg = SimpleNamespace(parallel_config=parallel, scheduler_config=sched)
    model_config = SimpleNamespace(get_hidden_size=lambda: 8, dtype=torch.float32, get_vocab_size=lambda: 100)
    model = SimpleNamespace(compute_logits=lambda h: torch.zeros(h.shape[0], 128)[:, :100])
    fields = dict(vllm_config=cfg, device=torch.device(device), is_pooling_model=False, max_num_reqs=8,
                  num_spec_tokens=3, model_config=model_config, model=model)
    return SimpleNamespace(**{**fields, **over})


def test_blockers(monkeypatch):
    assert sw.structured_blockers(fake_runner()) == []
    assert sw.structured_blockers(fake_runner("cpu")) == ["xgrammar masks cpu logits without Triton"]
    assert sw.structured_blockers(fake_runner(pp=2)) == ["pipeline parallel (the worker coordinates the stages; only the last has logits)"]
    assert sw.structured_blockers(fake_runner(is_pooling_model=True)) == ["pooling model"]
    monkeypatch.setenv("PORTABLE_SPEC_WARMUP", "off")
    assert sw.structured_blockers(fake_runner()) == ["PORTABLE_SPEC_WARMUP=off"]
    monkeypatch.delenv("PORTABLE_SPEC_WARMUP")
    monkeypatch.setattr(sw.importlib.util, "find_spec", lambda name: None)
    assert sw.structured_blockers(fake_runner()) == ["xgrammar is not installed: no structured output to serve"]


def test_one_line_and_never_raises(monkeypatch, caplog, unpinned):
    """On CPU tensors (the fake's), the launches go to xgrammar's CPU kernel; the line and stats are the warm-up's.
    A failure is one warning and the boot goes on."""
    caplog.clear()
    monkeypatch.setattr(sw, "structured_blockers", lambda runner: [])
    with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
        runner = fake_runner("cpu")
        stats = sw.warm_up_structured_output(runner)
    assert stats["variants"] == [[1, 1], [2, 2], [16, 16], [2, 1], [3, 2], [17, 16]] and runner.structured_warmup_stats
    assert stats["row_stride"] == 128 and stats["vocab"] == 100 and stats["logits_dtype"] == "float32"
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith(sw.LOG_PREFIX)]
    assert len(lines) == 1 and "6 launches (rows masked/of rows: 1, 2, 16, 1/2, 2/3, 16/17" in lines[0], lines
    caplog.clear()
    broken = fake_runner("cpu", model=SimpleNamespace(compute_logits=lambda h: 1 / 0))
    with caplog.at_level(logging.INFO, logger="portable_spec.vllm_adapter"):
        stats = sw.warm_up_structured_output(broken)
    assert stats == {"skipped": ["error: ZeroDivisionError: division by zero"]}
    assert [r.levelname for r in caplog.records if r.getMessage().startswith(sw.LOG_PREFIX)] == ["WARNING"]


def test_the_v1_runner_runs_it_after_the_kernel_warm_up():
    from portable_spec.vllm_adapter.worker.v1_model_runner import PortableV1ModelRunner

    source = inspect.getsource(PortableV1ModelRunner.capture_model)
    assert source.index("warm_up_kernels(self)") < source.index("warm_up_structured_output(self)")


def test_the_version_span_runs_this_module():
    from version_span import MODULES

    assert "test_structured_warmup.py" in MODULES


def test_the_v1_runner_masks_compute_logits_output_with_this_function():
    """Where serving's launch comes from (the warm-up's premises): the V1 runner's ``sample_tokens`` hands the logits
    ``execute_model`` kept (``compute_logits``' output) to ``apply_grammar_bitmask``, which reads the input batch's
    ``req_ids`` only (the warm-up passes its own batch order)."""
    import vllm.v1.worker.gpu_model_runner as runner_module
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    assert runner_module.apply_grammar_bitmask is apply_grammar_bitmask
    assert list(inspect.signature(apply_grammar_bitmask).parameters) == ["scheduler_output", "grammar_output",
                                                                         "input_batch", "logits"]
    sample = " ".join(inspect.getsource(GPUModelRunner.sample_tokens).split())
    assert "apply_grammar_bitmask( scheduler_output, grammar_output, self.input_batch, logits )" in sample
    execute = inspect.getsource(GPUModelRunner.execute_model)
    assert "logits = self.model.compute_logits(sample_hidden_states)" in execute
    body = inspect.getsource(apply_grammar_bitmask)
    assert body.count("input_batch.") == body.count("input_batch.req_ids") == 1


def test_model_runner_v2_masks_with_its_own_kernel_and_warms_it():
    """Model Runner V2 does not reach xgrammar's kernel: its own ``_apply_grammar_bitmask_kernel``, whose launch key
    holds no row count (rows are its grid), and MRV2's own warm-up hands the sampler a ``GrammarOutput``."""
    from vllm.v1.worker.gpu import structured_outputs, warmup

    source = inspect.getsource(structured_outputs)
    assert "import xgrammar" not in source and "xgr." not in source and "_apply_grammar_bitmask_kernel[grid](" in source
    assert "grid = (num_masks, triton.cdiv(vocab_size, BLOCK_SIZE))" in source
    assert "GrammarOutput(" in inspect.getsource(warmup)
