"""Pass/fail of one Model Runner V2 part (``ci/gpu/mrv2_e2e.py``, issue 23), from its per-(variant, seed) rows. Pure
Python: every check is tested on fabricated rows (``tests/test_mrv2_checks.py``), each fails on missing or empty
input and the exactness ones count what they compared (``exactness``).

What a part must show, for MRV2 on our CUDA platform (``ours_platform_mrv2``) beside MRV2 on vLLM's
(``builtin_mrv2``):
- both ran Model Runner V2 (the runner class the worker built, and vLLM's config), with FULL graphs captured by the
  target's manager and by every speculator manager;
- exact: greedy output = no speculation; on the context pairs, = the construction and acceptance as designed; on
  perfect heads, every position at 100%; ours' acceptance counts = vLLM's platform's, position by position;
- ours is ours: our platform class and worker; every graph MRV2 captured, and every manager's pool, is our port's one
  pool (and vLLM's piecewise wrappers use it too);
- capture sizes left to MRV2 (the decision in ``vllm_adapter/platform/mrv2_sizes.py``): ours ended with vLLM's
  platform's sizes, and the engine log says why in exactly one line; the graphs MRV2 captured are the number our
  live-graph budget counts for them (``capture_sizes.mrv2``), which is what makes the budget safe on MUSA.
"""

from __future__ import annotations

from typing import Any

from portable_spec_harness.e2e import exactness
from portable_spec_harness.e2e.configs import BUILTIN_MRV2, OURS_PLATFORM_MRV2
from portable_spec_harness.e2e.exactness import Verdict
from portable_spec_harness.e2e.parent import no_compile_after_boot
from portable_spec_harness.e2e.v1_checks import Judgement
from portable_spec.vllm_adapter.platform.mrv2_sizes import LEFT_TO_MRV2

PORTABLE_WORKER = "portable_spec.vllm_adapter.worker.gpu_worker.PortableWorker"
MRV2_RUNNERS = (BUILTIN_MRV2, OURS_PLATFORM_MRV2)


GRAPHED_STANDALONE = "portable_spec.vllm_adapter.spec_decode.standalone_ar.GraphedStandaloneARSpeculator"
VLLM_STANDALONE = "vllm.v1.worker.gpu.spec_decode.standalone_ar.speculator.StandaloneARSpeculator"
REPLAY_FACTS = {"prefill": ("speculator_prefill_replays", "speculator_eager_prefills"),
                "decode": ("speculator_replays", "speculator_eager_loops")}
"""Per graphed step of our standalone speculator, the facts holding its replays per size and its eager passes
(``vllm_door/mrv2_graphs.py``)."""


def speculator_managers(method: str, k: int, ours: bool = True) -> tuple[str, ...]:
    """The speculator graph managers MRV2 captures with (vLLM 0.26.0): DFlash's query block; EAGLE-style first pass
    and, for K > 1, decode step. The standalone draft model (vLLM 0.33.0): none on vLLM's platform; on ours (our
    GraphedStandaloneARSpeculator) step 0 and, for K > 1, the decode step."""
    if method == "dflash":
        return ("draft_query",)
    if method == "draft_model":
        return (("draft_prefill", "draft_decode") if k > 1 else ("draft_prefill",)) if ours else ()
    return ("draft_prefill", "draft_decode") if k > 1 else ("draft_prefill",)


def _usable(row: dict[str, Any] | None) -> dict[str, Any] | None:
    return row if row is not None and "error" not in row else None


def graphs_captured(row: dict[str, Any], method: str, k: int, ours: bool = True) -> dict[str, bool]:
    """FULL graphs captured by the target's manager and by each speculator manager (0 graphs fails)."""
    managers = row.get("mrv2_managers") or {}
    return {f"{name}_graphs_captured": bool((managers.get(name) or {}).get("full_sizes"))
            for name in ("target", *speculator_managers(method, k, ours))}


def standalone_speculator(row: dict[str, Any], ours: bool, k: int) -> dict[str, bool]:
    """For the standalone draft model: MRV2 built our graphed speculator on our platform, vLLM's on its own."""
    want = GRAPHED_STANDALONE if ours else VLLM_STANDALONE
    return {"standalone_speculator_class": row.get("speculator") == want}


def standalone_replays(row: dict[str, Any], step: str = "decode") -> Verdict:
    """Our graphed standalone speculator replayed its ``step`` graphs (``prefill``: step 0; ``decode``: steps
    1..K-1) during the runs (``compared_replays``: the replays summed over sizes); none counted, or no counter at all,
    fails: a speculator that captured graphs and ran every step eagerly would pass every output check."""
    replays = row.get(REPLAY_FACTS[step][0])
    if not isinstance(replays, dict):
        return Verdict(False, 0, "compared_replays", f"no {step} replay counter in the facts")
    total = sum(int(n) for n in replays.values())
    detail = "" if total else f"no {step} graph replayed ({row.get(REPLAY_FACTS[step][1])} eager passes)"
    return Verdict(total > 0, total, "compared_replays", detail)


def pools(row: dict[str, Any]) -> list[Any]:
    """Every pool MRV2 used, as recorded: vLLM's platform pool, each manager's, each captured graph's."""
    managers = (row.get("mrv2_managers") or {}).values()
    return ([row.get("platform_pool")] + [m.get("pool") for m in managers]
            + [p for m in managers for p in m.get("graph_pools") or []])


def captured_graphs(row: dict[str, Any]) -> int | None:
    """Live graphs the engine holds: MRV2's FULL graphs plus vLLM's piecewise ones (None when not reported)."""
    full, piecewise = row.get("mrv2_full_graphs"), row.get("vllm_graphs")
    return None if full is None or piecewise is None else full + piecewise


def left_lines(row: dict[str, Any]) -> int:
    return sum(LEFT_TO_MRV2 in line for line in row.get("log_excerpt") or [])


def ours_checks(judged: Judgement, ours: dict[str, Any], builtin: dict[str, Any] | None, prefix: str) -> None:
    checks = judged.checks
    checks[prefix + "our_platform"] = (ours.get("platform") or "").startswith("portable_spec.")
    checks[prefix + "our_worker"] = ours.get("worker") == PORTABLE_WORKER
    judged.record(prefix + "graphs_in_our_one_pool", exactness.every_one_is(
        pools(ours), ours.get("port_pool"), "compared_pools", "graph pool"))
    checks[prefix + "piecewise_wrappers_in_the_pool"] = ours.get("one_pool") is True
    judged.record(prefix + "capture_sizes_left_to_mrv2", exactness.same_list(
        ours.get("capture_sizes"), (builtin or {}).get("capture_sizes"), "compared_sizes", "capture sizes",
        "builtin MRV2"))
    checks[prefix + "one_line_says_why"] = left_lines(ours) == 1
    # jit_judge's verdict: vLLM's JIT monitor armed and nothing compiled after boot (our MRV2 warm-ups cover it)
    checks[prefix + "no_compile_after_boot"] = no_compile_after_boot(ours)
    sizes = ours.get("mrv2_sizes") or {}
    if sizes.get("counted") is False:  # a vLLM whose managers the count does not mirror (version_gate): no count
        judged.evidence[prefix + "live_graphs_counted_exactly"] = {"not_applicable": "no count on this vLLM"}
        return
    planned, captured = sizes.get("live_graphs"), captured_graphs(ours)
    checks[prefix + "live_graphs_counted_exactly"] = bool(captured) and planned == captured
    judged.evidence[prefix + "live_graphs_counted_exactly"] = {"planned": planned, "captured": captured}


def judge(results: list[dict], seeds: list[int], *, method: str, k: int, perfect: bool,
          design: dict[str, Any] | None = None) -> Judgement:
    """Every check of one MRV2 part. ``design`` (the context pairs): per seed the designed greedy ``outputs`` and
    the designed per-position ``acceptance``."""
    by = {(r["variant"], r.get("seed")): r for r in results}
    asked = {r["variant"] for r in results}
    judged = Judgement()
    for seed in seeds:
        nospec = _usable(by.get(("nospec", seed)))
        if design is not None and "nospec" in asked:
            judged.record(f"nospec_s{seed}_" + exactness.DESIGN_GREEDY, exactness.greedy_equals_design(
                (nospec or {}).get("outputs"), design["outputs"].get(seed)))
        rows = {name: by.get((name, seed)) for name in MRV2_RUNNERS}
        for name, row in rows.items():
            prefix = f"{name}_s{seed}_"
            judged.checks[prefix + "ran"] = row is not None and "error" not in row
            if not judged.checks[prefix + "ran"]:
                continue
            judged.checks[prefix + "mrv2_runner"] = (row.get("runner_kind") == "mrv2"
                                                     and row.get("use_v2_model_runner") is True)
            on_ours = name == OURS_PLATFORM_MRV2
            judged.checks.update({prefix + n: ok for n, ok in graphs_captured(row, method, k, on_ours).items()})
            if method == "draft_model":
                judged.checks.update({prefix + n: ok for n, ok in standalone_speculator(row, on_ours, k).items()})
                if on_ours:
                    judged.record(prefix + "draft_prefill_graphs_replayed", standalone_replays(row, "prefill"))
                if on_ours and k > 1:
                    judged.record(prefix + "draft_decode_graphs_replayed", standalone_replays(row, "decode"))
            if "nospec" in asked:
                judged.record(prefix + exactness.GREEDY, exactness.greedy_equals_nospec(
                    row.get("outputs"), (nospec or {}).get("outputs")))
            if design is not None:
                judged.record(prefix + exactness.DESIGN_GREEDY, exactness.greedy_equals_design(
                    row.get("outputs"), design["outputs"].get(seed)))
                judged.record(prefix + exactness.DESIGN_ACCEPTANCE, exactness.acceptance_as_designed(
                    row.get("acceptance_counts"), design["acceptance"], len(row.get("outputs") or ())))
            if perfect:
                judged.record(prefix + exactness.EVERY_POSITION,
                              exactness.every_position_accepted(row.get("acceptance_per_position")))
        ours, builtin = _usable(rows[OURS_PLATFORM_MRV2]), _usable(rows[BUILTIN_MRV2])
        if ours is not None:
            prefix = f"{OURS_PLATFORM_MRV2}_s{seed}_"
            ours_checks(judged, ours, builtin, prefix)
            judged.record(prefix + "acceptance_counts_equal_builtin_mrv2", exactness.acceptance_counts_equal(
                ours.get("acceptance_counts"), (builtin or {}).get("acceptance_counts"), "builtin MRV2"))
    if not judged.checks:  # no seed: an empty judgement would read as all checks passed
        judged.checks["anything_judged"] = False
    return judged
