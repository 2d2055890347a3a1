"""Reading committed GPU results back in the tests that hold a results README to its JSON: a result file, gzip-
compressed or not, a README table as rows of cells, the kernels a server log shows compiled after boot, a boot log's
times and its "init engine" line, the soak's conditions as READMEs name them and a passed soak's servers, and a pooled
serving table as READMEs print it."""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import Any


def load(path: Path) -> dict:
    """A committed JSON result; ``.gz`` ones are read through gzip (results over 1 KiB are stored compressed), by the
    reader the serving bench's pooling and coverage use. A ``NAME`` stored only as ``NAME.gz`` (a call's report,
    compressed to keep the tree under its limit, as ``combine.load`` reads it) is read from there."""
    from portable_spec_harness.serve_bench.combine import read_json

    packed = path.with_name(path.name + ".gz")
    return read_json(packed if not path.exists() and packed.exists() else path)


@dataclass(frozen=True)
class ResultsFolder:
    """A session's results folder as its readback test reads it: the README (as written, and with its whitespace
    folded, for sentences that wrap), a call's serving-bench report and the pooled summary, both under ``bench`` (the
    benchmark's folder inside ``run``)."""

    run: Path
    bench: Path

    def readme(self) -> str:
        return (self.run / "README.md").read_text()

    def folded(self) -> str:
        return " ".join(self.readme().split())

    def section(self, title: str) -> str:
        """The README from ``title`` to the next second-level heading."""
        text = self.readme()
        start = text.index(title)
        end = text.find("\n## ", start + 1)
        return text[start:] if end < 0 else text[start:end]

    def call_report(self, folder: str) -> dict:
        return load(self.bench / folder / "serve-bench" / "serve_bench.json")

    def console(self, folder: str) -> str:
        """A call's lane console (stored compressed)."""
        return gzip.decompress((self.bench / folder / "console.log.gz").read_bytes()).decode()

    def summary(self) -> dict:
        return load(self.bench / "pooled" / "serve_bench_summary.json")

    def pooled_entry(self, pair: str, mode: str, vllm: str, calls: tuple[str, ...], tp: int = 1) -> tuple[dict, dict]:
        """The pooled summary and its entry for ``pair`` / ``mode``, checked to pool ``calls`` (in that order) of
        ``vllm`` at tensor parallel ``tp``."""
        summary = self.summary()
        entry = summary["pairs"][pair][mode]
        assert entry["vllm"] == [vllm] and entry["tensor_parallel_size"] == tp, (entry["vllm"], entry.get("tp"))
        assert [Path(p).parts[-2] for p in entry["sources"]] == list(calls), entry["sources"]
        return summary, entry


DRAFTERS = {"ours": "portable_spec.vllm_adapter.spec_decode.draft_model.FullGraphDraftModelProposer",
            "upstream_v1": "vllm.v1.spec_decode.draft_model.DraftModelProposer"}
"""The drafter each variant's server must report for ``draft_model`` on the V1 runner."""


EAGLE_DRAFTERS = {"ours": "portable_spec.vllm_adapter.spec_decode.proposer.FullGraphEagleProposer",
                  "upstream_v1": "vllm.v1.spec_decode.eagle.EagleProposer"}
"""The drafter each variant's server must report for EAGLE and EAGLE-3 on the V1 runner."""


def check_draft_v1_call(report: dict, call: str, commit: str, mode: str, tree_changes: int = 0,
                        drafters: dict[str, str] = DRAFTERS) -> int:
    """One serving-bench call on vLLM 0.26.0's V1 runner (one H200), of the draft model unless ``drafters`` says
    otherwise (``EAGLE_DRAFTERS``): ``commit``'s code, exactly ``drafters``' servers (both, or one for a call that
    ran one variant) on the V1 runner with async scheduling read back on, each reporting its drafter; returns the
    servers checked."""
    assert report["vllm"] == "0.26.0" and report["commit"].startswith(commit), call
    assert report["tree_changes"] == tree_changes, (call, report["tree_changes"])
    assert report["device"] == "NVIDIA H200" and sorted(report["variants"]) == sorted(drafters), call
    assert report["pair"]["mode"] == mode and report["pair"]["k"] == 3, call
    assert report["async_scheduling"]["per_variant"] == {v: True for v in drafters}, call
    for variant, info in report["variants"].items():
        assert info["facts"] and all(f["runner_kind"] == "v1" for f in info["facts"]), (call, variant)
        assert {f["drafter"] for f in info["facts"]} == {drafters[variant]}, (call, variant)
    return len(report["variants"])


SPECULATORS = {"mrv2": "vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator.StandaloneARSpeculator",
               "ours_mrv2": "portable_spec.vllm_adapter.spec_decode.standalone_ar.GraphedStandaloneARSpeculator"}
"""The speculator each variant's server must report for ``draft_model`` on vLLM 0.33.0's Model Runner V2."""
MRV2_VARIANTS = tuple(SPECULATORS)
EAGLE_SPECULATORS = {v: "vllm.v1.worker.gpu.spec_decode.eagle.speculator.EagleSpeculator" for v in MRV2_VARIANTS}
"""EAGLE and EAGLE-3 on MRV2: vLLM's own speculator on vLLM's platform and on ours alike."""


def check_draft_mrv2_call(report: dict, call: str, commit: str, mode: str, tree_changes: int = 0,
                          sized_per_variant: bool = True, speculators: dict[str, str] = SPECULATORS) -> int:
    """One serving-bench call on vLLM 0.33.0's Model Runner V2 (one H200), of the draft model unless ``speculators``
    says otherwise (``EAGLE_SPECULATORS``): ``commit``'s code, prompts sized per variant (or, with
    ``sized_per_variant`` false, once per cell, as a chain begun before ``--size-per-variant`` existed must go on),
    both servers on MRV2 with async scheduling read back on, each reporting its speculator; returns the servers
    checked."""
    assert report["vllm"] == "0.33.0" and report["commit"].startswith(commit), call
    assert report["tree_changes"] == tree_changes, (call, report["tree_changes"])
    assert report["device"] == "NVIDIA H200" and sorted(report["variants"]) == sorted(speculators), call
    assert report["pair"]["mode"] == mode and report["pair"]["k"] == 3, call
    assert report["async_scheduling"]["per_variant"] == {v: True for v in speculators}, call
    assert bool(report["workload"].get("sized_per_variant")) is sized_per_variant, call
    for variant, info in report["variants"].items():
        assert info["facts"] and all(f["runner_kind"] == "mrv2" for f in info["facts"]), (call, variant)
        assert {f["speculator"] for f in info["facts"]} == {speculators[variant]}, (call, variant)
    return len(report["variants"])


def check_eagle3_mrv2_graphs(report: dict, call: str, max_model_len: int = 1232) -> None:
    """The 8B EAGLE-3 (or EAGLE-1) pair's servers on MRV2 booted for 32 sequences of ``max_model_len`` tokens (1232:
    up to 1024 + 128; 4304 for 4096-token prompts): each with 41 FULL graphs (target 17, draft decode 7, draft
    prefill 17) in one pool, in every fact read back."""
    assert (report["workload"]["max_model_len"], report["workload"]["max_num_seqs"]) == (max_model_len, 32), call
    for variant, info in report["variants"].items():
        facts = info["facts"]
        assert all(f["one_pool"] and f["mrv2_full_graphs"] == 41 for f in facts), (call, variant)
        managers = facts[0]["mrv2_managers"]
        assert [len(managers[m]["full_sizes"]) for m in ("target", "draft_decode", "draft_prefill")] == [17, 7, 17]


def check_triton_keys_logged(report: dict, call: str) -> None:
    """A serving call whose every server ran with the Triton-key log switch on (``PORTABLE_SPEC_LOG_TRITON_KEYS``)."""
    assert report["variants"] and all(info["env_switches"]["PORTABLE_SPEC_LOG_TRITON_KEYS"] == "on"
                                      for info in report["variants"].values()), call


def checked_eagle3_mrv2_chain(chain: list[tuple[ResultsFolder, str]], commit: str, mode: str,
                              max_model_len: int = 1232, pair: str = "llama8b_eagle3") -> int:
    """Every call of a chain on the 8B EAGLE-3 pair (or ``pair``: the EAGLE-1 one) under MRV2
    (``check_draft_mrv2_call`` with vLLM's EAGLE speculator, prompts sized once per cell;
    ``check_eagle3_mrv2_graphs``): the Triton-key log switch on in every server, one H200, the servers booted
    together, no timed run short. Returns the servers checked."""
    servers = 0
    for folder, call in chain:
        report = folder.call_report(call)
        assert report["pair"]["name"] == pair, call
        servers += check_draft_mrv2_call(report, call, commit, mode, sized_per_variant=False,
                                         speculators=EAGLE_SPECULATORS)
        check_eagle3_mrv2_graphs(report, call, max_model_len)
        check_triton_keys_logged(report, call)
        assert report["device"] == "NVIDIA H200" and report["placement"]["mode"] == "together", call
        assert report["short_runs"] == [], call
    return servers


def checked_mrv2_chain_readme(chain: list[tuple[ResultsFolder, str]], commit: str, mode: str, max_model_len: int,
                              pair: str, kv_tokens: str) -> int:
    """``checked_eagle3_mrv2_chain`` for a chain on one boot, plus what its README (the first call's folder's) says of
    it: both servers' KV cache (``kv_tokens`` as vLLM logs it, "172,800") in the boot call's logs, every call's lane
    JSON and archived runs, the commit with no tree change, the graphs and the model length. Returns the servers
    checked."""
    servers = checked_eagle3_mrv2_chain(chain, commit, mode, max_model_len, pair=pair)
    boot, call = chain[0]
    for variant in MRV2_VARIANTS:
        assert f"GPU KV cache size: {kv_tokens} tokens" in server_log(boot, call, variant), variant
    for folder, each in chain:
        assert (folder.bench / each / "cuda_lane.json").is_file(), each
        check_runs_archived(folder, each)
    text = boot.folded()
    assert f"`{commit}`, `tree_changes` 0 in every call" in text
    assert "41 FULL graphs each (target 17, draft decode 7, draft prefill 17) in one pool" in text
    assert f"(`--max-model-len {max_model_len}`)" in text
    return servers


def kept_chain_budgets(chain: list[tuple[ResultsFolder, str]], registries: list[str | None]) -> list[float]:
    """A chain of calls on one boot: the first call booted every server, each later one reused the servers the call
    before kept (``registries[i]``: the registry call i kept them in, None for a last call that kept none). Returns
    each call's ``--budget-s``, in the chain's order."""
    assert len(registries) == len(chain)
    for i, (folder, call) in enumerate(chain):
        report = folder.call_report(call)
        assert (report.get("kept_servers") or {}).get("registry") == registries[i], call
        for variant, info in report["variants"].items():
            (boot,) = info["boots"]
            if i == 0:
                assert boot["seconds"] > 0 and "reused" not in boot, variant
            else:
                assert boot["seconds"] == 0.0 and boot["reused"]["registry"] == registries[i - 1], (call, variant)
    return [folder.call_report(call)["settings"]["budget_s"] for folder, call in chain]


def no_compile_after_boot(folder: ResultsFolder, calls: tuple[str, ...], variants: tuple[str, ...]) -> int:
    """Every server of every call compiled nothing after boot with vLLM's JIT monitor armed, in the report and in its
    committed log; returns the servers checked."""
    compared = 0
    for call in calls:
        report = folder.call_report(call)
        for variant in variants:
            assert report["variants"][variant]["jit_after_boot"] == [], (call, variant)
            assert report["variants"][variant]["jit_monitor_active"] is True, (call, variant)
            log = folder.bench / call / "serve-bench" / f"server_{variant}.log.gz"
            assert jit_compiles(log) == [], (call, variant)
            compared += 1
    return compared


def compiled_once_after_serving(folder: ResultsFolder, call: str, variant: str, kernel: str) -> None:
    """``variant``'s server log in ``call`` has vLLM's JIT monitor report ``kernel`` compiling once, after the server
    started serving (so in the warm or timed runs, not in its boot)."""
    log = server_log(folder, call, variant).splitlines()
    compiled = [line for line in log if f"JIT compilation during inference: {kernel}" in line]
    serving = next(line for line in log if "Starting vLLM server" in line)
    assert len(compiled) == 1 and log_time(compiled[0]) > log_time(serving), (call, variant, compiled)


def check_flashinfer_cache_restored(folder: ResultsFolder, call: str, variants: tuple[str, ...],
                                    version: str = "0.7.2.post1") -> None:
    """A call that carried FlashInfer's JIT cache (``.gpu-wheels/jit-cache``): its lane console says ``version`` was
    restored, and no server log of ``variants`` shows FlashInfer building a module, so no boot paid for a build."""
    assert f"jit cache: restored FlashInfer {version}" in folder.console(call), call
    for variant in variants:
        assert "Building JIT module" not in server_log(folder, call, variant), (call, variant)


def check_runs_archived(folder: ResultsFolder, call: str) -> None:
    """A call's per-run client files are committed as one ``runs.tar.gz``, not a ``runs/`` folder (the tree's size)."""
    bench = folder.bench / call / "serve-bench"
    assert (bench / "runs.tar.gz").is_file(), call
    assert not (bench / "runs").exists(), call


def value_span(values: Any, digits: int = 2) -> str:
    """The lowest and highest of ``values`` as a README prints a range ("2.14–2.21")."""
    return f"{min(values):.{digits}f}–{max(values):.{digits}f}"


def checked_p99_neighbours(calls: list[tuple[ResultsFolder, str]]) -> int:
    """``itl_stalls.p99_neighbours`` of every timed run of ``calls`` (folder, call): the two gaps sit at the ranks
    numpy's p99 interpolates between (``client.p99_ranks``), bracket the p99 ITL vLLM's bench reported, and the stall
    count is the gaps of 100 ms or more; returns the runs checked."""
    from portable_spec_harness.serve_bench import client

    checked = 0
    for folder, call in calls:
        for run in folder.call_report(call)["runs"]:
            result = run["result"]
            stalls = result["itl_stalls"]
            low, high = stalls["p99_neighbours"]
            assert (low["rank"], high["rank"]) == client.p99_ranks(stalls["itls"]), (call, run["variant"])
            assert low["ms"] - 0.01 <= result["p99_itl_ms"] <= high["ms"] + 0.01, (call, run["variant"])
            assert stalls["gaps_at_least_ms"]["100"] == stalls["gaps_over_threshold"], (call, run["variant"])
            checked += 1
    return checked


SPECULATOR_COUNTS = ("speculator_replays", "speculator_prefill_replays", "speculator_eager_prefills",
                     "speculator_eager_loops")


def speculator_counts(folder: ResultsFolder, calls: tuple[str, ...]) -> dict[str, int]:
    """Ours' speculator over ``calls`` on one kept server (each call starts where the one before ended): the decode-
    step and step-0 replays and eager step-0 passes between the first call's start and the last call's end, and its
    eager decode loops then and at the end."""
    def facts(call: str) -> dict:
        return {f["when"]: f for f in folder.call_report(call)["variants"]["ours_mrv2"]["facts"]}

    for call, then in zip(calls[1:], calls):
        assert [facts(call)["before"][k] for k in SPECULATOR_COUNTS] == \
            [facts(then)["after"][k] for k in SPECULATOR_COUNTS], call
    before, after = facts(calls[0])["before"], facts(calls[-1])["after"]
    counts = {"decode": sum(after["speculator_replays"].values()) - sum(before["speculator_replays"].values()),
              "step0": sum(after["speculator_prefill_replays"].values())
              - sum(before["speculator_prefill_replays"].values()),
              "eager_step0": after["speculator_eager_prefills"] - before["speculator_eager_prefills"],
              "loops_before": before["speculator_eager_loops"], "loops_after": after["speculator_eager_loops"]}
    assert counts["decode"] > 0 and counts["step0"] > 0, counts
    return counts


def check_mrv2_moves_and_tpot(cells: dict, text: str, ours_under: int, widest: str) -> int:
    """A session README's sentences on a pooled MRV2 draft-model table (``text`` folded): ours' output tok/s moved
    by under ``ours_under`` % between rounds in every cell; MRV2's by up to its widest move, in cell ``widest`` with
    that cell's rounds; both servers' median TPOT over the cells at c <= 8. Returns the cells compared."""
    moves = {v: {k: max(c["output_throughput"]["all"]) / min(c["output_throughput"]["all"])
                 for k, c in cells[v].items()} for v in MRV2_VARIANTS}
    assert max(moves["ours_mrv2"].values()) < 1 + ours_under / 100, moves["ours_mrv2"]
    assert f"ours' by under {ours_under}% in every cell" in text
    worst = max(moves["mrv2"].values())
    assert moves["mrv2"][widest] == worst, (widest, moves["mrv2"])
    assert f"**MRV2's column moves by up to {worst:.1f}× between rounds**" in text
    length, _, c = widest.split("/")
    rounds = cells["mrv2"][widest]["output_throughput"]["all"]
    assert (f"({length.removeprefix('in')} in, {c.replace('c', 'c=')}: " + ", ".join(f"{x:.1f}" for x in rounds[:-1])
            + f" and {rounds[-1]:.1f} tok/s)") in text
    tpot = {v: [cells[v][k]["median_tpot_ms"]["median"] for k in cells[v] if not k.endswith("/c32")]
            for v in MRV2_VARIANTS}
    assert (f"Ours' median TPOT is {min(tpot['ours_mrv2']):.2f}–{max(tpot['ours_mrv2']):.2f} ms at c ≤ 8 in every "
            f"cell, against MRV2's {min(tpot['mrv2']):.2f}–{max(tpot['mrv2']):.2f} ms") in text
    return len(moves["mrv2"])


def prefill_waves_sentence(runs: list[dict]) -> str:
    """A session README's sentence on the 1024-in, c=32 runs of a pooled MRV2 draft-model table (``runs``: every
    timed run of its calls): each server's summed ITL gaps of 100 ms or more per run, and its prompts per run."""
    runs = [r for r in runs if (r["input_len"], r["concurrency"]) == (1024, 32)]
    stalls = {v: [r["result"]["stall_total_ms"] / 1000 for r in runs if r["variant"] == v] for v in MRV2_VARIANTS}
    prompts = {v: {r["num_prompts"] for r in runs if r["variant"] == v} for v in MRV2_VARIANTS}
    assert len(stalls["mrv2"]) == len(stalls["ours_mrv2"]) == 3 and all(len(p) == 1 for p in prompts.values())
    return (f"summed ITL gaps of 100 ms or more of {min(stalls['mrv2']):.1f}–{max(stalls['mrv2']):.1f} s per run on "
            f"MRV2, {min(stalls['ours_mrv2']):.1f}–{max(stalls['ours_mrv2']):.1f} s on ours, whose runs held "
            f"{prompts['ours_mrv2'].pop()} prompts to MRV2's {prompts['mrv2'].pop()}")


def mrv2_table_rows(folder: ResultsFolder, section: str) -> dict[tuple[int, int], list[str]]:
    """A session README's pooled MRV2 table under ``section`` keyed by (input, c): the cells after c."""
    return {(int(n), c): row for (n, c), row in rows_by_c(folder.section(section), "256|1024").items()}


def upstream_compiles_ours_none(report: dict, logs: Path) -> list[str]:
    """A call's JIT verdicts: ours compiled nothing after boot with vLLM's JIT monitor armed (in the report and in its
    committed server log under ``logs``); returns the kernels upstream V1's server log says it compiled, the first
    of vLLM's draft path first."""
    assert report["variants"]["ours"]["jit_after_boot"] == [] and report["variants"]["ours"]["jit_monitor_active"]
    assert jit_compiles(logs / "server_ours.log.gz") == []
    upstream = jit_compiles(logs / "server_upstream_v1.log.gz")
    assert upstream and upstream[0] == "_compute_slot_mapping_kernel", upstream
    return upstream


def table(text: str, header: str) -> dict[str, list[str]]:
    """The markdown table in ``text`` whose header row starts with ``header`` (indented or not): its rows' cells keyed
    by the first cell. No such table, or one without rows, fails."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.lstrip().startswith(header))
    rows = {}
    for line in lines[start + 2:]:
        line = line.strip()
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    assert rows, header
    return rows


def rows_by_c(text: str, first: str) -> dict[tuple[str, int], list[str]]:
    """A README table's rows whose first column matches ``first`` (a pattern), keyed by (first column, c): the cells
    after c."""
    rows = {}
    for line in text.splitlines():
        found = re.match(rf"^\| ({first}) \| (\d+) \| (.*) \|$", line)
        if found:
            rows[found.group(1), int(found.group(2))] = [c.strip() for c in found.group(3).split("|")]
    return rows


def log_time(line: str) -> int:
    """A vLLM log line's time of day, in seconds."""
    h, m, s = map(int, re.search(r" (\d\d):(\d\d):(\d\d) ", line).groups())
    return h * 3600 + m * 60 + s


def compile_to_kv_gap(log: str) -> int:
    """Seconds from the last "Initial profiling/warmup run" line (torch.compile's end) to the first "Initial free
    memory" line (the KV-cache sizing), over every rank's lines of a boot log."""
    lines = log.splitlines()
    warm = [log_time(line) for line in lines if "Initial profiling/warmup run" in line]
    free = [log_time(line) for line in lines if "Initial free memory" in line]
    assert warm and free
    return min(free) - max(warm)


INIT_ENGINE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s \(compilation: "
                         r"([\d.]+) s\)")


def init_engine(log: str) -> tuple[str, str]:
    """vLLM's "init engine" seconds and its compilation seconds from a boot log, as printed there; a log without the
    line fails."""
    found = INIT_ENGINE.search(log)
    assert found, "no init engine line"
    return found.group(1), found.group(2)


TORCH_COMPILE = re.compile(r"torch\.compile took ([\d.]+) s in total")


def compile_and_init(log: str) -> tuple[str, str]:
    """A boot log's first "torch.compile took" seconds (the target's) and its "init engine" seconds, as printed: what
    two leases' boots of one model are compared by."""
    found = TORCH_COMPILE.search(log)
    assert found, "no torch.compile line"
    return found.group(1), init_engine(log)[0]


def server_log(folder: ResultsFolder, call: str, variant: str) -> str:
    """A serving call's committed server log (``server_<variant>.log.gz``), as text."""
    import gzip

    return gzip.open(folder.bench / call / "serve-bench" / f"server_{variant}.log.gz", "rt").read()


WARM_UP = re.compile(r"kernel warm-up: 19 steps .*? in ([\d.]+) s; .*?; Triton builds: (\d+) compiled, (\d+) from "
                     r"the disk cache (\S+?)(?:, ptxas (\S+))?; ")
"""Ours' V1 warm-up line; the builds part ends with the ptxas version where the line gives one."""


def warm_up_fields(log: str) -> tuple[str, ...]:
    """``WARM_UP``'s groups in ours' one V1 warm-up line of a server log (none, or more than one, fails)."""
    found = WARM_UP.findall(log)
    assert len(found) == 1, found
    return found[0]


def warm_up(log: str) -> tuple[str, int, int, str]:
    """Ours' one V1 warm-up line in a server log: seconds, Triton builds compiled and from disk, the cache folder."""
    seconds, compiled, from_disk, where, _ = warm_up_fields(log)
    return seconds, int(compiled), int(from_disk), where


def warm_up_ptxas(log: str) -> str:
    """The ptxas version ours' one V1 warm-up line names (a line without one fails)."""
    ptxas = warm_up_fields(log)[4]
    assert ptxas, log[-300:]
    return ptxas


def restart_table(folder: ResultsFolder, name: str, section: str = "## A restart still compiled"
                  ) -> dict[str, tuple[str, int, int, str, str]]:
    """The README's restart table (under ``section``): a compiling boot (``name``/call1) and the boot that loaded its
    model (``name``/call2), each row checked against both server logs (whether vLLM loaded the compiled model, ours'
    warm-up seconds, Triton builds compiled and from disk in ``/root/.triton/cache``, both engines' init seconds).
    Returns per call ``warm_up``'s fields and ours' log."""
    rows = table(folder.section(section), "| boot |")
    assert sorted(rows) == [f"`{name}/call1`", f"`{name}/call2`"], sorted(rows)
    found = {}
    for call, loads in (("call1", False), ("call2", True)):
        logs = {v: server_log(folder, call, v) for v in ("upstream_v1", "ours")}
        assert all(("Directly load AOT compilation" in log) is loads for log in logs.values()), call
        seconds, compiled, from_disk, where = warm_up(logs["ours"])
        found[call] = (seconds, compiled, from_disk, where, logs["ours"])
        cells = rows[f"`{name}/{call}`"]
        assert cells[0] == ("loaded it" if loads else "compiled it") and cells[1] == f"{seconds} s", call
        assert cells[2] == f"{compiled} compiled, {from_disk} from the disk cache, in `{where}`", call
        assert where == "/root/.triton/cache", call
        assert cells[3] == f"{init_engine(logs['upstream_v1'])[0]} / {init_engine(logs['ours'])[0]} s", call
    return found


def upstream_compiled_sentence(kernels: tuple[str, ...]) -> str:
    """How a results README names the kernels upstream V1 compiled after boot: "upstream V1 compiled `a`, `b` and `c`
    after boot in every server log"."""
    named = ", ".join(f"`{k}`" for k in kernels)
    return f"upstream V1 compiled {named.replace(', `_topk', ' and `_topk')} after boot in every server log"


def coverage_counts(table: Any, results: Path, root: Path, as_of: str) -> tuple[dict, int, int]:
    """The coverage of ``table`` as the results folder ``as_of`` saw it, its counted cells and those meeting every
    target."""
    from portable_spec_harness.serve_bench import coverage

    report = coverage.coverage(table, results, root, as_of=as_of)
    return report, report["counted"], report["meeting_every_target"]


def checked_coverage(table: Any, results: Path, root: Path, runs: tuple[str, str], readme: str,
                     expected: tuple[int, int, int, int], row: tuple[str, str, str]) -> list[dict]:
    """A results README's coverage sentence: ``table``'s coverage as of ``runs`` (this folder, the one before) must
    be ``expected`` (cells, counted, meeting every target, counted before), and the folded ``readme`` must say "**N of
    M cells counted, K meeting every target** (B ..."; returns the cells of ``row`` (pair, weights, baseline)."""
    report, counted, meets = coverage_counts(table, results, root, runs[0])
    _, before, _ = coverage_counts(table, results, root, runs[1])
    assert (len(report["cells"]), counted, meets, before) == expected, (counted, meets, before)
    assert f"**{counted} of {len(report['cells'])} cells counted, {meets} meeting every target** ({before}" in readme
    return [c for c in report["cells"] if (c["pair"], c["mode"], c["baseline"]) == row]


def compiles_in_every_call(bench: Path, calls: tuple[str, ...], variant: str = "upstream_v1") -> tuple[str, ...]:
    """The kernels ``variant``'s server log shows compiled after boot (``jit_compiles``), the same in every call of the
    bench folder ``bench`` (asserted)."""
    seen = {tuple(jit_compiles(bench / call / "serve-bench" / f"server_{variant}.log.gz")) for call in calls}
    assert len(seen) == 1, seen
    return next(iter(seen))


def jit_compiles(log: Path) -> list[str]:
    """The kernel names vLLM's JIT monitor logged as compiled during inference in ``log`` (gzipped or not), in
    order; a log where the monitor never activated fails (no compile would then prove nothing)."""
    from portable_spec_harness import jit_judge

    seen = jit_judge.read(log)
    assert seen.monitor_active, log
    return [line.split(": ")[-1] for line in seen.compiles]


SOAK_CONDITIONS = {"preempted": "preemptions", "aborted": "client aborts", "queued": "queued",
                   "chunked_prefill": "chunked prefills", "prefix_cache_hits": "prefix-cache hits",
                   "mixed_sampling_batches": "mixed-sampling batches", "structured_output": "structured output",
                   "staggered_arrivals": "staggered arrivals", "n_gt_1": "`n > 1`", "eos": "EOS",
                   "stop_string": "stop strings", "max_tokens_in_window": "`max_tokens`",
                   "max_model_len": "`max_model_len`", "sampled_off_greedy": "sampled off greedy"}
"""The soak's conditions (keys of a server's ``conditions``) and the words a results README names them by."""


def pooled_row(upstream: dict, ours: dict, ratio: dict) -> list[str]:
    """A pooled serving table's cells after its ``c`` column, as the TP=2 READMEs print them: both medians of output
    tok/s, the ratio of medians, the paired median [interval], then p99 ITL, p99 TTFT and median TPOT (upstream /
    ours), each a median over the rounds."""
    paired = ratio["paired_output_tok_s"]

    def med(cell: dict, field: str) -> float:
        return cell[field]["median"]

    return [f"{med(upstream, 'output_throughput'):.1f}", f"{med(ours, 'output_throughput'):.1f}",
            f"{ratio['output_tok_s']:.3f}",
            f"{paired['median']:.3f} [{paired['interval'][0]:.3f}, {paired['interval'][1]:.3f}]",
            f"{med(upstream, 'p99_itl_ms'):.2f} / {med(ours, 'p99_itl_ms'):.2f}",
            f"{med(upstream, 'p99_ttft_ms'):.2f} / {med(ours, 'p99_ttft_ms'):.2f}",
            f"{med(upstream, 'median_tpot_ms'):.2f} / {med(ours, 'median_tpot_ms'):.2f}"]


def acceptance_lengths(cells: dict[str, dict[str, dict]]) -> set[float]:
    """Every acceptance length a pooled summary's cells (variant -> cell key -> cell) hold, over all their rounds."""
    return {a for by_cell in cells.values() for cell in by_cell.values()
            for a in cell["spec_decode_acceptance_length"]["all"]}


def checked_pooled_cell(cells: dict, ratios: dict, key: str, row: list[str], rounds: int,
                        variants: tuple[str, str] = ("upstream_v1", "ours"),
                        same_prompts: bool = True) -> tuple[dict, dict, list]:
    """One row of a pooled table (``row``: its cells after ``c``, the last one the rounds) against the pooled cell
    ``key``: the printed cells are ``pooled_row``'s, both variants ran ``rounds`` rounds, as the row says, and their
    acceptance lengths were equal round by round where both ran the same prompts (``same_prompts``: false where
    each variant's prompts were sized to its own speed, so the lengths are of different prompt sets and the caller
    judges them). Returns the baseline's and ours' cells (``variants``: upstream V1 and ours unless named) and ours
    over the baseline's output tok/s per round."""
    up, ours = cells[variants[0]][key], cells[variants[1]][key]
    assert row[:-1] == pooled_row(up, ours, ratios[key]), key
    assert up["runs"] == ours["runs"] == int(row[-1]) == rounds, key
    if same_prompts:
        assert up["spec_decode_acceptance_length"]["all"] == ours["spec_decode_acceptance_length"]["all"], key
    per_round = [o / u for o, u in zip(ours["output_throughput"]["all"], up["output_throughput"]["all"])]
    assert len(per_round) == rounds, key
    return up, ours, per_round


def pooled_table(summary: dict, pair: str, mode: str, readme: str, header: str,
                 concurrencies: tuple[int, ...]) -> tuple[dict, dict, dict[str, list[str]]]:
    """A pooled summary's cells and ours-over-upstream-V1 ratios for ``pair``/``mode``, and the README table under
    ``header``, whose rows must be exactly ``concurrencies``."""
    cells = summary["pairs"][pair][mode]["cells"]
    ratios = summary["ours_over_upstream_v1"][pair][mode]
    rows = table(readme, header)
    assert sorted(rows, key=int) == [str(c) for c in concurrencies], sorted(rows)
    return cells, ratios, rows


def pooled_rows_by_round(cells: dict, ratios: dict, rows: dict[str, list[str]], length: int,
                         concurrencies: tuple[int, ...], variants: tuple[str, str] = ("upstream_v1", "ours"),
                         rounds: int | None = None, same_prompts: bool = True,
                         ours_ahead_every_round: bool = False, sampling: str = "greedy") -> tuple[dict[int, dict], str]:
    """Checks each ``sampling`` row of a pooled table at ``length`` tokens (``pooled_row``); returns the ratios per
    concurrency and the per-round line READMEs print ("c=1 1.675, 1.369, 1.781; c=2 ..."), ours over the baseline
    (``variants[0]``, upstream V1 unless named) in each round. Rows that end in their rounds column are checked
    through ``checked_pooled_cell`` when ``rounds`` is given; ``ours_ahead_every_round`` asserts every round above
    1 (issue 39's target for every cell)."""
    by_c, per_round = {}, []
    for c in concurrencies:
        key = f"in{length}/{sampling}/c{c}"
        if rounds is None:
            up, ours = cells[variants[0]][key], cells[variants[1]][key]
            assert rows[str(c)] == pooled_row(up, ours, ratios[key]), c
            ratios_per_round = [o / u for o, u in zip(ours["output_throughput"]["all"],
                                                      up["output_throughput"]["all"])]
        else:
            _, _, ratios_per_round = checked_pooled_cell(cells, ratios, key, rows[str(c)], rounds, variants,
                                                         same_prompts)
        assert ratios_per_round, (c, "no rounds")
        assert not ours_ahead_every_round or min(ratios_per_round) > 1.0, (c, ratios_per_round)
        per_round.append(f"c={c} " + ", ".join(f"{r:.3f}" for r in ratios_per_round))
        by_c[c] = ratios[key]
    return by_c, "; ".join(per_round)


def checked_tables_per_round(section: str, cells: dict, ratios: dict, table: dict[str, list[tuple[int, int]]],
                             variants: tuple[str, str],
                             rounds_of: Callable[[str], int] = lambda key: 3) -> tuple[dict[str, str],
                                                                                       dict[str, list[float]]]:
    """A results README section's greedy table and, after "Sampled", its sampled one, whose rows must be exactly
    ``table``'s (input, c) per sampling, each row checked against its pooled cell (``pooled_rows_by_round``, with
    ``rounds_of(cell key)`` rounds: 3 unless told). Returns, per sampling, the per-round text READMEs print ("1024 in
    c=1 1.006, 0.973; c=2 ..."), and each cell's ratios per round."""
    texts = dict(zip(("greedy", "sampled"), section.split("\nSampled")))
    lines, per_round = {}, {}
    for sampling, wanted in table.items():
        rows = rows_by_c(texts[sampling], r"\d+")
        assert sorted(rows) == sorted((str(n), c) for n, c in wanted), sampling
        said = []
        for length in sorted({n for n, _ in wanted}):
            parts = []
            for c in (c for n, c in wanted if n == length):
                key = f"in{length}/{sampling}/c{c}"
                _, line = pooled_rows_by_round(cells, ratios, {str(c): rows[str(length), c]}, length, (c,), variants,
                                               rounds=rounds_of(key), sampling=sampling)
                parts.append(line)
                per_round[key] = [float(x) for x in re.findall(r"\d\.\d{3}", line)]
            said.append(f"{length} in " + "; ".join(parts))
        lines[sampling] = "; ".join(said)
    return lines, per_round


def merged_pools(pools: list[tuple[dict, dict]], pair: tuple[str, str], ratios_key: str = "ours_over_upstream_v1",
                 variants: tuple[str, str] = ("upstream_v1", "ours")) -> tuple[dict, dict]:
    """Pooled summaries of one pair that a README prints as one table (``(summary, entry)`` pairs from
    ``ResultsFolder.pooled_entry``, each checked by its caller), as that table's cells (variant -> cell key -> cell)
    and ratios (``ratios_key``: ours over upstream V1 unless named); a cell in two of them fails."""
    cells: dict = {v: {} for v in variants}
    ratios: dict = {}
    for summary, entry in pools:
        theirs = summary[ratios_key][pair[0]][pair[1]]
        assert not set(theirs) & set(ratios), sorted(set(theirs) & set(ratios))
        ratios |= theirs
        for variant in variants:
            cells[variant] |= entry["cells"][variant]
    return cells, ratios


def checked_issue41_rows(folder: ResultsFolder, cells: dict, ratios: dict, length: int,
                         concurrencies: tuple[int, ...], rounds: int, title: str = "## Issue 41",
                         per_round_sentence: bool = True,
                         variants: tuple[str, str] = ("upstream_v1", "ours")) -> tuple[list[float], list[float],
                                                                                        list[float]]:
    """A results README's ``title`` section: its greedy table and, after "Sampled:", its sampled one, each row at
    ``length`` tokens and ``concurrencies`` checked against the pooled cells (``pooled_rows_by_round``, ``rounds``
    rounds), and (``per_round_sentence``) the README's "**Per round, greedy:** ... **Sampled:** ..." sentence.
    Returns ours over the baseline (``variants[0]``: upstream V1 unless named, e.g. MRV2) per cell (output tok/s,
    then p99 ITL; greedy cells first) and every round's ratio, in the sentence's order."""
    greedy_text, sampled_text = folder.section(title).split("\nSampled:\n")
    lines, tok, itl = [], [], []
    for sampling, text in (("greedy", greedy_text), ("sampled", sampled_text)):
        rows = {str(c): row for (_, c), row in rows_by_c(text, str(length)).items()}
        assert sorted(rows, key=int) == [str(c) for c in concurrencies], sampling
        by_c, per_round = pooled_rows_by_round(cells, ratios, rows, length, concurrencies, variants, rounds=rounds,
                                               sampling=sampling)
        lines.append(per_round)
        tok += [r["output_tok_s"] for r in by_c.values()]
        itl += [r["p99_itl_ms"] for r in by_c.values()]
    assert not per_round_sentence or f"**Per round, greedy:** {lines[0]}. **Sampled:** {lines[1]}." in folder.folded()
    per_round_ratios = [float(x) for line in lines for x in re.findall(r"\d\.\d{3}", line)]
    assert len(tok) == len(itl) == 2 * len(concurrencies) and len(per_round_ratios) == len(tok) * rounds
    return tok, itl, per_round_ratios


def checked_issue41_targets(folder: ResultsFolder, cells: dict, tok: list[float], itl: list[float], runs: int) -> float:
    """A results README's target sentence for a pooled table of a dummy-weight pair (``checked_issue41_rows``' ratios):
    ours >= 1.00x upstream V1 in every cell and p99 ITL <= 1.25x its, with the ranges it prints; acceptance length
    1.0 in every run of both servers (the draft is never accepted) over ``runs`` timed runs. Returns the shortest
    run's seconds, for the README's "lasted N s or more"."""
    assert min(tok) >= 1.0 and max(itl) <= 1.25
    assert f"every cell ({min(tok):.3f}–{max(tok):.3f}, ratio of the medians)" in folder.folded()
    assert f"in every cell ({min(itl):.3f}–{max(itl):.3f} pooled)" in folder.folded()
    keys = list(cells["ours"])
    lengths = {a for v in cells.values() for k in keys for a in v[k]["spec_decode_acceptance_length"]["all"]}
    durations = [d for v in cells.values() for k in keys for d in v[k]["duration"]["all"]]
    assert lengths == {1.0} and len(durations) == runs, (lengths, len(durations))
    return min(durations)


def checked_issue41_pool(folder: ResultsFolder, pair: tuple[str, str], calls: tuple[str, ...],
                         sessions: list[str], length: int, concurrencies: tuple[int, ...], title: str,
                         below_one: list[float], runs: int) -> dict:
    """A dummy-weight pair's three-round pool of issue 41 on vLLM 0.26.0 (``folder``'s, pooling ``calls`` from the
    results folders ``sessions``), read back: no problem left, the README's ``title`` section
    (``checked_issue41_rows``) with exactly ``below_one`` as its rounds under 1.0, the targets' sentence
    (``checked_issue41_targets``) and the shortest run's. Returns the pooled cells (variant -> cell key -> cell)."""
    summary, entry = folder.pooled_entry(*pair, "0.26.0", calls)
    assert [Path(p).parts[2] for p in entry["sources"]] == sessions
    assert summary["problems"] == [] and entry["rounds"] == 3
    cells, ratios = entry["cells"], summary["ours_over_upstream_v1"][pair[0]][pair[1]]
    tok, itl, rounds = checked_issue41_rows(folder, cells, ratios, length, concurrencies, rounds=3, title=title)
    assert sorted(r for r in rounds if r < 1.0) == below_one
    shortest = checked_issue41_targets(folder, cells, tok, itl, runs=runs)
    assert f"Every timed run lasted {shortest:.1f} s or more" in folder.folded()
    return cells


def checked_counted_row(rows: list[dict], length: int, summary_folder: str) -> list[dict]:
    """The eight cells of a coverage row (``checked_coverage``'s ``rows``) at ``length`` tokens: each counted and
    meeting every target, each counted from one 3-round pooled summary under ``summary_folder``
    (``bench/results/<session>/<benchmark>/``) with no compile after boot. Returns the cells."""
    cells = [c for c in rows if c["cell"].startswith(f"in{length}/")]
    assert len(cells) == 8 and all(c["counted"] and c["meets"] for c in cells), cells
    counted = [m for c in cells for m in c["measurements"] if m["counted"]]
    assert len(counted) == 8 and all(m["rounds"] == 3 and m["compiles_after_boot"] == 0
                                     and m["summary"].startswith(summary_folder) for m in counted), counted
    return cells


def warmup_limits_of(info: dict):
    """The V1 warm-up's ``Limits`` for a server of a serving-bench report (``info``: its variant entry), from what the
    server read back before serving (its sequences, token budget, block size and KV blocks, the warm-up's K and
    batch-agnostic kernels) and its ``--max-model-len``: what a read-back test rebuilds the server's plan from."""
    from portable_spec.vllm_adapter.worker.warmup_plan import Limits

    facts, args = info["facts"][0], info["serve_args"]
    stats = facts["warmup_stats"]
    return Limits(max_reqs=facts["max_num_seqs"], max_tokens=facts["max_num_batched_tokens"],
                  max_len=int(args[args.index("--max-model-len") + 1]), k=stats["k"], dflash=False,
                  block_sizes=(facts["block_size"],), free_blocks=facts["num_gpu_blocks"] - 1,
                  batch_agnostic=frozenset(stats["batch_agnostic"]))


def passed_soak(soak: dict, commit: str, pair: str = "llama_ctx_eagle3") -> dict:
    """Checks a soak report passed on vLLM 0.28.0 at ``commit`` (clean tree) with its three servers (no speculation,
    vLLM's eager drafter, ours) free of mismatches and errors under async scheduling, and every one of ours' checks
    true; returns ours' server entry."""
    assert soak["status"] == "passed" and soak["failures"] == [] and soak["vllm"] == "0.28.0"
    assert soak["commit"].startswith(commit) and soak["tree_changes"] == 0
    servers = soak["pairs"][pair]["servers"]
    assert sorted(servers) == ["eager_drafter", "full_drafter", "nospec"]
    for name, server in servers.items():
        assert server["mismatches"] == 0 and server["errors"] == 0 and server["async_scheduling"] is True, name
    ours = servers["full_drafter"]
    assert ours["checks"] and all(v is True for v in ours["checks"].values()) and ours["failures"] == []
    return ours


def mrv2_pooled_rows(entry: dict, ratios: dict) -> list[str]:
    """The markdown rows a results README gives a pooled MRV2 summary's cells (``mrv2 / ours_mrv2``), one per cell in
    the summary's order: medians of both servers, the ratio of the medians, the paired interval, p99 ITL and TTFT,
    median TPOT and the fewer rounds of the two; fails on a cell either server or the ratios lack."""
    cells, rows = entry["cells"], []
    assert cells["mrv2"] and set(cells["mrv2"]) == set(cells["ours_mrv2"]) == set(ratios), (cells.keys(), ratios)
    for key in cells["mrv2"]:
        up, ours, ratio = cells["mrv2"][key], cells["ours_mrv2"][key], ratios[key]
        paired, (length, c) = ratio["paired_output_tok_s"], (key.split("/")[0][2:], key.split("/c")[-1])

        def both(field: str) -> str:
            return f"{up[field]['median']:.2f} / {ours[field]['median']:.2f}"

        rows.append(f"| {length} | {c} | {up['output_throughput']['median']:.1f} | "
                    f"{ours['output_throughput']['median']:.1f} | {ratio['output_tok_s']:.3f} | "
                    f"{paired['median']:.3f} [{paired['interval'][0]:.3f}, {paired['interval'][1]:.3f}] | "
                    f"{both('p99_itl_ms')} | {both('p99_ttft_ms')} | {both('median_tpot_ms')} | "
                    f"{min(up['runs'], ours['runs'])} |")
    return rows


def first_batches_report(call: Path) -> dict:
    """A first-batches call's report (``first-batches/first_batches.json``, stored compressed)."""
    return load(call / "first-batches" / "first_batches.json")


def wave_pairs(variant: dict) -> dict[int, tuple[float, float]]:
    """Batch size -> (first wave, its repeat) slowest time to the first token, ms, from a first-batches variant."""
    pairs = {int(size): (w["first"]["max_ttft_ms"], w["repeat"]["max_ttft_ms"]) for size, w in variant["waves"].items()}
    assert pairs, "no waves"
    return pairs


def wave_cells(waves: dict[int, tuple[float, float]], bold: set[int] | tuple[int, ...] = ()) -> str:
    """A results README's first-batches row cells, ``first / repeat`` per batch size in increasing order, the sizes
    in ``bold`` (the waves that paused) in bold."""
    return " | ".join(f"**{a} / {b}**" if size in bold else f"{a} / {b}" for size, (a, b) in sorted(waves.items()))
