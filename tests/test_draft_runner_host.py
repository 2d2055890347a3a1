"""The one draft-graph runner's host-side rules on the CPU: capture order, live-graph budget, per-key fallback, and
the cross-rank agreement that keeps tensor-parallel ranks on the same graphs (two real gloo processes).

No device graph can be captured on a CPU, so the port here is a recording stand-in (``RecordingDevice``): its
"graphs" record which step they captured and replay it. It checks the runner's bookkeeping only; real captures and
replays are the cuda lane's (tests/gpu, and the TP=2 engine with an injected failure in ci/gpu/tp2.sh).
"""

from __future__ import annotations

import os
import warnings

import pytest
import torch.multiprocessing as mp
from hypothesis import given, settings
from hypothesis import strategies as st

from portable_spec.capture_sizes import StepPlan
from portable_spec.draft.agreement import all_ranks_agree
from portable_spec.draft.dispatcher import CHAIN_FUSED, FIRST, DraftDispatcher
from portable_spec.draft.fault_injection import FAIL_CAPTURE_ENV, failing_keys
from portable_spec.draft.runner import DraftGraphRunner, DraftGraphWarning, StepCall, live_graphs
from portable_spec.errors import PortableSpecError
from recording_device import RecordingDevice, RecordingPort


class Steps:
    """A draft step source: each key's step appends its key to ``ran``; capture stores it as the graph's body."""

    def __init__(self, device: RecordingDevice, fail: set | None = None) -> None:
        self.device, self.fail, self.ran = device, fail or set(), []

    def step_call(self, key):
        def run():
            if self.device.capturing is not None:
                if (key.step, key.num_reqs) in self.fail:
                    raise RuntimeError("operation not permitted when stream is capturing")
                self.device.captures.append(f"{key.step}:{key.num_tokens}")
                self.device.capturing.body = lambda: self.ran.append(key)
                return ("static", key)
            self.ran.append(key)
            return ("eager", key)
        return StepCall(run, (key.num_tokens,))


def dispatcher(seqs: int = 8) -> DraftDispatcher:
    return DraftDispatcher({FIRST: StepPlan(4, (4, 8, 16, 32), "FULL"), CHAIN_FUSED: StepPlan(1, (1, 2, 4, 8), "FULL")},
                           seqs)


def runner(fail=None, **kwargs):
    device = RecordingDevice()
    port = RecordingPort(device_module=device)
    return DraftGraphRunner(port, dispatcher(), Steps(device, fail), **kwargs), device


def test_capture_most_tokens_first_then_replay_checks_the_input_addresses():
    run, device = runner()
    report = run.capture()
    tokens = [int(c.split(":")[1]) for c in device.captures]
    assert tokens == sorted(tokens, reverse=True) and device.captures[0] == "first:32"
    assert len(report.captured) == 8 and not report.eager
    key = run.dispatcher.dispatch(CHAIN_FUSED, 3)
    assert run.replay(key, (key.num_tokens,)).outputs == ("static", key)
    assert run.replay(key, (999,)) is None and run.pointer_mismatches == 1
    assert run.replays == {CHAIN_FUSED: 1}
    stats = report.stats()
    assert stats["graphs"] == 8 and stats["num_tokens"] == {"chain_fused": [1, 2, 4, 8], "first": [4, 8, 16, 32]}
    run.close()


def test_the_live_graph_budget_keeps_the_smallest_batches_and_warns_per_key():
    run, _ = runner(live_graph_limit=3)
    assert live_graphs(run.platform) == 0
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        report = run.capture()
    assert sorted((k.step, k.num_tokens) for k in run.captured) == [(CHAIN_FUSED, 1), (CHAIN_FUSED, 2),
                                                                    (FIRST, 4)]
    assert sum(issubclass(w.category, DraftGraphWarning) for w in record) == 5
    assert len(report.stats()["over_budget"]) == 5 and not report.stats()["failed"]
    run.close()
    assert live_graphs(run.platform) == 0


def test_a_failed_capture_runs_that_key_eagerly_and_is_reported():
    run, _ = runner(fail={(FIRST, 2)})
    with pytest.warns(DraftGraphWarning, match=r"first\[q=4 tokens=8 reqs=2 uniform FULL\] runs eagerly: capture "
                                               r"failed: RuntimeError"):
        report = run.capture()
    key = run.dispatcher.dispatch(FIRST, 2)
    assert key not in run.captured and run.replay(key) is None
    assert list(report.stats()["failed"]) == ["first:2"] and report.stats()["graphs"] == 7
    run.close()


def test_keys_that_failed_on_another_rank_are_dropped_here_too():
    seen = []

    def agree(flags):  # another rank failed the third key it captured
        seen.append(list(flags))
        return [ok and i != 2 for i, ok in enumerate(flags)]

    run, device = runner(agree=agree)
    with pytest.warns(DraftGraphWarning, match="capture failed on another rank"):
        report = run.capture()
    third = device.captures[2]
    assert seen == [[True] * 8] and len(run.captured) == 7
    assert f"{third.split(':')[0]}:{int(third.split(':')[1]) // (4 if third.startswith('first') else 1)}" in \
        report.stats()["failed"]
    run.close()


def _rank(rank: int, port: int, results, fail_on_rank1: str) -> None:
    import torch.distributed as dist

    os.environ[FAIL_CAPTURE_ENV] = fail_on_rank1
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        run, _ = runner(agree=lambda flags: all_ranks_agree(flags, None), rank=rank)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run.capture()
        key = run.dispatcher.dispatch(CHAIN_FUSED, 4)
        results[rank] = (sorted(str(k) for k in run.captured), run.replay(key) is None)
        if rank == 0:  # a rank planning one key fewer cannot be reconciled: one line, on every rank, no hang
            flags = [True] * 3
        else:
            flags = [True] * 4
        try:
            all_ranks_agree(flags, None)
        except PortableSpecError as exc:
            results[f"error{rank}"] = str(exc)
    finally:
        dist.destroy_process_group()


def test_two_gloo_ranks_agree_on_dropping_a_key_that_failed_on_one():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    manager = mp.get_context("spawn").Manager()
    results = manager.dict()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_rank, args=(r, port, results, "1:chain_fused:4")) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    (keys0, dropped0), (keys1, dropped1) = results[0], results[1]
    assert keys0 == keys1 and len(keys0) == 7 and dropped0 and dropped1  # same graphs on both ranks
    assert "chain_fused[q=1 tokens=4 reqs=4 uniform FULL]" not in keys0
    for rank in (0, 1):
        assert "ranks planned different drafter graphs" in results[f"error{rank}"]


def test_fault_injection_entries_are_parsed_or_refused_in_one_line():
    assert failing_keys("1:chain_fused:4, *:first:2") == {("1", "chain_fused", 4), ("*", "first", 2)}
    assert failing_keys("") == set()
    with pytest.raises(PortableSpecError, match="is not RANK:KIND:REQS"):
        failing_keys("chain_fused:4")


def test_a_runner_on_a_platform_without_graphs_runs_every_key_eagerly():
    from portable_spec.ports.cpu_port import CpuPort

    run = DraftGraphRunner(CpuPort(), dispatcher(), Steps(RecordingDevice()))
    with pytest.warns(DraftGraphWarning, match="no device graphs"):
        report = run.capture()
    assert not run.captured and len(report.eager) == len(run.graph_keys()) == 8


@settings(max_examples=60, deadline=None)
@given(limit=st.integers(0, 20), first_keys=st.integers(0, 8), second_keys=st.integers(0, 8),
       close_first=st.booleans())
def test_the_live_graph_budget_counts_every_runner_of_the_process(limit, first_keys, second_keys, close_first):
    """Two runners on one device share its budget (MUSA's cap counts the process's graph executables): the second
    gets only what the first left, a third sees what both hold, and a closed runner gives its share back."""
    device = RecordingDevice()
    port = RecordingPort(device_module=device)
    runs = [DraftGraphRunner(port, dispatcher(), Steps(device), live_graph_limit=limit) for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DraftGraphWarning)
        first = runs[0].capture(runs[0].graph_keys()[:first_keys])
        second = runs[1].capture(runs[1].graph_keys()[:second_keys])
        assert len(first.captured) == min(first_keys, limit)
        assert len(second.captured) == min(second_keys, limit - len(first.captured))
        assert len(first.over_budget) + len(first.captured) == first_keys
        assert len(second.over_budget) + len(second.captured) == second_keys
        assert live_graphs(port) == len(first.captured) + len(second.captured) <= limit
        if close_first:
            runs[0].close()
        third = runs[2].capture()
        held = len(second.captured) + (0 if close_first else len(first.captured))
        assert len(third.captured) == min(8, limit - held)
        assert live_graphs(port) == held + len(third.captured) <= limit
    for run in runs:
        run.close()
    assert live_graphs(port) == 0
