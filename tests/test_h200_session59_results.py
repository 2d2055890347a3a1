"""Session 59's results README (one H200, vLLM 0.33.0) read back from its JSON and logs: the pause of our platform's
MRV2 server at its first sampled batch of two, traced to Triton building a launcher with the C compiler (the
first-batches probe's engine stacks), a loading boot without it, and the EAGLE-1 dummy pair's sampled cells at 1024
in pooled with session 57's calls."""

from __future__ import annotations

import gzip
from pathlib import Path

from results_readback import ResultsFolder, first_batches_report, jit_compiles, load, mrv2_pooled_rows, wave_pairs

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "bench" / "results" / "2026-12-03-h200-session59"
S57 = "bench/results/2026-12-03-h200-session57"
SAMPLED_1K = ResultsFolder(RUN, RUN / "e1m1024s")
FB = RUN / "first-batches"


def folded() -> str:
    return " ".join((RUN / "README.md").read_text().split())


def server_log_of(call: str) -> str:
    return gzip.decompress((FB / call / "first-batches" / "server_ours_mrv2.log.gz").read_bytes()).decode()


def ours(call: str) -> dict:
    report = first_batches_report(FB / call)
    (variant,) = report["variants"]
    assert variant["variant"] == "ours_mrv2" and variant["facts"]["runner_kind"] == "mrv2", variant["facts"]
    return variant


def test_the_compiling_boot_paused_at_its_first_batches_of_2_and_32_with_no_compile():
    variant = ours("call1")
    waves = wave_pairs(variant)
    assert len(waves) == 6
    pauses = {p["size"]: (p["excess_ms"], p["first_ms"], p["repeat_ms"]) for p in variant["pauses"]}
    assert pauses == {2: (759.7, 867.1, 107.4), 32: (271.9, 1083.0, 811.1)}
    assert waves[2] == (867.1, 107.4) and waves[32] == (1083.0, 811.1)
    assert variant["jit_after_boot"] == []
    text = folded()
    assert "(867.1 against 107.4 ms to the slowest first token: 759.7 ms)" in text
    assert "of 32 (1083.0 against 811.1 ms: 271.9 ms); no JIT compile after boot" in text
    assert server_log_of("call1").count("Compiling a graph") == 2  # the backbone and the EAGLE head: a compiling boot


def test_the_pause_is_a_launcher_built_with_the_c_compiler_under_vllms_top_p_kernels():
    (pause,) = [p for p in ours("call1")["pauses"] if p["size"] == 2]
    engine = pause["engine"]
    builds = [(stack, n) for stack, n in engine["top_stacks"]
              if stack[:7] == ["subprocess.py:_try_wait:2011", "subprocess.py:_wait:2053", "subprocess.py:wait:1264",
                               "subprocess.py:call:391", "subprocess.py:check_call:408", "build.py:_build:48",
                               "build.py:compile_module_from_src:93"]
              and "driver.py:__init__:683" in stack and "compiler.py:_init_handles:452" in stack]
    assert builds and all(any(f.startswith("topk_topp_triton.py:_apply_topp_split:") for f in s) for s, _ in builds)
    assert all("rejection_sampler.py:_verify:264" in s for s, _ in builds)
    counted = sum(n for _, n in builds)
    assert (counted, engine["samples"]) == (151, 164)
    assert "151 of the engine thread's 164 samples over that wave" in folded()


def test_the_loading_boot_with_the_warm_ups_off_did_not_pause_and_the_monitor_saw_its_compile():
    variant = ours("call2")
    assert variant["pauses"] == []
    waves = wave_pairs(variant)
    assert waves[2] == (110.8, 56.9) and waves[32] == (863.3, 794.4)
    assert jit_compiles(FB / "call2" / "first-batches" / "server_ours_mrv2.log.gz") == ["_gumbel_sample_kernel"]
    assert "Compiling a graph" not in server_log_of("call2")  # it loaded what call 1 compiled
    assert "no pause at 2 (110.8 / 56.9 ms) or 32 (863.3 / 794.4 ms); one JIT compile after boot, " \
           "`_gumbel_sample_kernel`" in folded()


def test_the_1024_token_sampled_pool_holds_three_rounds_and_its_rows_are_the_readmes():
    summary = SAMPLED_1K.summary()
    entry = summary["pairs"]["llama8b_eagle"]["dummy"]
    assert entry["sources"] == [f"{S57}/e1m1024s/call1/serve-bench",
                                "bench/results/2026-12-03-h200-session59/e1m1024s/call1/serve-bench"]
    assert entry["vllm"] == ["0.33.0"] and summary["problems"] == []
    rows = mrv2_pooled_rows(entry, entry["ours_mrv2_over_mrv2"])
    assert len(rows) == 2 and all(row.endswith("| 3 |") for row in rows)
    earlier = load(ROOT / S57 / "e1m1024s" / "pooled" / "serve_bench_summary.json")["pairs"]["llama8b_eagle"]["dummy"]
    wide = {c: earlier["cells"][v][f"in1024/sampled/c{c}"]["runs"] for c in (8, 32) for v in ("mrv2", "ours_mrv2")}
    assert set(wide.values()) == {3}  # c = 8, 32 stay counted from session 57's pool, which is not set aside
    rows += [r for r in mrv2_pooled_rows(earlier, earlier["ours_mrv2_over_mrv2"]) if r.startswith(("| 1024 | 8 ",
                                                                                                     "| 1024 | 32 "))]
    readme = (RUN / "README.md").read_text()
    assert len(rows) == 4
    for row in rows:
        assert row in readme, row
    assert min(r["output_tok_s"] for r in entry["ours_mrv2_over_mrv2"].values()) >= 0.97
    assert not (ROOT / S57 / "e1m1024s" / "pooled" / "SET_ASIDE").exists()


def test_this_sessions_round_of_1024_tokens_reads_as_the_readme_says():
    report = SAMPLED_1K.call_report("call1")
    assert report["settings"]["first_round"] == 2 and report["settings"]["rounds"] == 1
    ratios = report["ours_mrv2_over_mrv2"]
    got = {k: (r["output_tok_s"], r["paired_p99_itl_ms"]["median"]) for k, r in ratios.items()}
    assert {k: (round(a, 3), b) for k, (a, b) in got.items()} == {
        "in1024/sampled/c1": (1.001, 1.031), "in1024/sampled/c2": (1.010, 0.826)}, got
    assert "This call's round alone gave 1.001 at c=1 and 1.010 at c=2 (p99 ITL paired 1.031 and 0.826)" in folded()
