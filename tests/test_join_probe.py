"""The join probe's request bodies: greedy by default, sampled (seeded per request) with ``--sampled``, so a probe of
the sampling path really sends what a chat client sends; and the runner it names from a server's facts."""

import argparse

from portable_spec_harness.serve_bench import join_probe


def _args(*argv: str) -> argparse.Namespace:
    return argparse.Namespace(sampled="--sampled" in argv, seed=7)


def test_greedy_requests_send_temperature_zero_only():
    a, b = join_probe.request_sampling(_args(), 0)
    assert a == b == {"temperature": 0.0}


def test_sampled_requests_carry_top_p_and_distinct_seeds():
    seen = []
    for repeat in range(3):
        a, b = join_probe.request_sampling(_args("--sampled"), repeat)
        for body in (a, b):
            assert body["temperature"] == 0.8 and body["top_p"] == 0.95
            seen.append(body["seed"])
    assert len(seen) == 6 and len(set(seen)) == 6


def test_runner_named_from_facts():
    assert join_probe._runner({"use_v2_model_runner": True}) == "mrv2"
    assert join_probe._runner([{"use_v2_model_runner": False}]) == "v1"
    assert join_probe._runner(None) is None
    assert join_probe._runner({"runner": "x"}) is None
