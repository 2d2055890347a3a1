"""The docs' verdicts and published numbers are the committed results', and no verdict goes unchecked.

Issue 36 found the README saying the MRV2 no-regression bench was "not yet decided" in one place and "every cell
holds" in another. Here each verdict sentence of ``README.md``, ``DEVELOPERS.md`` and ``docs/*.md`` is a row of
``CLAIMS``: the doc, a pattern the sentence must match (whitespace folded, so line wraps do not matter), and a check
that reads the committed JSON under ``bench/results/`` and says what the sentence must say. A doc that words a
verdict the JSON does not support fails, and so does a verdict word (``VERDICT``) that no row covers: a new verdict
sentence gets a row, with the results it stands on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest

from results_readback import acceptance_lengths, compiles_in_every_call, load

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "DEVELOPERS.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))

MRV2 = "bench/results/2026-11-27-h200-session15/mrv2_bench"
PINNED = (f"{MRV2}/pooled_pinned_eagle/bench_pool.json", f"{MRV2}/pooled_pinned_eagle3/bench_pool.json")
"""MRV2 on our CUDA platform / on vLLM's, both engines on one pinned CPU, every pinned boot pooled (K=3, then K=5)."""
UNPINNED = (f"{MRV2}/pooled_unpinned_eagle/bench_pool.json", f"{MRV2}/pooled_unpinned_eagle3/bench_pool.json")
"""The same bench unpinned, every unpinned H200 boot pooled."""
SERVE = "bench/results/2026-11-27-h200-session14/real_shapes_summary/serve_bench_summary.json"
"""Every real-shape serving bench pooled: the README's serving table."""
PAIRED = "paired_ours_platform_mrv2_vs_builtin_mrv2"

VERDICT = re.compile(r"\bundecided\b|\bnot (?:yet )?decided\b|\bhas not decided\b|\bholds at 0\.98\b|"
                     r"\bevery cell holds\b", re.IGNORECASE)
"""Words that state a verdict; each occurrence in a doc must lie inside a matched ``CLAIMS`` pattern."""


def results(path: str) -> dict:
    return load(ROOT / path)


def cells(paths: tuple[str, ...]) -> list[dict]:
    """The paired cells (one per report pool and concurrency) of the MRV2 bench pools; none is an error."""
    found = [cell for path in paths for cell in results(path)["summary"][PAIRED].values()]
    assert found, paths
    return found


def every_cell_holds(paths: tuple[str, ...]) -> int:
    verdicts = [cell["verdict"] for cell in cells(paths)]
    assert set(verdicts) == {"holds"}, verdicts
    return len(verdicts)


def most_cells_undecided(paths: tuple[str, ...]) -> int:
    verdicts = [cell["verdict"] for cell in cells(paths)]
    assert verdicts.count("undecided") * 2 > len(verdicts), verdicts
    return len(verdicts)


def lower_bounds(paths: tuple[str, ...]) -> list[float]:
    return [cell["interval"][0] for cell in cells(paths)]


def ratios_of_medians(path: str) -> list[float]:
    summary = results(path)["summary"]["ours_platform_mrv2_over_builtin_mrv2"]
    return [summary[c] for c in sorted(summary, key=int)]


def span(values: list[float], digits: int) -> list[str]:
    return [f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"]


def boots_and_passes() -> list[str]:
    """Reports pooled per pair, then passes per cell per pair (one count per pool, or the doc cannot say one)."""
    pools = [results(p) for p in PINNED]
    passes = [{cell["passes"] for cell in pool["summary"][PAIRED].values()} for pool in pools]
    assert all(len(counts) == 1 for counts in passes), passes
    return [str(len(pool["reports"])) for pool in pools] + [str(counts.pop()) for counts in passes]


def check_pinned_numbers_readme(m: re.Match) -> int:
    """README's status row: boots, passes, each ratio of medians, the lower bounds' span, and the verdict."""
    expect = boots_and_passes() + [f"{v:.3f}" for p in PINNED for v in ratios_of_medians(p)]
    expect += span(lower_bounds(PINNED), 3)
    assert list(m.groups()) == expect
    return len(expect) + every_cell_holds(PINNED)


def check_pinned_numbers_platforms(m: re.Match) -> int:
    """docs/platforms.md's row: the same, with the ratios of medians as one span."""
    expect = boots_and_passes() + span([v for p in PINNED for v in ratios_of_medians(p)], 3)
    expect += span(lower_bounds(PINNED), 3)
    assert list(m.groups()) == expect
    return len(expect) + every_cell_holds(PINNED)


def serve_ratios(key: str) -> list[float]:
    found = [cell["output_tok_s"] for pair in results(SERVE)[key].values() for mode in pair.values()
             for cell in mode.values()]
    assert found, key
    return found


def check_serve_range(m: re.Match) -> int:
    expect = span(serve_ratios("ours_over_upstream_v1"), 2) + span(serve_ratios("ours_over_mrv2"), 2)
    assert list(m.groups()) == expect
    return len(expect)


PAIRS = {"8B + EAGLE-3": "llama8b_eagle3", "8B + EAGLE-1": "llama8b_eagle", "30B-A3B MoE + EAGLE-3": "qwen3moe30b_eagle3"}
MODES = {"designed": "designed-perfect", "dummy": "dummy"}
_SERVE_ROW = re.compile(r"^\| (?P<pair>[^|]+?) \| (?P<mode>designed|dummy)\b[^|]*\| (?P<v1>[\d. /]+) \| "
                        r"(?P<mrv2>[^|]+?) \|", re.MULTILINE)


def check_serve_table(m: re.Match) -> int:
    """Every cell of the README's real-shape serving table, rounded as printed, against the pooled summary."""
    summary, compared, rows = results(SERVE), 0, 0
    for row in _SERVE_ROW.finditer(m.group(0)):
        pair, mode = PAIRS[row["pair"]], MODES[row["mode"]]
        for column, key in (("v1", "ours_over_upstream_v1"), ("mrv2", "ours_over_mrv2")):
            cells_ = summary[key].get(pair, {}).get(mode)
            if cells_ is None:
                assert row[column] == "(V1 only)", row.group(0)
                continue
            expect = " / ".join(f"{cells_[c]['output_tok_s']:.2f}" for c in ("1", "2", "8", "32"))
            assert row[column] == expect, (row.group(0), expect)
            compared += 4
        rows += 1
    assert rows == sum(len(p) for p in summary["ours_over_upstream_v1"].values()), rows
    return compared


DRAFT_ASYNC = {256: "bench/results/2026-11-28-h200x2-session20/dmasync256/serve_bench.json",
               1024: "bench/results/2026-11-28-h200x2-session20/dmasync1024/serve_bench.json"}
"""The draft model with async scheduling on both servers, c = 1, 2, one serving bench per input length."""
_ASYNC_ROW = re.compile(r"^ *\| (?P<input>\d+) \| (?P<c1>[^|]+?) \| (?P<c2>[^|]+?) \|$", re.MULTILINE)


def draft_async_cells() -> dict[tuple[int, int], dict]:
    """(input, concurrency) -> the cell's ratios, from benches whose servers both read back async scheduling on."""
    found = {}
    for length, path in DRAFT_ASYNC.items():
        report = results(path)
        assert report["async_scheduling"]["per_variant"] == {"upstream_v1": True, "ours": True}, path
        for c in (1, 2):
            found[length, c] = report["ours_over_upstream_v1"][f"in{length}/greedy/c{c}"]
    return found


def ratio_table(m: re.Match, found: dict[tuple, dict], rows: re.Pattern = _ASYNC_ROW,
                columns: tuple[int, ...] = (1, 2), row_key: Callable[[str], Any] = int) -> int:
    """A README table of rows (``rows``' first group: an input length by default, ``row_key`` reads it) by
    concurrency columns (``rows``' groups ``c1``, ``c2``, ...): each cell's ratio of medians and paired interval,
    rounded as printed; every cell of ``found`` ((row, concurrency) -> the cell's ratios) compared once."""
    compared = 0
    for row in rows.finditer(m.group(0)):
        for c in columns:
            cell = found[row_key(row.group(1)), c]
            low, high = cell["paired_output_tok_s"]["interval"]
            assert row[f"c{c}"] == f"{cell['output_tok_s']:.2f} [{low:.2f}, {high:.2f}]", row.group(0)
            compared += 1
    assert compared == len(found), compared
    return compared


def ratio_list(m: re.Match, found: dict[tuple, dict], keys: list[tuple]) -> int:
    """Ratios of medians printed in the order of ``keys``, which must be every cell of ``found``."""
    assert sorted(keys) == sorted(found), (keys, sorted(found))
    assert list(m.groups()) == [f"{found[key]['output_tok_s']:.2f}" for key in keys]
    return len(keys)


def ratio_range(m: re.Match, found: dict[tuple[int, int], dict]) -> int:
    expect = span([cell["output_tok_s"] for cell in found.values()], 2)
    assert list(m.groups()) == expect
    return len(expect)


MRV2_RUNNER = "vllm.v1.worker.gpu.model_runner.GPUModelRunner"
MRV2_PAIR = (("mrv2", MRV2_RUNNER), ("ours_mrv2", MRV2_RUNNER))
"""Model Runner V2 on vLLM's platform (the baseline) and on ours: (variant, the runner its facts must name)."""
V1_PAIR = (("upstream_v1", "vllm.v1.worker.gpu_model_runner.GPUModelRunner"),
           ("ours", "portable_spec.vllm_adapter.worker.v1_model_runner.PortableV1ModelRunner"))
"""vLLM's drafter on the V1 runner (the baseline) and ours on our V1 runner."""


@dataclass(frozen=True)
class PooledBench:
    """Serving benches of one pair (designed weights, partial head) pooled by ``serve_bench.combine``: ``calls``, the
    bench folders under ``folder`` (``.`` for a bench of one call), and ``folder/pooled``'s summary."""

    folder: str
    calls: tuple[str, ...]
    vllm: str
    pair: str
    rounds: int
    """Rounds over all calls: the pooled summary's ``rounds_run`` (``rounds`` in summaries pooled before it)."""
    variants: tuple[tuple[str, str], tuple[str, str]]
    """(baseline, ours), each (variant, the runner its facts must name); the ratios are ``ours_over_baseline``."""
    length: int | tuple[int, ...]
    """The input length of every pooled cell (or the lengths, every one with every sampling and concurrency)."""
    samplings: tuple[str, ...]
    concurrencies: tuple[int, ...]
    """The pooled cells: exactly every sampling by every concurrency."""
    rows: str = "sampling"
    """What keys a cell with its concurrency: ``sampling`` ((sampling, c)) or ``input`` ((input length, c))."""
    mode: str = "designed-partial"
    """The weights the pooled summary keys the pair by (``dummy``, ``designed-partial``)."""

    def call_reports(self) -> tuple[str, ...]:
        """Each call's report as committed: ``serve_bench.json``, or its ``.gz`` (``combine.REPORT_NAMES``)."""
        from portable_spec_harness.serve_bench.combine import report_path

        return tuple(str(report_path(ROOT / self.folder / call / "serve-bench").relative_to(ROOT))
                     for call in self.calls)

    def pooled(self) -> str:
        return f"{self.folder}/pooled/serve_bench_summary.json"

    def shortest_timed_run(self) -> str:
        """The shortest timed run over the calls, as READMEs print it (one decimal); every round of every pooled cell
        on both variants must be there."""
        lengths = self.length if isinstance(self.length, tuple) else (self.length,)
        cells = len(lengths) * len(self.samplings) * len(self.concurrencies)
        durations = [run["duration_s"] for path in self.call_reports() for run in results(path)["runs"]
                     if run["kind"] == "timed"]
        assert len(durations) == self.rounds * 2 * cells, len(durations)
        return f"{min(durations):.1f}"


def bench_cells(bench: PooledBench) -> dict[str, dict[str, dict]]:
    """``bench``'s pooled summary's cells of its pair and weights: variant -> cell key -> the cell."""
    return results(bench.pooled())["pairs"][bench.pair][bench.mode]["cells"]


def pooled_cells(bench: PooledBench) -> dict[tuple, dict]:
    """(sampling or input length, concurrency) -> the pooled cell's ratios of ours over the baseline, after checking
    that each call ran ``bench.vllm``, both servers on their runner with async scheduling read back on, and ours
    compiling nothing after boot with vLLM's JIT monitor armed. Some reports were written before the driver recorded
    whether the monitor was armed, so "no compile" is judged again from each call's committed server log
    (``jit_judge``: no compile line, the monitor armed), and where a report records it, it must say armed; ``bench.rounds`` in all, in the calls and in the pool."""
    from portable_spec_harness import jit_judge

    (baseline, _), (ours, _) = bench.variants
    reports = [results(path) for path in bench.call_reports()]
    for call, report in zip(bench.calls, reports):
        assert report["vllm"] == bench.vllm, (call, report["vllm"])
        assert report["async_scheduling"]["per_variant"] == {baseline: True, ours: True}, call
        for name, runner in bench.variants:
            assert {f["runner"] for f in report["variants"][name]["facts"]} == {runner}, (call, name)
        entry = report["variants"][ours]
        # reports written since the driver records the monitor must say it was armed; older ones say nothing
        assert entry[jit_judge.COMPILES_KEY] == [] and entry.get(jit_judge.MONITOR_KEY, True) is True, call
        log = ROOT / bench.folder / call / f"serve-bench/server_{ours}.log.gz"
        assert jit_judge.problems(ours, jit_judge.read(log)) == [], (call, log)
    assert sum(report["rounds_done"] for report in reports) == bench.rounds
    summary = results(bench.pooled())
    entry = summary["pairs"][bench.pair][bench.mode]
    assert entry.get("rounds_run", entry["rounds"]) == bench.rounds and entry["vllm"] == [bench.vllm], entry["vllm"]
    if "rounds_run" in entry:  # pooled since combine records both: ``rounds`` is what every cell holds
        assert entry["rounds"] == min(c["runs"] for cells in entry["cells"].values() for c in cells.values())
    ratios = summary[f"{ours}_over_{baseline}"][bench.pair][bench.mode]
    lengths = bench.length if isinstance(bench.length, tuple) else (bench.length,)
    want = {f"in{n}/{s}/c{c}" for n in lengths for s in bench.samplings for c in bench.concurrencies}
    assert set(ratios) == want, (sorted(ratios), sorted(want))
    found = {}
    for key, cell in ratios.items():
        length, sampling, c = key.split("/")
        found[int(length.removeprefix("in")) if bench.rows == "input" else sampling, int(c.removeprefix("c"))] = cell
    assert len(found) == len(ratios), (bench.rows, sorted(ratios))
    return found


DRAFT_MRV2 = PooledBench("bench/results/2026-11-29-h200-session23/dms033s0", ("call1", "call2"), "0.33.0",
                         "llama8b_draft1b", 3, MRV2_PAIR, 256, ("greedy",), (1, 2), rows="input")
"""The draft model on vLLM 0.33.0's Model Runner V2: ours (step 0 and decode steps graphed) over MRV2 on vLLM's
platform, 256 in, greedy, c = 1, 2, three rounds over two calls pooled."""
EAGLE3_MRV2_033 = PooledBench("bench/results/2026-11-29-h200-session24/e3s033", ("call1", "call2"), "0.33.0",
                              "llama8b_eagle3", 3, MRV2_PAIR, 1024, ("greedy", "sampled"), (1, 2))
"""8B + EAGLE-3 on vLLM 0.33.0's Model Runner V2: MRV2 on our platform over MRV2 on vLLM's, 1024 in, greedy and
sampled, c = 1, 2, three rounds over two calls pooled."""
SESSION25 = "bench/results/2026-11-29-h200-session25"
EAGLE3_V1_C2 = PooledBench(f"{SESSION25}/e3c2026", (".",), "0.26.0", "llama8b_eagle3", 3, V1_PAIR, 1024,
                           ("greedy", "sampled"), (2,))
"""vLLM 0.26.0 on the V1 runner (H200): the 8B + EAGLE-3 pair at 1024 in, c=2, one call of three rounds."""
DRAFT_ASYNC_HIGH_C = PooledBench("bench/results/2026-11-30-h200-session34/dm832026",
                                 ("../../2026-11-29-h200-session25/dm832026/call1",
                                  "../../2026-11-29-h200-session25/dm832026/call2", "call4"), "0.26.0",
                                 "llama8b_draft1b", 3, V1_PAIR, 1024, ("greedy", "sampled"), (8, 32))
"""vLLM 0.26.0 on the V1 runner: the draft model at c = 8, 32 with async scheduling on both, three rounds over three
calls (session 25's two and session 34's)."""
EAGLE3_V1_TP2 = PooledBench("bench/results/2026-11-29-h200x2-session27/tp2e3", ("call1", "call2"), "0.28.0",
                            "llama8b_eagle3", 3, V1_PAIR, 1024, ("greedy",), (1, 2, 8, 32), rows="input")
"""vLLM 0.28.0 at TP=2 on the V1 runner (H200x2): the 8B + EAGLE-3 pair at 1024 in, greedy, c = 1 .. 32, three
rounds over two calls pooled."""
EAGLE3_V1_4096 = PooledBench("bench/results/2026-11-29-h200-session28/e3g4k028", ("call1", "call2", "call3"),
                             "0.28.0", "llama8b_eagle3", 3, V1_PAIR, 4096, ("greedy",), (1, 2, 8, 32), rows="input")
"""vLLM 0.28.0 on the V1 runner (one H200): the 8B + EAGLE-3 pair at 4096 in, greedy, c = 1 .. 32, three rounds over
three calls pooled."""
EAGLE3_V1_4096_SAMPLED = PooledBench("bench/results/2026-11-30-h200-session38/e3s4k026", ("call1", "call2", "call3"),
                                     "0.26.0", "llama8b_eagle3", 3, V1_PAIR, 4096, ("sampled",), (1, 2, 8, 32),
                                     rows="input")
"""vLLM 0.26.0 on the V1 runner (one H200): the 8B + EAGLE-3 pair at 4096 in, sampled, c = 1 .. 32, three rounds over
three calls pooled."""
EAGLE3_V1_1024 = PooledBench("bench/results/2026-11-30-h200-session39/e3g1k026", ("call2", "call3", "call4"),
                             "0.26.0", "llama8b_eagle3", 3, V1_PAIR, 1024, ("greedy", "sampled"), (1, 8, 32))
"""vLLM 0.26.0 on the V1 runner (one H200): the 8B + EAGLE-3 pair at 1024 in, greedy and sampled, c = 1, 8, 32, three
rounds over three calls on one boot pooled."""
EAGLE3_V1_128 = PooledBench("bench/results/2026-11-30-h200-session40/e3g128", ("call3", "call4"), "0.26.0",
                            "llama8b_eagle3", 3, V1_PAIR, 128, ("greedy", "sampled"), (1, 8, 32))
"""vLLM 0.26.0 on the V1 runner (one H200): the 8B + EAGLE-3 pair at 128 in, greedy and sampled, c = 1, 8, 32, three
rounds over two calls on one boot pooled."""
EAGLE1_V1_1024_DUMMY = PooledBench("bench/results/2026-12-01-h200-session41/e1d1k", ("call2", "call3"), "0.26.0",
                                   "llama8b_eagle", 3, V1_PAIR, 1024, ("greedy", "sampled"), (1, 2, 8, 32),
                                   mode="dummy")
"""vLLM 0.26.0 on the V1 runner (one H200): the 8B + EAGLE-1 pair, dummy weights, at 1024 in, greedy and sampled,
c = 1 .. 32, three rounds over two calls on one boot pooled."""
EAGLE3_V1_128_C2 = PooledBench("bench/results/2026-11-30-h200-session40/e3g128c2", ("call1",), "0.26.0",
                               "llama8b_eagle3", 3, V1_PAIR, 128, ("greedy", "sampled"), (2,))
"""The same servers at c = 2: one call of three rounds."""
DRAFT_MRV2_1024 = PooledBench("bench/results/2026-11-30-h200-session37/dm1k033",
                              tuple(f"../../2026-11-29-h200-session31/dm1k033/call{i}" for i in (1, 2, 3))
                              + ("call4",), "0.33.0", "llama8b_draft1b", 4, MRV2_PAIR, 1024, ("greedy",),
                              (1, 2, 8, 32), rows="input")
"""The draft model on vLLM 0.33.0's Model Runner V2 at 1024 in, greedy, c = 1 .. 32: session 31's three calls (c = 8,
32 three rounds, c = 1, 2 two) and session 37's third round at c = 1, 2 pooled."""
DRAFT_MRV2_256_HIGH_C = PooledBench("bench/results/2026-11-30-h200-session37/dm256033", ("call1",), "0.33.0",
                                    "llama8b_draft1b", 3, MRV2_PAIR, 256, ("greedy",), (8, 32), rows="input")
"""The draft model on vLLM 0.33.0's Model Runner V2 at 256 in, greedy, c = 8, 32: one call of three rounds."""
DRAFT_ASYNC_256_HIGH_C = PooledBench("bench/results/2026-11-30-h200-session37/dm256v026", ("call1", "call2"),
                                     "0.26.0", "llama8b_draft1b", 3, V1_PAIR, 256, ("greedy",), (8, 32),
                                     rows="input")
"""vLLM 0.26.0 on the V1 runner: the draft model at 256 in, c = 8, 32 with async scheduling on both, three rounds
over two calls."""
DRAFT_DUMMY_V1 = PooledBench("bench/results/2026-11-30-h200-session33/dmd026",
                             tuple(f"../../2026-11-29-h200-session32/dmd026/call{i}" for i in (1, 2, 3))
                             + ("call4", "call5"), "0.26.0", "llama8b_draft1b", 6, V1_PAIR, (256, 1024), ("greedy",),
                             (1, 2, 8, 32), rows="input", mode="dummy")
"""The draft model with dummy weights on vLLM 0.26.0's V1 runner, async scheduling on both, 256 and 1024 in, greedy:
session 32's three calls and session 33's two pooled, three rounds in every cell (six rounds run over the calls)."""
DRAFT_PERFECT_V1 = PooledBench("bench/results/2026-11-30-h200-session38/dmp026",
                               ("../../2026-11-30-h200-session33/dmp026/call1",
                                "../../2026-11-30-h200-session33/dmp026/call2",
                                "../../2026-11-30-h200-session34/dmp026/call3",
                                "../../2026-11-30-h200-session34/dmp026/call4", "call6"), "0.26.0",
                               "llama8b_draft1b", 6, V1_PAIR, (256, 1024), ("greedy",), (1, 2, 8, 32), rows="input",
                               mode="designed-perfect")
"""The draft model with the perfect designed draft on vLLM 0.26.0's V1 runner, async scheduling on both, 256 and 1024
in, greedy: session 33's two calls at c = 1, 2 (the second killed at its limit and assembled by
``serve_bench.finalize``), session 34's two at c = 8, 32 and session 38's third round at 1024 in, c=2 (a fourth at
256 in, c=2): three rounds in every cell, four in one."""
DRAFT_PERFECT_MRV2 = PooledBench("bench/results/2026-11-30-h200-session35/dmp033", ("call2", "call3", "call4"),
                                 "0.33.0", "llama8b_draft1b", 3, MRV2_PAIR, (256, 1024), ("greedy",), (1, 2, 8, 32),
                                 rows="input", mode="designed-perfect")
"""The draft model with the perfect designed draft on vLLM 0.33.0's Model Runner V2, 256 and 1024 in, greedy,
c = 1 .. 32: one round in each of three calls on the same kept servers, pooled."""
DRAFT_DUMMY_MRV2 = PooledBench("bench/results/2026-11-30-h200-session36/dmd033", ("call1", "call2", "call3", "call4"),
                               "0.33.0", "llama8b_draft1b", 6, MRV2_PAIR, (256, 1024), ("greedy",), (1, 2, 8, 32),
                               rows="input", mode="dummy")
"""The draft model with dummy weights on vLLM 0.33.0's Model Runner V2, 256 and 1024 in, greedy, c = 1 .. 32: four
calls on the same kept servers split by concurrency (c = 8, 32 and c = 1, 2 in turn), three rounds in every cell."""
POOLED_BENCHES = (DRAFT_MRV2, EAGLE3_MRV2_033, EAGLE3_V1_C2, DRAFT_ASYNC_HIGH_C, EAGLE3_V1_TP2, EAGLE3_V1_4096,
                  DRAFT_MRV2_1024, DRAFT_DUMMY_V1, DRAFT_PERFECT_V1, DRAFT_PERFECT_MRV2, DRAFT_DUMMY_MRV2,
                  DRAFT_MRV2_256_HIGH_C, DRAFT_ASYNC_256_HIGH_C, EAGLE3_V1_4096_SAMPLED, EAGLE3_V1_1024,
                  EAGLE3_V1_128, EAGLE3_V1_128_C2)
_DRAFT_MRV2_ROW = re.compile(r"^ *\| (\d+) \| (?P<c1>[^|]+?) \| (?P<c2>[^|]+?) \| (?P<c8>[^|]+?) \| (?P<c32>[^|]+?) \|$",
                             re.MULTILINE)


def draft_mrv2_cells() -> dict[tuple[int, int], dict]:
    """Every pooled cell of the draft model on vLLM 0.33.0's MRV2: 256 in (c = 1, 2 session 23's, c = 8, 32 session
    37's) and 1024 in (session 31's calls and session 37's)."""
    return {**pooled_cells(DRAFT_MRV2), **pooled_cells(DRAFT_MRV2_256_HIGH_C), **pooled_cells(DRAFT_MRV2_1024)}


def draft_async_high_c_cells() -> dict[tuple, dict]:
    """The draft model on the V1 runner at c = 8, 32 with async scheduling on both: 1024 in, greedy and sampled
    (keyed by sampling), and 256 in, greedy (keyed by input length)."""
    return {**pooled_cells(DRAFT_ASYNC_HIGH_C), **pooled_cells(DRAFT_ASYNC_256_HIGH_C)}


def check_draft_256_high_c(m: re.Match) -> int:
    """The 256-in, c = 8, 32 sentence: the shortest run (floored as printed), each cell's ratio of medians and paired
    interval, ours ahead in every round, and the p99 ITL pairs (each server's median over the rounds) with upstream's
    move between rounds at c=8."""
    found = pooled_cells(DRAFT_ASYNC_256_HIGH_C)
    reports = [results(path) for path in DRAFT_ASYNC_256_HIGH_C.call_reports()]
    shortest = min(r["duration_s"] for report in reports for r in report["runs"])
    assert m.group(1) == f"{int(shortest * 10) / 10:.1f}", (m.group(1), shortest)
    printed = []
    for c in (8, 32):
        low, high = found[256, c]["paired_output_tok_s"]["interval"]
        printed += [f"{found[256, c]['output_tok_s']:.2f}", f"{low:.2f}", f"{high:.2f}"]
    cells = bench_cells(DRAFT_ASYNC_256_HIGH_C)
    for c in (8, 32):
        ours, up = (cells[v][f"in256/greedy/c{c}"]["output_throughput"]["all"] for v in ("ours", "upstream_v1"))
        assert len(ours) == 3 and all(o > u for o, u in zip(ours, up)), c
    itl = {c: [f"{cells[v][f'in256/greedy/c{c}']['p99_itl_ms']['median']:.1f}" for v in ("ours", "upstream_v1")]
           for c in (8, 32)}
    rounds = [r["result"]["p99_itl_ms"] for report in reports for r in report["runs"]
              if (r["variant"], r["concurrency"]) == ("upstream_v1", 8)]
    assert len(rounds) == 3
    assert list(m.groups()[1:]) == printed + itl[8] + [f"{max(rounds) / min(rounds):.1f}"] + itl[32]
    return len(printed) + 5


NUMBER_WORDS = ("none", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
                "twelve")


def check_draft_set_aside(m: re.Match) -> int:
    """The issue 39 coverage paragraph's count of set-aside pooled summaries: all of them, and those a later pool of
    the same calls replaces (the rest being the early 256-token pool), as ``coverage`` lists them."""
    from portable_spec_harness.serve_bench import coverage

    aside = coverage.coverage(coverage.TABLES["issue39"], ROOT / "bench" / "results", ROOT)["set_aside"]
    superseded = [a for a in aside if a["why"].startswith("superseded by ")]
    assert len(aside) - len(superseded) == 1, aside
    assert [m.group(1).lower(), m.group(2)] == [NUMBER_WORDS[len(aside)], NUMBER_WORDS[len(superseded)]]
    return len(aside)


def check_draft_mrv2_1024_sentence(m: re.Match) -> int:
    """The 1024-in MRV2 sentence: both servers' median TPOT (2 decimals) and p99 ITL (1 decimal) over the pooled
    cells, ours ahead in every round of every cell, and the lowest round at c=32."""
    pooled_cells(DRAFT_MRV2_1024)
    cells = bench_cells(DRAFT_MRV2_1024)
    values = {v: {f: [c[f]["median"] for c in cells[v].values()] for f in ("median_tpot_ms", "p99_itl_ms")}
              for v in ("ours_mrv2", "mrv2")}
    per_round = {key: [o / b for o, b in zip(cells["ours_mrv2"][key]["output_throughput"]["all"],
                                             cells["mrv2"][key]["output_throughput"]["all"])] for key in cells["mrv2"]}
    assert len(per_round) == 4 and all(len(r) == 3 for r in per_round.values())
    lowest = min((r, key) for key, rounds in per_round.items() for r in rounds)
    assert lowest[0] > 1.0 and lowest[1] == "in1024/greedy/c32", lowest
    expect = (span(values["ours_mrv2"]["median_tpot_ms"], 2) + span(values["mrv2"]["median_tpot_ms"], 2)
              + span(values["ours_mrv2"]["p99_itl_ms"], 1) + span(values["mrv2"]["p99_itl_ms"], 1)
              + [f"{lowest[0]:.2f}"])
    assert list(m.groups()) == expect
    return len(expect)


def check_dummy_v1_itl(m: re.Match) -> int:
    """The dummy-weights bullet's p99 ITL ranges (each server's median per cell, over every pooled cell) and the
    kernels upstream compiled after boot (the same count in every call; ours' nothing is ``pooled_cells``' check)."""
    pooled_cells(DRAFT_DUMMY_V1)
    cells = bench_cells(DRAFT_DUMMY_V1)
    itl = {v: [c["p99_itl_ms"]["median"] for c in cells[v].values()] for v in ("ours", "upstream_v1")}
    compiles = {len(results(r)["variants"]["upstream_v1"]["jit_after_boot"]) for r in DRAFT_DUMMY_V1.call_reports()}
    assert len(compiles) == 1 and len(itl["ours"]) == len(itl["upstream_v1"]) == 8, (compiles, itl)
    assert list(m.groups()) == span(itl["ours"], 1) + span(itl["upstream_v1"], 1) + [str(compiles.pop())]
    return 5


def check_draft_high_c_itl(m: re.Match) -> int:
    """The c = 8, 32 bullet's p99 ITL: ours within 10% of upstream's (each server's median per cell) in every pooled
    cell, and the greedy c=8 pair it prints."""
    pooled_cells(DRAFT_ASYNC_HIGH_C)
    cells = bench_cells(DRAFT_ASYNC_HIGH_C)
    itl = {key: (cells["ours"][key]["p99_itl_ms"]["median"], cells["upstream_v1"][key]["p99_itl_ms"]["median"])
           for key in cells["ours"]}
    assert len(itl) == 4 and all(ours <= 1.10 * up for ours, up in itl.values()), itl
    assert list(m.groups()) == [f"{v:.1f}" for v in itl["in1024/greedy/c8"]]
    return len(itl)


def check_perfect_v1_step(m: re.Match) -> int:
    """The perfect draft's bullet: ours' step (median ITL, one step of four tokens) with every draft token accepted
    and the dummy weights' one-token step (median TPOT) at c = 1, 2, one span over both."""
    pooled_cells(DRAFT_PERFECT_V1)
    pooled_cells(DRAFT_DUMMY_V1)
    perfect = bench_cells(DRAFT_PERFECT_V1)["ours"]
    dummy = bench_cells(DRAFT_DUMMY_V1)["ours"]
    low_c = ("/c1", "/c2")
    steps = [cell["median_itl_ms"]["median"] for key, cell in perfect.items() if key.endswith(low_c)] + \
        [cell["median_tpot_ms"]["median"] for key, cell in dummy.items() if key.endswith(low_c)]
    assert len(steps) == 8, steps
    assert list(m.groups()) == span(steps, 1)
    return 2


def check_perfect_mrv2_runs(m: re.Match) -> int:
    """The perfect draft's MRV2 bullet: both servers' median TPOT over the cells at c <= 8, MRV2's widest move
    between rounds in a cell, and its short runs (timed runs under the calls' --min-run-s) with their span."""
    pooled_cells(DRAFT_PERFECT_MRV2)
    cells = bench_cells(DRAFT_PERFECT_MRV2)
    tpot = {v: [c["median_tpot_ms"]["median"] for k, c in cells[v].items() if not k.endswith("/c32")]
            for v in ("ours_mrv2", "mrv2")}
    move = max(max(c["output_throughput"]["all"]) / min(c["output_throughput"]["all"]) for c in cells["mrv2"].values())
    reports = [results(r) for r in DRAFT_PERFECT_MRV2.call_reports()]
    short = [r["duration_s"] for report in reports for r in report["short_runs"] if r["variant"] == "mrv2"]
    runs = [r for report in reports for r in report["runs"] if r["variant"] == "mrv2"]
    assert len(tpot["ours_mrv2"]) == len(tpot["mrv2"]) == 6 and short, (tpot, short)
    expect = span(tpot["ours_mrv2"], 2) + span(tpot["mrv2"], 2) + [f"{move:.1f}", str(len(short)), str(len(runs))] + \
        span(short, 1)
    assert list(m.groups()) == expect, (m.groups(), expect)
    return len(expect)


def check_dummy_mrv2(m: re.Match) -> int:
    """The dummy-weights sentence on 0.33.0: the acceptance length of every pooled run on both servers there and on
    0.26.0's dummy pool (one value each), and both servers' median TPOT over the cells at c <= 8."""
    def acceptance(bench: PooledBench) -> set[float]:
        pooled_cells(bench)
        return acceptance_lengths(bench_cells(bench))

    here, v1 = acceptance(DRAFT_DUMMY_MRV2), acceptance(DRAFT_DUMMY_V1)
    assert len(here) == len(v1) == 1, (here, v1)
    cells = bench_cells(DRAFT_DUMMY_MRV2)
    tpot = {v: [c["median_tpot_ms"]["median"] for k, c in cells[v].items() if not k.endswith("/c32")]
            for v in ("ours_mrv2", "mrv2")}
    assert len(tpot["ours_mrv2"]) == len(tpot["mrv2"]) == 6, tpot
    expect = [f"{here.pop():.2f}", f"{v1.pop():.2f}"] + span(tpot["ours_mrv2"], 2) + span(tpot["mrv2"], 2)
    assert list(m.groups()) == expect, (m.groups(), expect)
    return len(expect)


def check_draft_mrv2_table(m: re.Match) -> int:
    """README's 0.33.0 draft-model table (``check_input_grid``)."""
    return check_input_grid(m, draft_mrv2_cells())


def check_input_grid(m: re.Match, found: dict[tuple[int, int], dict]) -> int:
    """A README table of input lengths by c = 1, 2, 8, 32: each measured cell's ratio of medians and paired interval,
    with "(n rounds)" where the paired interval has fewer than three rounds (one round: the ratio and "(1 round)",
    its interval being the one value); a cell not measured reads "–"; every cell of ``found`` compared once."""
    compared = 0
    for row in _DRAFT_MRV2_ROW.finditer(m.group(0)):
        for c in (1, 2, 8, 32):
            cell = found.get((int(row.group(1)), c))
            if cell is None:
                assert row[f"c{c}"] == "–", row.group(0)
                continue
            paired = cell["paired_output_tok_s"]
            low, high = paired["interval"]
            if paired["passes"] == 1:
                expect = f"{cell['output_tok_s']:.2f} (1 round)"
            else:
                rounds = "" if paired["passes"] >= 3 else f" ({paired['passes']} rounds)"
                expect = f"{cell['output_tok_s']:.2f} [{low:.2f}, {high:.2f}]{rounds}"
            assert row[f"c{c}"] == expect, (row.group(0), expect)
            compared += 1
    assert compared == len(found), compared
    return compared


DRAFT_MRV2_CLOCK = "bench/results/2026-11-29-h200-session31/dm1k033/phase_clock/serve-bench/serve_bench.json"


def check_draft_mrv2_step(m: re.Match) -> int:
    """README: ours' c=1 step (wall, unprofiled) against its summed kernel time (profiled) and their ratio, then
    MRV2's two and both launch counts per step, as the phase clock measured them at 1024 in on vLLM 0.33.0."""
    clocks = results(DRAFT_MRV2_CLOCK)["phase_clock_c1"]
    expect = []
    for variant in ("ours_mrv2", "mrv2"):
        assert clocks[variant]["cell"] == "in1024/greedy/c1"
        wall, kernels = clocks[variant]["clock"]["step_wall_ms"], clocks[variant]["profile"]["device_ms"]
        expect += [f"{wall:.2f}", f"{kernels:.2f}"] + ([f"{wall / kernels:.2f}"] if variant == "ours_mrv2" else [])
    expect += [f"{clocks[v]['split']['launches_per_step']:.0f}" for v in ("mrv2", "ours_mrv2")]
    assert list(m.groups()) == expect, (m.groups(), expect)
    ours = clocks["ours_mrv2"]
    assert ours["clock"]["step_wall_ms"] / ours["profile"]["device_ms"] <= 1.10  # the claim is "within 1.10x"
    return len(expect)


def check_eagle3_v1_tp2(m: re.Match) -> int:
    """README: the ratio of medians per concurrency (2 decimals), then c=32's paired median and interval (3), as printed;
    and ours' pooled p99 ITL at or under upstream's in every cell ("no worse in any cell")."""
    found = pooled_cells(EAGLE3_V1_TP2)
    expect = [f"{found[1024, c]['output_tok_s']:.2f}" for c in (1, 2, 8, 32)]
    paired = found[1024, 32]["paired_output_tok_s"]
    expect += [f"{paired['median']:.3f}", *(f"{x:.3f}" for x in paired["interval"])]
    assert list(m.groups()) == expect, (m.groups(), expect)
    cells = results(EAGLE3_V1_TP2.pooled())["pairs"]["llama8b_eagle3"]["designed-partial"]["cells"]
    p99 = {v: {c: cells[v][f"in1024/greedy/c{c}"]["p99_itl_ms"]["median"] for c in (1, 2, 8, 32)}
           for v in ("upstream_v1", "ours")}
    assert all(p99["ours"][c] <= p99["upstream_v1"][c] for c in (1, 2, 8, 32)), p99
    return len(expect) + 4


MOE_TP2 = "bench/results/2026-11-29-h200x2-session30/tp2moe/pooled/serve_bench_summary.json"
"""vLLM 0.28.0 at TP=2 on the V1 runner (H200x2): the MoE pair with dummy weights at 1024 in, greedy, c = 1 .. 32,
one round in each of three calls (two in session 29), pooled."""
BOOT_TP2 = "bench/results/2026-11-29-h200x2-session30/tp2boot030/tp2-boot/boot_time.json.gz"
"""vLLM 0.28.0 at TP=2 (H200x2): the cold boots, one engine at a time, after a discarded priming boot."""
DENSE_TP2_MRV2 = "bench/results/2026-11-29-h200x2-session30/tp2dense/pooled/serve_bench_summary.json"
"""vLLM 0.28.0 at TP=2 (H200x2): the 8B + EAGLE-3 pair (designed partial head), ours forced onto the V1 runner against
MRV2, 1024 in, greedy, c = 1 .. 32, one round."""


def check_boot_tp2(m: re.Match) -> int:
    """README: ours / upstream V1 on wall to ready (3 decimals) and both walls (s), as measured."""
    report = results(BOOT_TP2)
    walls = {b["variant"]: b["wall_to_ready_s"] for b in report["boots"] if b["phase"] == "cold"}
    assert report["tensor_parallel_size"] == 2 and report["priming"]["error"] is None
    expect = [f"{report['ours_over_upstream']['cold']:.3f}", str(walls["full_drafter"]), str(walls["upstream_v1"])]
    assert list(m.groups()) == expect, (m.groups(), expect)
    return len(expect)


def check_dense_tp2_mrv2(m: re.Match) -> int:
    """README: the lowest and highest ours (V1) / MRV2 on output tok/s (2 decimals) and the rounds, as measured."""
    summary = results(DENSE_TP2_MRV2)
    entry = summary["pairs"]["llama8b_eagle3"]["designed-partial"]
    ratios = [r["output_tok_s"] for r in summary["ours_over_mrv2"]["llama8b_eagle3"]["designed-partial"].values()]
    assert entry["tensor_parallel_size"] == 2 and len(ratios) == 4
    expect = [f"{min(ratios):.2f}", f"{max(ratios):.2f}", {1: "one"}.get(entry["rounds"], str(entry["rounds"]))]
    assert list(m.groups()) == expect, (m.groups(), expect)
    return len(expect)


def check_moe_tp2(m: re.Match) -> int:
    """README: the pooled rounds, then the ratio of medians per concurrency (2 decimals), as printed."""
    summary = results(MOE_TP2)
    pooled = summary["pairs"]["qwen3moe30b_eagle3"]["dummy"]
    ratios = summary["ours_over_upstream_v1"]["qwen3moe30b_eagle3"]["dummy"]
    assert pooled["vllm"] == ["0.28.0"] and set(ratios) == {f"in1024/greedy/c{c}" for c in (1, 2, 8, 32)}
    expect = [str(pooled["rounds"])] + [f"{ratios[f'in1024/greedy/c{c}']['output_tok_s']:.2f}" for c in (1, 2, 8, 32)]
    assert list(m.groups()) == expect, (m.groups(), expect)
    return len(expect)


def check_eagle3_v1_4096(m: re.Match) -> int:
    """README: the ratio of medians per concurrency (2 decimals), c=32's paired median and interval (3), the shortest
    timed run, and ours' p99 ITL over upstream's at c=8 (2 decimals), the one cell past issue 41's 1.25, as a ratio of
    medians and paired round by round."""
    found = pooled_cells(EAGLE3_V1_4096)
    concurrencies = EAGLE3_V1_4096.concurrencies
    expect = [f"{found[4096, c]['output_tok_s']:.2f}" for c in concurrencies]
    paired = found[4096, 32]["paired_output_tok_s"]
    expect += [f"{paired['median']:.3f}", *(f"{x:.3f}" for x in paired["interval"])]
    expect.append(EAGLE3_V1_4096.shortest_timed_run())
    cells = results(EAGLE3_V1_4096.pooled())["pairs"]["llama8b_eagle3"]["designed-partial"]["cells"]
    p99 = {c: cells["ours"][f"in4096/greedy/c{c}"]["p99_itl_ms"]["median"]
           / cells["upstream_v1"][f"in4096/greedy/c{c}"]["p99_itl_ms"]["median"] for c in concurrencies}
    assert [c for c, ratio in p99.items() if ratio > 1.25] == [8], p99  # the README names c=8 alone
    expect.append(f"{p99[8]:.2f}")
    ratios = results(EAGLE3_V1_4096.pooled())["ours_over_upstream_v1"]["llama8b_eagle3"]["designed-partial"]
    expect.append(f"{ratios['in4096/greedy/c8']['paired_p99_itl_ms']['median']:.2f}")
    got = [m.group(i) for i in (2, 3, 4, 5, 6, 7, 8, 1, 9, 10)]
    assert got == expect, (got, expect)
    return len(expect) + len(p99)


def check_eagle3_v1_4096_sampled(m: re.Match) -> int:
    """README: the sampled 4096-token row's ratio of medians per concurrency (2 decimals), the shortest timed run,
    how many kernels upstream compiled after boot (the same in every call, ``_topk_topp_kernel`` among them), and
    ours' p99 ITL over upstream's at c=8, the one cell past issue 41's 1.25."""
    bench = EAGLE3_V1_4096_SAMPLED
    found = pooled_cells(bench)
    expect = [f"{found[4096, c]['output_tok_s']:.2f}" for c in bench.concurrencies]
    expect.append(bench.shortest_timed_run())
    upstream = compiles_in_every_call(ROOT / bench.folder, bench.calls)
    assert "_topk_topp_kernel" in upstream, upstream
    expect.append(str(len(upstream)))
    itl = {c: found[4096, c]["p99_itl_ms"] for c in bench.concurrencies}
    assert [c for c, ratio in itl.items() if ratio > 1.25] == [8], itl
    expect.append(f"{itl[8]:.2f}")
    assert list(m.groups()) == expect, (m.groups(), expect)
    return len(expect)


def check_pooled_rows(m: re.Match, benches: tuple[PooledBench, ...]) -> int:
    """README: one input length's rows from ``benches`` (pooled on the same servers, each its own concurrencies):
    the ratio of medians per concurrency in ascending order, greedy then sampled (2 decimals), the shortest timed run
    of them all, ours' largest p99 ITL over upstream's (each a pooled cell's, within issue 41's 1.25) and how many
    kernels upstream compiled after boot (the same in every call of every bench)."""
    found = {key: cell for bench in benches for key, cell in pooled_cells(bench).items()}
    concurrencies = sorted(c for bench in benches for c in bench.concurrencies)
    cells = [found[sampling, c] for sampling in ("greedy", "sampled") for c in concurrencies]
    expect = [f"{cell['output_tok_s']:.2f}" for cell in cells]
    expect.append(min((bench.shortest_timed_run() for bench in benches), key=float))
    itl = [cell["p99_itl_ms"] for cell in cells]
    assert max(itl) <= 1.25, itl
    expect.append(f"{max(itl):.2f}")
    upstream = {compiles_in_every_call(ROOT / bench.folder, bench.calls) for bench in benches}
    assert len(upstream) == 1, upstream
    expect.append(str(len(next(iter(upstream)))))
    assert list(m.groups()) == expect, (m.groups(), expect)
    return len(expect)


def check_eagle3_v1_128(m: re.Match) -> int:
    """README: the 128-token rows (c = 1, 8, 32 from one pooled bench, c = 2 from another on the same servers)."""
    return check_pooled_rows(m, (EAGLE3_V1_128, EAGLE3_V1_128_C2))


def check_eagle3_v1_1024(m: re.Match) -> int:
    """README: the 1024-token rows, greedy and sampled, c = 1, 8, 32."""
    assert EAGLE3_V1_1024.samplings == ("greedy", "sampled")
    return check_pooled_rows(m, (EAGLE3_V1_1024,))


def check_eagle1_dummy_v1_1024(m: re.Match) -> int:
    """README: the EAGLE-1 dummy pair's 1024-token rows, greedy and sampled, c = 1 .. 32."""
    return check_pooled_rows(m, (EAGLE1_V1_1024_DUMMY,))


def ratio_range_3(m: re.Match, found: dict) -> int:
    expect = span([cell["output_tok_s"] for cell in found.values()], 3)
    assert list(m.groups()) == expect, (m.groups(), expect)
    return len(found)


def check_eagle3_v1_c2(m: re.Match) -> int:
    """README: ratio greedy, ratio sampled (3 decimals), then each paired interval, as printed."""
    found = pooled_cells(EAGLE3_V1_C2)
    assert set(found) == {("greedy", 2), ("sampled", 2)}, set(found)
    expect = [f"{found[mode, 2]['output_tok_s']:.3f}" for mode in ("greedy", "sampled")]
    for mode in ("greedy", "sampled"):
        expect += [f"{x:.3f}" for x in found[mode, 2]["paired_output_tok_s"]["interval"]]
    assert list(m.groups()) == expect, (m.groups(), expect)
    return len(expect)


_SAMPLING_ROW = re.compile(r"^ *\| (?P<sampling>greedy|sampled) \| (?P<c8>[^|]+?) \| (?P<c32>[^|]+?) \|$", re.MULTILINE)
"""A row of a README table of sampling rows by c=8, c=32 columns (``ratio_table``)."""


@dataclass(frozen=True)
class Claim:
    doc: str
    pattern: str
    check: Callable[[re.Match], int]
    """Asserts the sentence against the committed JSON; returns how many values it compared (0 fails)."""
    multiline: bool = False
    """Match the doc as it is (a table), not whitespace-folded."""


CLAIMS = (
    Claim("README.md", r"every cell of the no-regression bench holds at 0\.98", lambda m: every_cell_holds(PINNED)),
    Claim("README.md", r"cuda-h200: no regression against MRV2 on vLLM's platform, every cell holds at 0\.98",
          lambda m: every_cell_holds(PINNED)),
    Claim("README.md", r"all pinned boots pooled \((\d+) and (\d+) boots; (\d+) and (\d+) passes of 512 tokens per cell\): "
                       r"ratios of medians K=3 (\S+) / (\S+) / (\S+) / (\S+), K=5 (\S+) / (\S+) / (\S+) / (\S+); paired "
                       r"lower bounds (\S+)–(\S+): \*\*every cell holds\*\*", check_pinned_numbers_readme),
    Claim("README.md", r"Unpinned on the H200 .{0,120}? the same bench left most cells undecided",
          lambda m: most_cells_undecided(UNPINNED)),
    Claim("README.md", r"output tok/s \*\*(\S+)–(\S+)× upstream V1's\*\* and (\S+)–(\S+)× MRV2's", check_serve_range),
    Claim("README.md", r"^\| pair \| weights \| ours / upstream V1 \(output tok/s\).*?\n\n", check_serve_table,
          multiline=True),
    Claim("README.md", r"^  \| input \| c=1 \| c=2 \|\n.*?\n\n", lambda m: ratio_table(m, draft_async_cells()),
          multiline=True),
    Claim("README.md", r"(\S+)–(\S+)× at c = 1, 2 and \S+–\S+× at c = 8, 32 with `--async-scheduling` on both",
          lambda m: ratio_range(m, draft_async_cells())),
    Claim("README.md", r"^  \| vLLM 0\.33\.0, input \| c=1 \| c=2 \| c=8 \| c=32 \|\n.*?\n\n", check_draft_mrv2_table,
          multiline=True),
    Claim("README.md", r"^  \| dummy weights, input \| c=1 \| c=2 \| c=8 \| c=32 \|\n.*?\n\n",
          lambda m: check_input_grid(m, pooled_cells(DRAFT_DUMMY_V1)), multiline=True),
    Claim("README.md", r"Ours' p99 ITL was (\S+)–(\S+)\s+ms against upstream's (\S+)–(\S+) ms; ours compiled nothing "
                       r"after boot, upstream compiled (\d+) kernels\s+\(\[results\]\(bench/results/2026-11-30-h200-session33/",
          check_dummy_v1_itl),
    Claim("README.md", r"(\S+)–(\S+)× at c = 1–32 with\s+dummy weights",
          lambda m: ratio_range(m, pooled_cells(DRAFT_DUMMY_V1))),
    Claim("docs/platforms.md", r"with dummy weights \(acceptance length 1\.00\) (\S+)–(\S+) at c = 1–32",
          lambda m: ratio_range(m, pooled_cells(DRAFT_DUMMY_V1))),
    Claim("README.md", r"^  \| perfect draft, input \| c=1 \| c=2 \| c=8 \| c=32 \|\n.*?\n\n",
          lambda m: check_input_grid(m, pooled_cells(DRAFT_PERFECT_V1)), multiline=True),
    Claim("README.md", r"(\S+)–(\S+)× at c = 1–32 with a perfect draft",
          lambda m: ratio_range(m, pooled_cells(DRAFT_PERFECT_V1))),
    Claim("docs/platforms.md", r"with the perfect draft \(acceptance length 4\.00\) (\S+)–(\S+) at c = 1–32",
          lambda m: ratio_range(m, pooled_cells(DRAFT_PERFECT_V1))),
    Claim("README.md", r"with every draft token accepted as with none, (\S+)–(\S+) ms at c = 1, 2", check_perfect_v1_step),
    Claim("README.md", r"(\S+)–(\S+)× MRV2 on vLLM's platform on the same pair at inputs 256 and 1024, c = 1–32",
          lambda m: ratio_range(m, draft_mrv2_cells())),
    Claim("README.md", r"(\S+)–(\S+)× with the perfect draft on MRV2",
          lambda m: ratio_range(m, pooled_cells(DRAFT_PERFECT_MRV2))),
    Claim("README.md", r"^  \| vLLM 0\.33\.0, perfect draft, input \| c=1 \| c=2 \| c=8 \| c=32 \|\n.*?\n\n",
          lambda m: check_input_grid(m, pooled_cells(DRAFT_PERFECT_MRV2)), multiline=True),
    Claim("README.md", r"(\S+)–(\S+)× with dummy weights on MRV2",
          lambda m: ratio_range(m, pooled_cells(DRAFT_DUMMY_MRV2))),
    Claim("README.md", r"^  \| vLLM 0\.33\.0, dummy weights, input \| c=1 \| c=2 \| c=8 \| c=32 \|\n.*?\n\n",
          lambda m: check_input_grid(m, pooled_cells(DRAFT_DUMMY_MRV2)), multiline=True),
    Claim("README.md", r"acceptance length (\S+) on both servers here, where 0\.26\.0's gave (\S+):.{0,700}?its "
                       r"median TPOT (\S+)–(\S+) ms at c ≤ 8 against MRV2's (\S+)–(\S+) ms \(\[results\]"
                       r"\(bench/results/2026-11-30-h200-session36/", check_dummy_mrv2),
    Claim("README.md", r"its median TPOT (\S+)–(\S+) ms at c ≤ 8 against MRV2's\s+(\S+)–(\S+) ms\. MRV2's eager "
                       r"speculator is host-bound and its column moved by up to (\S+)× between rounds, so (\d+) of "
                       r"its\s+(\d+) timed runs ended at (\S+)–(\S+) s", check_perfect_mrv2_runs),
    Claim("README.md", r"at 1024 in, (\S+) ms of wall per step against (\S+) ms of kernels, \*\*(\S+)×\*\* \(the host "
                       r"waits .{0,60}?MRV2's eager speculator: (\S+) ms against (\S+) ms, (\d+) launches per step to "
                       r"ours' (\d+)\)", check_draft_mrv2_step),
    Claim("README.md", r"ours / MRV2 \*\*(\S+)–(\S+)×\*\* MRV2 on vLLM's platform in every cell",
          lambda m: ratio_range_3(m, pooled_cells(EAGLE3_MRV2_033))),
    Claim("README.md", r"ours / upstream V1 \*\*(\S+)× greedy and (\S+)× sampled\*\* \(3 interleaved rounds, every run "
                       r"≥ \S+ s; paired intervals \[(\S+), (\S+)\] and \[(\S+), (\S+)\]\)", check_eagle3_v1_c2),
    Claim("README.md", r"^  \| sampling, input 1024 \| c=8 \| c=32 \|\n.*?\n\n",
          lambda m: ratio_table(m, pooled_cells(DRAFT_ASYNC_HIGH_C), _SAMPLING_ROW, (8, 32), str), multiline=True),
    Claim("README.md", r"and (\S+)–(\S+)× at c = 8, 32 with `--async-scheduling` on both",
          lambda m: ratio_range(m, draft_async_high_c_cells())),
    Claim("docs/platforms.md", r"(\S+) / (\S+) at c = 8 / 32 \(256 in, greedy\)",
          lambda m: ratio_list(m, pooled_cells(DRAFT_ASYNC_256_HIGH_C), [(256, 8), (256, 32)])),
    Claim("README.md", r"At 256 in, greedy \(3 interleaved rounds over two calls, prompts sized per variant, every run "
                       r"≥ (\S+) s\): (\S+)\s+\[(\S+), (\S+)\] at c=8 and (\S+) \[(\S+), (\S+)\] at c=32, ours ahead "
                       r"in every round; ours' p99 ITL (\S+) against (\S+) ms\s+at c=8 \(upstream's moved (\S+)× between "
                       r"rounds\), (\S+) against (\S+) ms at c=32", check_draft_256_high_c),
    Claim("README.md", r"(\w+) pooled\s+summaries are set aside \(an early 256-token pool whose first round followed "
                       r"the profiler, and (\w+) pools that a\s+later pool of the same calls and more replaces;",
          check_draft_set_aside),
    Claim("README.md", r"at 1024 in, (\S+)–(\S+) ms against (\S+)–(\S+) ms\s+TPOT, p99 ITL (\S+)–(\S+) ms against "
                       r"(\S+)–(\S+) ms, ours ahead in every round of every cell \(lowest (\S+), c=32\)",
          check_draft_mrv2_1024_sentence),
    Claim("docs/platforms.md", r"1\.45–1\.72 at c = 1, 2 and (\S+)–(\S+) at c = 8, 32 \(1024 in, greedy and sampled\)",
          lambda m: ratio_range(m, pooled_cells(DRAFT_ASYNC_HIGH_C))),
    Claim("README.md", r"Ours' p99 ITL was within 10% of\s+upstream's \((\S+) / (\S+) ms greedy at c=8\)",
          check_draft_high_c_itl),
    Claim("README.md", r"ours / upstream V1 on output tok/s (\S+) \(c=1\), (\S+) \(c=2\), (\S+) \(c=8\), (\S+) \(c=32, "
                       r"paired (\S+) \[(\S+), (\S+)\]\); p99 ITL no worse in any cell", check_eagle3_v1_tp2),
    Claim("README.md", r"MoE pair with dummy weights at TP=2 \(same settings, (\d+) rounds\): (\S+), (\S+), "
                       r"(\S+) and (\S+)\s+at c = 1, 2, 8, 32", check_moe_tp2),
    Claim("README.md", r"Cold boot at TP=2, one engine at a time on a primed host: ours (\S+)× upstream V1 \((\S+) "
                       r"against (\S+) s to ready", check_boot_tp2),
    Claim("README.md", r"ours on V1 gave (\S+)–(\S+)× MRV2 \((\S+) round", check_dense_tp2_mrv2),
    Claim("README.md", r"every run ≥ (\S+) s\) ours / upstream V1 gives (\S+) / (\S+) / (\S+) / (\S+) at c = 1 / 2 / 8 / "
                       r"32 \(c=32 paired (\S+) \[(\S+), (\S+)\]\).{0,200}?Ours' p99 ITL is (\S+)× upstream's at c=8 "
                       r"\((\S+)× paired round by round\)",
          check_eagle3_v1_4096),
    Claim("README.md", r"the same pair and shape, ours / upstream V1 gives (\S+) / (\S+) / (\S+) /\s+(\S+) at c = 1 / 2 / "
                       r"8 / 32 \(3 interleaved rounds, every run ≥ (\S+) s\), with no compile after boot on ours "
                       r"where\s+upstream compiled (\d+) kernels, `_topk_topp_kernel` among them; ours' p99 ITL is "
                       r"(\S+)× upstream's at c=8",
          check_eagle3_v1_4096_sampled),
    Claim("README.md", r"At 1024 in\s+on the same runner, c = 1 / 8 / 32, ours / upstream V1 gives (\S+) / (\S+) / (\S+) "
                       r"greedy and (\S+) / (\S+) / (\S+)\s+sampled \(3 interleaved rounds, every run ≥ (\S+) s\), "
                       r"ours' p99 ITL at most (\S+)× upstream's, with no compile after\s+boot on ours where upstream "
                       r"compiled (\d+) kernels",
          check_eagle3_v1_1024),
    Claim("README.md", r"At 128 in, c = 1 / 2 / 8 / 32, ours / upstream V1 gives (\S+) / (\S+) / (\S+) / (\S+) greedy "
                       r"and (\S+) / (\S+) / (\S+) /\s+(\S+) sampled \(3 interleaved rounds, every run ≥ (\S+) s\), "
                       r"ours' p99 ITL at most (\S+)× upstream's, with no compile\s+after boot on ours where upstream "
                       r"compiled (\d+) kernels",
          check_eagle3_v1_128),
    Claim("README.md", r"The 8B \+ EAGLE-1 pair with dummy weights \(a draft never accepted\) at 1024 in, c = 1 / 2 / 8 "
                       r"/ 32, gives (\S+) / (\S+) / (\S+) / (\S+) greedy and (\S+) / (\S+) / (\S+) / (\S+) sampled \(3 "
                       r"interleaved rounds, every run ≥ (\S+) s\), ours' p99 ITL at most (\S+)× upstream's, with no "
                       r"compile after boot on ours where upstream compiled (\d+) kernels",
          check_eagle1_dummy_v1_1024),
    Claim("docs/platforms.md", r"unpinned on the H200, the bench left most cells undecided; with both engines pinned to "
                               r"one CPU there, every cell holds at 0\.98",
          lambda m: most_cells_undecided(UNPINNED) + every_cell_holds(PINNED)),
    Claim("docs/platforms.md", r"every pinned boot pooled \((\d+) and (\d+) boots, (\d+) and (\d+) passes per cell\): "
                               r"ratios of medians (\S+)–(\S+), paired 95% lower bounds (\S+)–(\S+), \*\*every cell "
                               r"holds at 0\.98\*\*", check_pinned_numbers_platforms),
    Claim("docs/platforms.md", r"every unpinned boot pooled, left most cells undecided",
          lambda m: most_cells_undecided(UNPINNED)),
)


def folded(doc: str) -> str:
    return re.sub(r"\s+", " ", (ROOT / doc).read_text())


def claim_match(claim: Claim) -> re.Match:
    text = (ROOT / claim.doc).read_text() if claim.multiline else folded(claim.doc)
    flags = re.MULTILINE | re.DOTALL if claim.multiline else 0
    found = list(re.finditer(claim.pattern, text, flags))
    assert len(found) == 1, f"{claim.doc}: {len(found)} sentences match {claim.pattern!r} (want exactly one)"
    return found[0]


@pytest.mark.parametrize("claim", CLAIMS, ids=lambda c: f"{c.doc}:{c.pattern[:40]}")
def test_each_verdict_is_what_the_committed_results_say(claim):
    assert claim.check(claim_match(claim)) > 0


@pytest.mark.parametrize("doc", DOCS)
def test_every_verdict_sentence_is_checked(doc):
    """A verdict word outside every checked sentence is a verdict nobody compares with the results."""
    text = folded(doc)
    covered = [m.span() for c in CLAIMS if c.doc == doc and not c.multiline for m in re.finditer(c.pattern, text)]
    loose = [text[max(0, m.start() - 80):m.end() + 20] for m in VERDICT.finditer(text)
             if not any(start <= m.start() and m.end() <= end for start, end in covered)]
    assert loose == [], f"{doc}: verdicts no row of CLAIMS checks against bench/results/: {loose}"


def test_the_checks_read_every_results_file_they_name():
    for path in (*PINNED, *UNPINNED, SERVE, *DRAFT_ASYNC.values(), MOE_TP2, BOOT_TP2, DENSE_TP2_MRV2,
                 *(path for bench in POOLED_BENCHES for path in (*bench.call_reports(), bench.pooled()))):
        assert (ROOT / path).is_file(), path
    assert len(CLAIMS) >= 8 and {c.doc for c in CLAIMS} == {"README.md", "docs/platforms.md"}


COVERAGE_BLOCK = re.compile(r"<!-- coverage --table (\w+) -->\n(.*?)\n<!-- end coverage -->", re.S)


def test_the_readmes_serving_tables_are_the_coverage_of_the_committed_results():
    """README's serving tables (between ``<!-- coverage --table NAME -->`` markers) are exactly what
    ``serve_bench.coverage --table NAME --markdown`` prints from ``bench/results/`` today: a new pooled summary, a
    changed ratio or a hand-edited cell fails here until the table is printed again."""
    from portable_spec_harness.serve_bench import coverage

    blocks = COVERAGE_BLOCK.findall((ROOT / "README.md").read_text())
    assert sorted(name for name, _ in blocks) == sorted(coverage.TABLES), blocks
    for name, shown in blocks:
        table = coverage.TABLES[name]
        expect = coverage.markdown(coverage.coverage(table, ROOT / "bench" / "results", ROOT), table)
        assert shown == expect, name
        assert expect.count("\n| ") >= 2, name  # a header and at least one measured row
