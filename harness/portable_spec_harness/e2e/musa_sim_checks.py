"""Pass/fail of one musa-sim engine part, from its per-(variant, seed) result rows (``child`` results with
``worker_facts`` and a log excerpt). Pure Python, so every check is tested on fabricated rows and must fail on a
mismatch: what the musa-sim lane claims rests on these functions.

A musa-sim variant must show that the MUSA code path ran, from the worker's facts and from the engine log: our
musa-sim platform class, ``MusaWorker``, TRITON_ATTN from the MUSA table for target and draft, every MUSA kernel
substitute bound, drafter graphs captured through the simulated ``torch.musa`` (each capture under inference mode:
the simulation raises otherwise) into the one pool vLLM's graphs use, the live-graph budget planned and kept; and
that it served exactly: greedy output equal to no speculation, per-position acceptance equal to the same pair on our
CUDA platform with the same attention backend (and to the zoo's exact values where known).

Under Model Runner V2 (the ``musa_sim_mrv2*`` parts) the drafter is MRV2's speculator, not ours: the same code-path
checks hold (class, worker, TRITON_ATTN, every substitute bound and logged) plus MRV2's own (``mrv2_checks``): MRV2
ran, its target and speculator managers captured FULL graphs, every one of them (and vLLM's piecewise graphs)
through the simulated ``torch.musa`` (torchada's aliasing of ``torch.cuda``'s graph API simulated: MUSAGraph() and
graph() once per live graph, replays through MUSAGraph) into our port's one pool; the live graphs are what our
budget counted for MRV2, within the limit; per-position acceptance equals MRV2 on vLLM's built-in platform with
TRITON_ATTN.
"""

from __future__ import annotations

from typing import Any

from portable_spec.draft.capture_log import CAPTURE_LOG_PREFIX
from portable_spec.draft.dispatcher import CHAIN_KINDS, FIRST_PASS_KINDS, any_replayed
from portable_spec_harness.e2e import exactness
from portable_spec_harness.e2e.configs import VARIANTS
from portable_spec_harness.e2e.mrv2_checks import captured_graphs, graphs_captured, pools
from portable_spec_harness.e2e.musa_sim_parts import CUDA_TRITON, MusaSimPart
from portable_spec_harness.e2e.parent import no_compile_after_boot
from portable_spec_harness.model_zoo import PAIRS
from portable_spec_harness.musa_sim import LABEL
from portable_spec_harness.musa_sim_plugin import ENTRY_POINT, PLATFORM_QUALNAME
from portable_spec.kernels import substitutions_for
from portable_spec.vllm_adapter.patch import version_gate
from portable_spec.vllm_adapter.platform.selection import PLATFORM_PLUGINS_GROUP

MUSA_WORKER = "portable_spec.vllm_adapter.worker.musa_worker.MusaWorker"
CUDA_PLATFORM = "portable_spec.vllm_adapter.platform.cuda.PortableCudaPlatform"
ATTENTION = "TRITON_ATTN"
PRUNING_WARNING = "exceed the live-graph limit"
PLATFORM_GROUP_LINE = f"Available plugins for group {PLATFORM_PLUGINS_GROUP}"
"""vLLM's plugin loader lists the platform group's plugins at INFO before it activates one (``vllm/plugins``)."""


def musa_substitutes(vllm_version: str | None = None) -> list[str]:
    """The MUSA substitutes ``MusaWorker`` binds on ``vllm_version`` (default: the installed vLLM, the one the
    engines ran): the entries with a binding site there (an entry whose object that vLLM lacks binds and logs
    nothing, e.g. ``_mulhilo32`` before 0.33.0)."""
    version = version_gate.installed() if vllm_version is None else version_gate.parse(vllm_version)
    return sorted(sub.name for sub in substitutions_for("musa")
                  if sub.at(lambda by_version: version_gate.pick(by_version, version)).targets)


def _logged(row: dict[str, Any], *needles: str) -> bool:
    return any(all(n in line for n in needles) for line in row.get("log_excerpt", []))


def platform_plugin_activated(row: dict[str, Any]) -> bool:
    """vLLM activated the musa-sim plugin: its own log line says so wherever vLLM logged the platform group's plugins;
    where it did not (0.33.0 resolves the platform before an in-process engine configures its logging, so both lines
    are dropped), the platform vLLM resolved must be the class only this plugin's probe returns."""
    if _logged(row, PLATFORM_GROUP_LINE):
        return _logged(row, f"Platform plugin {ENTRY_POINT} is activated")
    return row.get("platform") == PLATFORM_QUALNAME


def log_checks(row: dict[str, Any], our_drafter: bool = True) -> dict[str, bool]:
    """The plugin was activated; the engine log names our musa-sim class, MusaWorker, TRITON_ATTN, every bound
    substitute and (with ``our_drafter``: the V1 runner) our drafter's capture line."""
    ours = f"portable_spec[{LABEL}]:"
    checks = {"platform_plugin_activated": platform_plugin_activated(row),
              "log_names_musa_sim_class_and_worker": _logged(row, ours, "MusaWorker on", PLATFORM_QUALNAME),
              "log_names_triton_attn": _logged(row, ours, f"attention backend {ATTENTION} ")}
    if our_drafter:
        checks["log_shows_drafter_capture"] = _logged(row, CAPTURE_LOG_PREFIX, " s, ", "MiB")
    for name in musa_substitutes():
        checks[f"log_names_substitute_{name}"] = _logged(row, ours, f"kernel substitute {name} bound")
    return checks


def size_checks(row: dict[str, Any], part: MusaSimPart) -> dict[str, bool]:
    """The capture sizes the engine ended with (where the part names them), and, for a part whose budget forces
    pruning, the pruning warning in the stored plan and in the engine log."""
    checks = {}
    if part.capture_sizes is not None:
        checks["capture_sizes"] = row.get("capture_sizes") == list(part.capture_sizes)
    if part.pruned:
        checks["sizes_pruned_with_warning"] = (any(PRUNING_WARNING in w for w in row.get("plan_warnings", []))
                                               and _logged(row, PRUNING_WARNING))
    return checks


def graph_checks(row: dict[str, Any], part: MusaSimPart) -> dict[str, bool]:
    """Drafter graphs captured and replayed through the simulated torch.musa, one pool, the live-graph budget."""
    stats, replays = row.get("capture_stats") or {}, row.get("replays") or {}
    sim = row.get("simulation") or {}
    calls = sim.get("calls") or {}
    plan = row.get("capture_plan") or {}
    drafter, limit = row.get("drafter_graphs", 0), plan.get("live_graph_limit")
    if part.pair.endswith("dflash"):
        replayed = {"block_graphs_replayed": replays.get("dflash_block", 0) > 0}
    else:  # a pruned first step leaves the 4-request first pass eager; chain steps must still replay
        replayed = {"chain_graphs_replayed": any_replayed(replays, CHAIN_KINDS)}
        if not part.pruned:
            replayed["first_pass_graphs_replayed"] = any_replayed(replays, FIRST_PASS_KINDS)
    checks = {"drafter_graphs_captured": bool(stats.get("graphs")) and drafter == stats.get("graphs"),
              "no_failed_capture": stats.get("failed") == {},
              **replayed,
              "no_pointer_mismatch": row.get("pointer_mismatches") == 0,
              "drafter_port_is_musa_sim": row.get("drafter_port") == LABEL and sim.get("label") == LABEL,
              # MUSAGraph() then torch.musa.graph() per capture (the simulation refuses one outside inference mode)
              "drafter_captured_through_simulated_musa": drafter > 0 and calls.get("MUSAGraph") == drafter
              and calls.get("graph") == drafter and sim.get("live_graphs") == drafter,
              "one_pool": row.get("one_pool") is True and calls.get("graph_pool_handle") == 1,
              "live_graph_limit_planned": limit == part.live_graph_limit,
              # what the plan counted (vLLM's target and drafter-model graphs, and ours) is what the engine holds
              "live_graphs_counted_exactly": drafter > 0 and row.get("vllm_graphs") is not None
              and plan.get("live_graphs") == row["vllm_graphs"] + drafter,
              "live_graphs_within_limit": limit is not None and row.get("vllm_graphs", limit + 1) + drafter <= limit,
              "drafter_within_runtime_budget": row.get("drafter_live_graph_limit") is not None
              and drafter <= row["drafter_live_graph_limit"]}
    return {**checks, **size_checks(row, part)}


def mrv2_graph_checks(row: dict[str, Any], part: MusaSimPart) -> dict[str, bool]:
    """Model Runner V2's graphs on the MUSA path: captured by every manager, each one a simulated MUSAGraph (so the
    simulated cap saw it), replayed, in our port's one pool, as many as our budget counted, within the limit."""
    sim = row.get("simulation") or {}
    calls = sim.get("calls") or {}
    planned = row.get("mrv2_sizes") or {}
    captured, limit = captured_graphs(row), planned.get("live_graph_limit")
    checks = {**graphs_captured(row, PAIRS[part.pair][1], part.k),
              "torch_cuda_graphs_aliased_to_simulated_musa": sim.get("torch_cuda_aliased") is True,
              "graphs_captured_through_simulated_musa": bool(captured) and calls.get("MUSAGraph") == captured
              and calls.get("graph") == captured and sim.get("live_graphs") == captured,
              "graphs_replayed_through_simulated_musa": (calls.get("MUSAGraph.replay") or 0) > 0,
              "graphs_in_our_one_pool": exactness.every_one_is(pools(row), row.get("port_pool"), "compared_pools",
                                                               "graph pool").ok
              and row.get("one_pool") is True and calls.get("graph_pool_handle") == 1,
              "live_graph_limit_planned": limit == part.live_graph_limit,
              "live_graphs_counted_exactly": bool(captured) and planned.get("live_graphs") == captured,
              "live_graphs_within_limit": limit is not None and captured is not None and captured <= limit
              and sim.get("live_graph_cap") == limit}
    return {**checks, **size_checks(row, part)}


def musa_sim_checks(row: dict[str, Any], part: MusaSimPart) -> dict[str, bool]:
    """One musa-sim row: the MUSA code path ran (facts and log), its graphs kept the MUSA rules, and nothing compiled
    after boot (our warm-ups cover what the part's requests reach)."""
    common = {"platform_is_musa_sim": row.get("platform") == PLATFORM_QUALNAME and row.get("platform_label") == LABEL,
              "worker_is_musa_worker": row.get("worker") == MUSA_WORKER,
              "attention_is_triton_attn": row.get("attention_backends") == [ATTENTION]
              and row.get("draft_attention_backends") == [ATTENTION],
              "substitutes_bound": row.get("substitutes_bound") == musa_substitutes(),
              "no_compile_after_boot": no_compile_after_boot(row)}
    if part.mrv2:
        return {**common, "mrv2_runner": row.get("runner_kind") == "mrv2" and row.get("use_v2_model_runner") is True,
                **log_checks(row, our_drafter=False), **mrv2_graph_checks(row, part)}
    return {**common, "v1_runner": row.get("use_v2_model_runner") is False, **log_checks(row), **graph_checks(row, part)}


def cuda_comparison_checks(row: dict[str, Any], part: MusaSimPart) -> dict[str, bool]:
    """The comparison engine is what it claims, TRITON_ATTN for target and draft: our CUDA platform with our FULL
    drafter (V1 parts), or Model Runner V2 on vLLM's own CUDA platform with its graphs captured (MRV2 parts)."""
    attention = {"attention_is_triton_attn": row.get("attention_backends") == [ATTENTION]
                 and row.get("draft_attention_backends") == [ATTENTION]}
    if part.mrv2:
        return {"platform_is_vllms_cuda": bool(row.get("platform"))
                and not row["platform"].startswith("portable_spec."),
                "mrv2_runner": row.get("runner_kind") == "mrv2" and row.get("use_v2_model_runner") is True,
                **attention, **graphs_captured(row, PAIRS[part.pair][1], part.k)}
    return {"platform_is_our_cuda": row.get("platform") == CUDA_PLATFORM, **attention,
            "drafter_graphs_captured": bool((row.get("capture_stats") or {}).get("graphs")),
            "no_pointer_mismatch": row.get("pointer_mismatches") == 0,
            "no_compile_after_boot": no_compile_after_boot(row)}


def part_checks(part: MusaSimPart, rows: list[dict[str, Any]], continuations: dict[int, list[list[int]]],
                expected_acceptance: list[float] | None) -> dict[str, bool]:
    """Every check of ``part``: ``continuations`` are the zoo's greedy outputs per seed (what no speculation gives),
    ``expected_acceptance`` the zoo's per-position acceptance (None where it depends on the prompts): exact on the
    fixed prompts, the design's bound per count on a context pair's prompts."""
    by = {(r.get("variant"), r.get("seed")): r for r in rows}
    checks: dict[str, bool] = {}
    for seed in part.seeds:
        nospec = by.get(("nospec", seed))
        if nospec is not None and "error" not in nospec:
            checks[f"nospec_s{seed}_equals_zoo_continuation"] = nospec.get("outputs") == continuations[seed]
        reference = "nospec" if nospec is not None else "zoo_continuation"
        for variant in part.variants:
            row = by.get((variant, seed))
            prefix = f"{variant}_s{seed}"
            checks[f"{prefix}_ran"] = row is not None and "error" not in row
            if not checks[f"{prefix}_ran"] or variant == "nospec":
                continue
            base = nospec.get("outputs") if nospec is not None else continuations[seed]
            checks[f"{prefix}_greedy_equals_{reference}"] = row.get("outputs") == base
            if expected_acceptance is not None and part.prompt_set == "context":
                # the context prompts end windows early (max_tokens, max_model_len): the design bounds each count
                checks[f"{prefix}_acceptance_as_zoo_says"] = exactness.acceptance_as_designed(
                    row.get("acceptance_counts"), expected_acceptance, len(row.get("outputs") or ())).ok
            elif expected_acceptance is not None:
                checks[f"{prefix}_acceptance_as_zoo_says"] = row.get("acceptance_per_position") == expected_acceptance
            if VARIANTS[variant].simulated_device:
                checks.update({f"{prefix}_{k}": v for k, v in musa_sim_checks(row, part).items()})
                cuda = by.get((part.reference, seed))
                if cuda is not None:
                    name = "acceptance_equals_builtin_mrv2" if part.mrv2 else "acceptance_equals_cuda_platform"
                    checks[f"{prefix}_{name}"] = exactness.acceptance_counts_equal(
                        row.get("acceptance_counts"), cuda.get("acceptance_counts"), part.reference).ok
                    if part.mrv2:  # the sizes MRV2 was left: vLLM's, as on vLLM's own platform
                        checks[f"{prefix}_capture_sizes_left_to_mrv2"] = exactness.same_list(
                            row.get("capture_sizes"), cuda.get("capture_sizes"), "compared_sizes", "capture sizes",
                            part.reference).ok
            elif variant == part.reference:
                checks.update({f"{prefix}_{k}": v for k, v in cuda_comparison_checks(row, part).items()})
    return checks
