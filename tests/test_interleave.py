"""The interleaved benchmark driver's own behaviour (turn order, the READY/REPLY protocol, a child that dies), with
a protocol-speaking stand-in child: timing a real engine is the cuda lane's job, not a test's."""

from __future__ import annotations

import os
import textwrap

from portable_spec_harness.e2e.child import bench_summary
from portable_spec_harness.e2e.interleave import ServedEngine, measure_interleaved, rotation

STAND_IN = textwrap.dedent('''
    import json, os, sys, time
    variant = sys.argv[sys.argv.index("--variant") + 1]
    print("some log line on stdout", flush=True)
    if os.environ.get("STAND_IN_DIES"):
        sys.exit(3)
    print("READY " + json.dumps({"variant": variant, "boot_s": 0.1}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["job"] == "exit":
            break
        reply = {"warm": {"ttft_s": 0.01}, "pass": {"wall_s": 0.5, "output_tokens": 10, "drafts": 2, "accepted": 4,
                 "at": time.monotonic()}}.get(cmd["job"], {"error": "unknown job"})
        print("REPLY " + json.dumps({**reply, "concurrency": cmd.get("concurrency")}), flush=True)
''')


def engine(tmp_path, variant, dies=False):
    (tmp_path / "stand_in_child.py").write_text(STAND_IN)
    env = {"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if dies:
        env["STAND_IN_DIES"] = "1"
    return ServedEngine(variant, [], tmp_path / f"{variant}.log", env, module="stand_in_child")


def test_every_variant_takes_every_turn_position_equally():
    assert [rotation(["a", "b", "c"], t) for t in range(4)] == [
        ["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"], ["a", "b", "c"]]
    assert rotation([], 3) == []


def test_engines_answer_in_turns_and_ignore_their_log_lines(tmp_path):
    engines = [engine(tmp_path, v) for v in ("upstream_v1", "full_drafter")]
    try:
        assert [e.ready(30)["variant"] for e in engines] == ["upstream_v1", "full_drafter"]
        out = measure_interleaved(engines, (1, 4), repeats=2)
    finally:
        for e in engines:
            e.close()
    a, b = "upstream_v1", "full_drafter"
    assert set(out) == {a, b} and set(out[a]) == {1, 4}
    assert all(len(out[v][c]["passes"]) == 2 for v in out for c in (1, 4))
    # Round 0 runs a before b, round 1 b before a, at each concurrency.
    at = {(v, c, r): out[v][c]["passes"][r]["at"] for v in out for c in (1, 4) for r in (0, 1)}
    assert at[(a, 1, 0)] < at[(b, 1, 0)] and at[(b, 1, 1)] < at[(a, 1, 1)]
    summary = bench_summary(4, 0.01, out[a][4]["passes"], bench_tokens=10)
    assert summary["output_tok_s"] == 20.0 and summary["acceptance_length"] == 3.0


def test_a_child_that_dies_before_ready_is_an_error_not_a_hang(tmp_path):
    dead = engine(tmp_path, "mrv2", dies=True)
    reply = dead.ready(30)
    dead.close()
    assert reply["error"].startswith("exit 3") and "mrv2.log" in reply["error"]
    assert dead.ask({"job": "pass", "concurrency": 1})["error"].startswith("exit 3")
