"""The MUSA substitutes of Model Runner V2's Triton kernels against the installed vLLM's own, on CPU (the cpu lane
runs it on every vLLM of the span: on 0.28.0 ``gumbel_sample`` names its processed-logits output ``logits_cache`` and
the gumbel launch is read from the version-resolved table; on 0.33.0 ``BlockTables`` reads ``block_sizes`` and
per-group switches, its gather nulls sliding-window blocks, the top-k/top-p kernel is launched through a dispatcher
(the substitute is bound there too) and the sampler draws its Gumbel noise from a hash, so ``tl_rand32`` is covered by
the rejection kernel alone and ``tl_rand64`` binds nowhere).

vLLM's real kernels (Triton switched back on in a child process, ``mrv2_substitute_children.py``) run under the
Triton interpreter through vLLM's own launch functions (``apply_penalties``, ``BlockTables.gather_block_tables`` /
``compute_slot_mappings``, the staged write (multi-group and single-group), ``rejection_sample``, ``gumbel_sample``,
``apply_top_k_top_p_triton``, ``compute_topk_scores``): once as vLLM ships them, once with the MUSA table bound through the registry, outputs
compared bit for bit on several shapes. Then again with each substitute deliberately broken: the same comparison
must see the difference, so it is not comparing vLLM with itself. DFlash2's selector walk (vLLM >= 0.28) is
launched directly with its launch's arguments (its launch method differs between 0.28.0 and 0.33.0, the kernel
does not); below 0.28 its child skips with the version's reason. The top-k/top-p substitute and the kernels that
draw through ``tl_rand32`` are also compiled for sm_90 (no GPU needed): their PTX must be vLLM's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from lane_tools import import_triton, require_interpreter

from portable_spec.vllm_adapter.patch import version_gate

import_triton()

CHILDREN = ("penalties_kernel", "block_tables", "staged_writes", "apply_write", "rejection_sample", "gumbel_sample",
            "top_k_top_p", "fill_logprob_token_ids", "watermark_philox", "thinking_budget", "selector_walk")
_COVERS_BEFORE_033 = {  # which child exercises which MUSA substitute (and so must see its mutant)
    "_penalties_kernel": ("penalties_kernel",),
    "_load_ptr": ("block_tables", "staged_writes"),
    "_rejection_kernel": ("rejection_sample",),
    "tl_rand32": ("rejection_sample", "gumbel_sample"),
    "tl_rand64": ("gumbel_sample", "selector_walk"),  # fp64 Gumbel: the sampler's (<= 0.28), DFlash2's int64 keys
    "_topk_topp_kernel": ("top_k_top_p",),
    "_fill_logprob_token_ids_kernel": ("fill_logprob_token_ids",),
    "_apply_write_kernel": ("apply_write",),
    "_mulhilo32": ("watermark_philox",),  # vLLM >= 0.33 only (its watermark module)
    "_update_committed_marker_cache_kernel": ("thinking_budget",),  # vLLM >= 0.28 only
    "gumbel_noised_argmax": ("selector_walk",),  # vLLM >= 0.28 only (DFlash2)
}
COVERS = version_gate.pick({
    "0.26.0": _COVERS_BEFORE_033,
    # 0.33.0's sampler draws its Gumbel noise from a hash (murmur3_uniform32/64), not through tl_rand32/tl_rand64:
    # the gumbel child exercises neither (it still compares, bound, with vLLM's); tl_rand64 binds nowhere there.
    "0.33.0": {**_COVERS_BEFORE_033, "tl_rand32": ("rejection_sample",), "tl_rand64": ()},
})
"""Per installed vLLM: which child exercises which MUSA substitute (and so must see its mutant); an empty tuple is
a substitute this vLLM binds nowhere (its mutant test skips saying so, after checking that it binds nowhere)."""
DRAWS_RAND32 = version_gate.pick({"0.26.0": lambda key: "fp64" not in key,
                                  "0.33.0": lambda key: "_rejection_kernel" in key})
"""The PTX test's launches that draw through ``tl_rand32`` (so its mutant must change their code): every gumbel row
but the fp64 ones, and the rejection kernel; on 0.33.0 only the rejection kernel (the sampler draws from a hash)."""


def _children(*names: str, interpret: bool = True) -> dict:
    """Run the children ``names`` (``NAME``: compared with the substitutes, ``NAME:mutant``: with broken ones) in one
    process: under the Triton interpreter, or (``interpret=False``) with the compiler only, which compiles for a GPU
    target without one."""
    require_interpreter()
    env = {**os.environ, "VLLM_LOGGING_STREAM": "ext://sys.stderr", "VLLM_PLUGINS": "",
           "PYTHONPATH": os.pathsep.join(p for p in (os.path.dirname(os.path.dirname(__file__)),
                                                     os.environ.get("PYTHONPATH", "")) if p)}
    if not interpret:
        env.pop("TRITON_INTERPRET")
    proc = subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "mrv2_substitute_children.py"),
                           *names], capture_output=True, text=True, env=env, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1])


class _Runs(dict):
    """Each child's result (``NAME``: vLLM's kernels against the substitutes; ``NAME:mutant``: against broken
    substitutes). The first test that asks runs, in one process, its child and every child the session's selected
    tests of this module will read (``planned``): one vLLM import (~9 s on the lane's machine) instead of one per
    child, which made this the lane's slowest module, and vLLM's own run of each case once for both comparisons (the
    mutants had a process of their own, which ran vLLM's kernels on the same cases again). A test selected alone
    (``-k apply_write``) still runs only the children it reads."""

    def __init__(self, planned: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.planned = planned

    def __missing__(self, name: str) -> dict:
        names = tuple(dict.fromkeys((name, *(p for p in self.planned if p not in self))))
        ran = _children(*names)
        assert set(ran) == set(names), (names, sorted(ran))
        self.update(ran)
        return self[name]

    def cases(self, name: str) -> dict:
        """The child's cases; a skip where this vLLM has nothing for it to compare."""
        if "skipped" in self[name]:
            pytest.skip(self[name]["skipped"])
        return self[name]["cases"]


CASES_READ = ("rejection_sample", "top_k_top_p", "block_tables", "staged_writes", "apply_write",
              "fill_logprob_token_ids")
"""The children ``test_the_cases_exercise_what_the_substitutes_change`` reads."""


def _planned(request) -> tuple[str, ...]:
    """The results this module's selected tests read, in ``CHILDREN``'s order (a child's mutants after it)."""
    wanted = {name for item in request.session.items if getattr(item, "module", None) is request.module
              for name in _reads(item)}
    return tuple(n for c in CHILDREN for n in (c, f"{c}:mutant") if n in wanted)


def _reads(item) -> tuple[str, ...]:
    if item.originalname == "test_the_substitutes_are_bitwise_vllms_kernels":
        return (item.callspec.params["child"],)
    if item.originalname == "test_a_broken_substitute_is_caught":
        return tuple(f"{c}:mutant" for c in COVERS[item.callspec.params["substitute"]])
    if item.originalname == "test_the_thinking_budget_cases_scan_cold_and_warm_and_force_the_end_marker":
        return ("thinking_budget",)
    if item.originalname == "test_the_selector_walk_cases_compare_elements_and_draw_away_from_the_greedy_walk":
        return ("selector_walk",)
    return CASES_READ if item.originalname == "test_the_cases_exercise_what_the_substitutes_change" else ()


@pytest.fixture(scope="module")
def runs(request) -> dict:
    return _Runs(planned=_planned(request))


def test_substitutes_compile_to_vllms_ptx_on_the_running_triton():
    """Compiled for sm_90 by the running Triton (3.6), the top-k/top-p substitute at its three launches, and gumbel
    sampling and the rejection kernel with ``tl_rand32`` rebound, are vLLM's PTX instruction for instruction: they
    cost no time and compute vLLM's bits. The check bites: the first H100 run's top-k/top-p form (the count cast to
    int32 before dividing) and broken substitutes compile to other code."""
    ptx = _children("ptx_identity", "ptx_identity:mutant", interpret=False)  # vLLM's PTX compiled once for both
    cases = ptx["ptx_identity"]["cases"]
    top = {k: c for k, c in cases.items() if "_topk_topp_kernel" in k}
    rand = {k: c for k, c in cases.items() if "_topk_topp_kernel" not in k}
    from portable_spec.kernels.triton_case import resolved
    from portable_spec.kernels.triton_table_mrv2 import MRV2_KERNELS

    gumbel_rows = [c for c in resolved(MRV2_KERNELS) if c.attr == "_gumbel_sample_kernel"]  # fp64 rows included
    assert len(top) == 3 and len(rand) == len(gumbel_rows) + 1 and len(rand) >= 4, cases  # + the rejection kernel
    assert all(c["equal"] and c["ptx_lines"] > 100 for c in cases.values()), cases
    assert all(c["bound"] >= 20 for c in top.values()) and all(c["bound"] == 2 for c in rand.values()), cases
    assert not any(c["int32_dividend_equal"] for c in top.values()), cases
    mutants = ptx["ptx_identity:mutant"]["cases"]
    assert not all(c["equal"] for k, c in mutants.items() if k in top), mutants
    # The fp64 gumbel rows (--use-fp64-gumbel) draw through tl_rand64, not the tl_rand32 bound here (0.33.0's
    # gumbel rows draw from a hash): a tl_rand32 mutant leaves their code vLLM's, so it must change every other row's.
    rand32 = [k for k in rand if DRAWS_RAND32(k)]
    assert len(rand32) >= version_gate.pick({"0.26.0": 4, "0.33.0": 1}), rand
    assert not any(mutants[k]["equal"] for k in rand32), mutants
    assert all(mutants[k]["equal"] for k in rand if k not in rand32), mutants


@pytest.mark.parametrize("child", CHILDREN)
def test_the_substitutes_are_bitwise_vllms_kernels(runs, child):
    cases = runs.cases(child)
    assert len(cases) >= 3, cases
    assert all(c["equal"] and c["bound"] >= 20 for c in cases.values()), cases


def test_the_cases_exercise_what_the_substitutes_change(runs):
    """Rejection sampling accepts and rejects drafts (greedy, probabilistic, block verification, fair coin flips at
    positions past 2**32); top-k/top-p masks (top-k only, top-p only, both); the block tables are padded and span
    two KV cache groups; the staged write reaches 512 writes (and, single-group, 200 writes of several content blocks
    each); the logprob token ids come from requests' own lists and
    from the top-k columns (none at all included), with padded columns masked."""
    rejection = runs["rejection_sample"]["cases"]
    assert sum(c["accepted"] for c in rejection.values()) > 10 and all(c["rejected_rows"] for c in rejection.values())
    assert {"reqs7_k3_vocab1024_draft_logits_block", "reqs12_k4_vocab1024_block"} <= set(rejection)
    top = runs["top_k_top_p"]["cases"]
    assert all(c["newly_masked"] > 0 for c in top.values()) and {"_k_1", "_p_2"} <= {k[-4:] for k in top}
    assert "reqs11_groups2" in runs["block_tables"]["cases"]
    assert "reqs256_groups2" in runs["staged_writes"]["cases"]  # the GPU test's largest launch
    assert "writes200_float32" in runs["apply_write"]["cases"]
    logprob = runs["fill_logprob_token_ids"]["cases"]  # custom rows and top-k rows, padded columns
    assert all(c["valid"] > 0 and c["masked"] > 0 for c in logprob.values()), logprob
    assert any("_topk0_" in k for k in logprob) and any("-0" in k for k in logprob), logprob
    coin_flips = rejection["coin_flips_pos_past_2**32"]  # every acceptance decided by a draw past 2**32
    assert coin_flips["accepted"] > 5 and coin_flips["rejected_rows"] > 5, coin_flips


def test_the_thinking_budget_cases_scan_cold_and_warm_and_force_the_end_marker(runs):
    """vLLM >= 0.28: the marker scan runs from an empty cache and from a cached position, finds markers, and budgets
    run out (the forcing kernel writes the end marker's logit) while others do not."""
    cases = runs.cases("thinking_budget")
    assert all(c["forced"] > 0 and c["found"] > 0 and c["not_forced"] > 0 for c in cases.values()), cases


def test_the_selector_walk_cases_compare_elements_and_draw_away_from_the_greedy_walk(runs):
    """vLLM >= 0.28: DFlash2's selector walk (greedy; probabilistic with some requests at temperature 0; fp32 and fp64
    Gumbel) compares elements in every case, and each probabilistic walk draws tokens the greedy walk does not (the
    helper's noise branch is exercised, not only its temperature-0 path)."""
    cases = runs.cases("selector_walk")
    assert all(c["compared"] > 0 for c in cases.values()), cases
    probabilistic = [c for name, c in cases.items() if "probabilistic" in name]
    assert len(probabilistic) == 3 and all(c["noise_moved"] > 0 for c in probabilistic), cases
    assert any(name.endswith("_greedy") for name in cases) and any(name.endswith("_fp64") for name in cases), cases


@pytest.mark.parametrize("substitute", sorted(COVERS))
def test_a_broken_substitute_is_caught(runs, substitute):
    """Each child with the substitutes it covers broken reports at least one case that differs from vLLM; a
    substitute this vLLM binds nowhere skips saying so (checked: its entry resolves to no site here)."""
    if not COVERS[substitute]:
        from portable_spec.kernels.registry import substitutions_for

        sub = next(s for s in substitutions_for("musa") if s.name == substitute).at(version_gate.pick)
        assert not sub.targets, (substitute, sub.targets)
        pytest.skip(f"{substitute} binds nowhere on vLLM {version_gate.installed_text()}: nothing to break")
    for child in COVERS[substitute]:
        cases = runs.cases(f"{child}:mutant")
        assert not all(c["equal"] for c in cases.values()), (substitute, child, cases)


def test_every_musa_substitute_of_model_runner_v2_is_covered():
    from portable_spec.kernels.registry import substitutions_for

    mrv2 = {s.name for s in substitutions_for("musa")
            if any(t.startswith(("vllm.v1.worker.gpu.", "vllm.v1.sample.ops."))
                   for t in (*s.targets, *(t for ts in (s.targets_by_version or {}).values() for t in ts)))}
    assert mrv2 == set(COVERS)
