"""``portable-spec bench pool``: several ``bench e2e`` reports of one pair judged together. Passes pair only within
a report; the pooled cell concatenates every report's per-pass ratios; reports of other work, files that are no
report and cells with no passes are refused in one line (never a verdict on nothing)."""

from __future__ import annotations

import importlib.util
import json

import pytest
from test_breakdown_report import cli  # portable_spec.cli.main in-process: (exit code, stdout, stderr lines)

from portable_spec.errors import PortableSpecError
from portable_spec_harness.e2e.bench import summarize
from portable_spec_harness.e2e.child import bench_summary
from portable_spec_harness.e2e.paired import paired_from_ratios, per_pass_ratios
from portable_spec_harness.e2e.pool import pool_reports
from portable_spec_harness.e2e.step_clock import step_report

OURS, OTHER = "ours_platform_mrv2", "builtin_mrv2"
WALL, STEP = f"paired_{OURS}_vs_{OTHER}", f"paired_step_time_{OURS}_vs_{OTHER}"
NOISY = [1.04, 0.96, 1.02, 0.99, 1.03, 0.975, 1.05, 0.995, 1.01]
"""Per-pass ratios around 1.01 whose nine passes cannot decide 0.98 (interval [0.975, 1.04]); eighteen can."""


def cell(walls, steps=None, c=4):
    return {"concurrency": c, "output_tokens": 2048, "wall_s_all": walls,
            **({"step_ms_median_all": steps} if steps else {})}


def report(ours, other, *, steps=(None, None), c=4, date="2026-11-27T18:00:00+00:00", **top):
    """A bench_e2e.json of the documented shape: ``ours`` / ``other`` are each variant's walls at concurrency c."""
    rows = [{"variant": OURS, "bench": [cell(ours, steps[0], c)]},
            {"variant": OTHER, "bench": [cell(other, steps[1], c)]}]
    return {"pair": "llama_eagle3", "model_variant": "perfect", "k": 5, "bench_tokens": 512, "repeats": len(ours),
            "concurrency": [c], "device": "NVIDIA H200", "vllm": "0.26.0", "torch": "2.11.0", "date": date,
            "tensor_parallel_size": 1, "results": rows, **top}


def noisy(scale=1.0):
    """Walls giving ``NOISY`` pass by pass (ours' tok/s over the other's = other's wall over ours'), on a host
    ``scale`` times slower."""
    return report([scale / r for r in NOISY], [scale] * len(NOISY), date=f"scale {scale}")


def test_pooling_concatenates_per_pass_ratios_and_never_pairs_across_reports():
    """Report A (fast boot, other has one pass fewer: its last ours pass pairs with nothing) and report B (slow
    boot, walls alternating 1 s / 2 s on both engines in step): every within-report pair is 1.0. Pairing B's passes
    after A's misaligned ones (concatenating walls first) would give ratios of 2 and 0.5."""
    a = report([0.5] * 3, [0.5] * 2)
    b = report([1.0, 2.0] * 3, [1.0, 2.0] * 3)
    pooled = pool_reports([a, b], ["a.json", "b.json"])
    wall = pooled["summary"][WALL][4]
    assert (wall["passes"], wall["median"], wall["interval"], wall["reports"]) == (2 + 6, 1.0, [1.0, 1.0], 2)
    assert wall["verdict"] == "holds" and pooled["summary"][f"{OURS}_over_{OTHER}"] == {4: 1.0}
    crossed = per_pass_ratios(cell([0.5] * 3 + [1.0, 2.0] * 3), cell([0.5] * 2 + [1.0, 2.0] * 3))
    assert paired_from_ratios(crossed)["median"] == 1.5  # the construction bites: cross-pairing moves the median
    assert [e["paired"] for e in pooled["per_report"][f"{OURS}_over_{OTHER}"]] == [{4: 1.0}, {4: 1.0}]
    assert [r["passes"] for r in pooled["reports"]] == [{OURS: {4: 3}, OTHER: {4: 2}}, {OURS: {4: 6}, OTHER: {4: 6}}]


def test_a_second_consistent_report_turns_undecided_into_holds():
    one = pool_reports([noisy()], ["a.json"])["summary"][WALL][4]
    assert (one["verdict"], one["passes"]) == ("undecided", 9) and one["passes_to_decide"] > 9
    two = pool_reports([noisy(), noisy(1.2)], ["a.json", "b.json"])  # B's host 20% slower: the ratios cancel it
    cell_ = two["summary"][WALL][4]
    assert (cell_["verdict"], cell_["passes"], cell_["bound"]) == ("holds", 18, 0.98)
    assert cell_["interval"][0] >= 0.98 and cell_["median"] == pytest.approx(1.01)


@pytest.mark.parametrize("field, value", [("pair", "llama_eagle"), ("k", 3), ("bench_tokens", 256),
                                          ("model_variant", "partial")])
def test_reports_of_other_work_are_refused_naming_the_field(field, value):
    other = {**noisy(1.2), field: value}
    with pytest.raises(PortableSpecError) as exc:
        pool_reports([noisy(), other], ["a.json", "b.json"])
    message = str(exc.value)
    assert "\n" not in message and f"b.json ran {field} {value!r} but a.json ran {noisy()[field]!r}" in message


def test_nothing_to_pool_is_refused():
    with pytest.raises(PortableSpecError, match="no reports to pool"):
        pool_reports([], [])
    with pytest.raises(PortableSpecError, match="x.json is not a bench e2e report"):
        pool_reports([noisy(), {"pair": "llama_eagle3"}], ["a.json", "x.json"])
    with pytest.raises(PortableSpecError, match="no report ran both variants of a ratio"):
        pool_reports([{**noisy(), "results": noisy()["results"][:1]}], ["a.json"])
    with pytest.raises(PortableSpecError, match="b.json holds the same results as a.json"):
        pool_reports([noisy(), noisy()], ["a.json", "b.json"])  # the same passes twice are not twice the evidence


def test_a_concurrency_without_passes_in_any_report_is_refused():
    errored = report([1.0] * 3, [1.0] * 3)
    errored["results"][0]["bench"].append({"concurrency": 16, "error": "engine died"})
    empty = report([1.1] * 3, [1.1] * 3)
    empty["results"][1]["bench"].append(cell([], c=16))
    with pytest.raises(PortableSpecError) as exc:
        pool_reports([errored, empty], ["a.json", "b.json"])
    assert str(exc.value).startswith(f"{OURS}_over_{OTHER} at concurrency 16 has no paired passes in any report")
    ran = report([1.2] * 3, [1.2] * 3)
    ran["results"][0]["bench"].append(cell([1.0] * 3, c=16))
    ran["results"][1]["bench"].append(cell([1.0] * 3, c=16))
    pooled = pool_reports([errored, empty, ran], ["a.json", "b.json", "c.json"])  # one report ran it: judged on it
    assert pooled["summary"][WALL][16]["passes"] == 3 and pooled["concurrency"] == [4, 16]


def test_step_time_is_paired_only_where_passes_timed_their_steps():
    assert STEP not in pool_reports([noisy(), noisy(1.2)], ["a.json", "b.json"])["summary"]
    timed = report([1.0] * 4, [1.0] * 4, steps=([3.0] * 4, [3.0] * 4))
    pooled = pool_reports([timed, noisy()], ["timed.json", "old.json"])
    step = pooled["summary"][STEP][4]
    assert (step["passes"], step["reports"], step["wall_passes"], step["median"]) == (4, 1, 13, 1.0)
    assert [e.get("paired_step_time") for e in pooled["per_report"][f"{OURS}_over_{OTHER}"]] == [{4: 1.0}, None]


def _bench_row(variant, walls, step_ms):
    passes = [{"wall_s": w, "output_tokens": 2048, "drafts": 100, "accepted": 500, **step_report([s / 1000] * 64)}
              for w, s in zip(walls, step_ms)]
    return {"variant": variant, "bench": [bench_summary(4, 0.01, passes, bench_tokens=512)]}


def test_each_reports_own_medians_match_what_bench_e2e_summarized():
    """Reports built by the bench's own ``bench_summary`` / ``summarize``: pooling one report gives its summary's
    paired cells, and each report's entry its own paired median and ratio of medians."""
    reports = []
    for i, (ours, other) in enumerate([([0.40, 0.43, 0.41, 0.45, 0.39], [0.41, 0.42, 0.44, 0.40, 0.40]),
                                       ([0.52, 0.50, 0.55, 0.49, 0.51], [0.50, 0.53, 0.51, 0.50, 0.52])]):
        rows = [_bench_row(OURS, ours, [3.0 + w for w in ours]), _bench_row(OTHER, other, [3.0 + w for w in other])]
        reports.append({**report([], []), "date": str(i), "results": rows, "summary": summarize(rows)})
    pooled = pool_reports(reports, ["a.json", "b.json"])
    for rep, entry in zip(reports, pooled["per_report"][f"{OURS}_over_{OTHER}"]):
        assert entry["paired"][4] == rep["summary"][WALL][4]["median"]
        assert entry["paired_step_time"][4] == rep["summary"][STEP][4]["median"]
        assert entry["over"][4] == pytest.approx(rep["summary"][f"{OURS}_over_{OTHER}"][4], abs=1e-3)
    alone = pool_reports(reports[:1], ["a.json"])["summary"][WALL][4]
    assert {k: v for k, v in alone.items() if k != "reports"} == reports[0]["summary"][WALL][4]


def test_cli_writes_json_and_png_and_prints_the_pooled_judgement(tmp_path, capsys):
    paths = []
    for name, rep in (("a", noisy()), ("b", noisy(1.2))):
        paths.append(str(tmp_path / f"{name}.json"))
        (tmp_path / f"{name}.json").write_text(json.dumps(rep))
    out = tmp_path / "pool"
    code, text, err = cli(capsys, "bench", "pool", *paths, "--out", str(out))
    assert (code, err) == (0, [])
    lines = text.splitlines()
    assert lines[0] == ("llama_eagle3 (perfect), K=5, TP=1, NVIDIA H200, vLLM 0.26.0: 2 reports pooled (passes "
                        "pair only within a report)")
    # the ratio of pooled medians keeps B's slower host (1.001x); the paired median cancels it (1.010x)
    assert lines[1] == f"{OURS}_over_{OTHER}: c=4: 1.001x"
    assert lines[2].startswith(f"{WALL}: c=4: 1.010x [") and lines[2].endswith("of 18 holds at 0.98")
    assert lines[3].startswith(f"{paths[0]}: scale 1.0, NVIDIA H200, vLLM 0.26.0, 9 repeats; {OURS}_over_{OTHER} "
                               "c=4: 1.010x (paired 1.010x)")
    plots = importlib.util.find_spec("matplotlib") is not None
    assert lines[4:] == [f"{paths[1]}: scale 1.2, NVIDIA H200, vLLM 0.26.0, 9 repeats; {OURS}_over_{OTHER} "
                         "c=4: 1.010x (paired 1.010x)", f"wrote {out / 'bench_pool.json'}",
                         *([f"wrote {out / 'bench_pool.png'}"] if plots else [])]
    written = json.loads((out / "bench_pool.json").read_text())
    assert written["summary"][WALL]["4"]["passes"] == 18 and written["devices"] == ["NVIDIA H200"]
    assert [r["path"] for r in written["reports"]] == paths and "method" in written
    code, text, _ = cli(capsys, "bench", "pool", *paths, "--out", str(out), "--json")
    assert code == 0 and json.loads(text)["summary"][WALL]["4"]["verdict"] == "holds"
    pytest.importorskip("matplotlib")
    png = (out / "bench_pool.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_without_matplotlib_the_pool_says_it_wrote_no_png(tmp_path, capsys, monkeypatch):
    """The PNG the command promises is either written or its absence is one line of the output (text and JSON)."""
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.split(".")[0] == "matplotlib":
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    paths = []
    for name, rep in (("a", noisy()), ("b", noisy(1.2))):
        paths.append(str(tmp_path / f"{name}.json"))
        (tmp_path / f"{name}.json").write_text(json.dumps(rep))
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    out = tmp_path / "pool"
    code, text, _ = cli(capsys, "bench", "pool", *paths, "--out", str(out))
    assert code == 0 and not (out / "bench_pool.png").exists()
    assert text.splitlines()[-1].startswith("no bench_pool.png: matplotlib is not installed")
    code, text, _ = cli(capsys, "bench", "pool", *paths, "--out", str(out), "--json")
    payload = json.loads(text)
    assert payload["no_png"].startswith("no bench_pool.png") and not any(p.endswith(".png") for p in payload["written"])


def test_cli_refusals_are_one_line_exit_2(tmp_path, capsys):
    (tmp_path / "a.json").write_text(json.dumps(noisy()))
    missing = str(tmp_path / "missing.json")
    code, text, err = cli(capsys, "bench", "pool", str(tmp_path / "a.json"), missing, "--out", str(tmp_path / "o"))
    assert (code, text) == (2, "") and err == [f"portable-spec: error: no such file {missing!r}: pass "
                                               "bench_e2e.json files written by bench e2e"]
    assert not (tmp_path / "o").exists()
    (tmp_path / "b.json").write_text(json.dumps({**noisy(1.2), "k": 3}))
    code, _, err = cli(capsys, "bench", "pool", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out",
                       str(tmp_path / "o"))
    assert code == 2 and len(err) == 1 and "ran k 3 but" in err[0] and not (tmp_path / "o").exists()
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = cli(capsys, "bench", "pool", str(tmp_path / "bad.json"), "--out", str(tmp_path / "o"))
    assert code == 2 and len(err) == 1 and "cannot read" in err[0]
    code, _, err = cli(capsys, "bench", "pool", str(tmp_path / "a.json"), "--out", str(tmp_path / "a.json"))
    assert code == 2 and err == [f"portable-spec: error: cannot use --out {str(tmp_path / 'a.json')!r}: it is a "
                                 "file, not a directory: pass a writable directory (created if missing)"]
