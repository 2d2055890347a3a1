"""MUSA's kernel substitutes on every vLLM of the span (issue 40 item 1): each is derived from the installed vLLM's
own kernel source with the rewrite counts stated for that version, and binds on that version's sites.

In ``tests/version_span.py``'s list, so the cpu lane runs it against 0.26.0, 0.28.0 and 0.33.0. The bitwise checks
of each substitute against vLLM's kernel live in ``test_mrv2_substitutes.py``, ``test_attention_substitutes.py`` and
``test_kernels.py``, which the lane runs on 0.26.0 only (their children call vLLM 0.26.0's launch functions)."""

from __future__ import annotations

import dataclasses
import importlib
import os

import pytest
from lane_tools import import_triton

import_triton()

from portable_spec.kernels import registry  # noqa: E402
from portable_spec.kernels.derive import DerivationError  # noqa: E402
from portable_spec.vllm_adapter.patch import version_gate  # noqa: E402

SPAN = [version_gate.parse(v) for v in version_gate.SPAN]


def _current(target: str):
    module, attr = target.rsplit(".", 1)
    return getattr(registry._owner(module), attr)


NOTHING_TO_BIND = {"_mulhilo32": ("0.26.0", "0.28.0"), "_update_committed_marker_cache_kernel": ("0.26.0",),
                   "gumbel_noised_argmax": ("0.26.0",), "tl_rand64": ("0.33.0",)}
"""Entries whose object a vLLM of the span lacks (0.33.0's watermark module, 0.28.0's thinking budget, 0.28.0's
DFlash2, the Gumbel helper's only binding site; 0.33.0 draws fp64 Gumbel noise from a hash, with no ``tl_rand64``):
they state no site there."""


def test_every_musa_substitute_states_its_counts_and_sites_for_every_version_of_the_span():
    for sub in registry.substitutions_for("musa"):
        for version in SPAN:
            at = sub.at(lambda by_version, v=version: version_gate.pick(by_version, v))
            text = ".".join(map(str, version))
            assert not at.by_version, (sub.name, version)
            assert bool(at.targets) != (text in NOTHING_TO_BIND.get(sub.name, ())), (sub.name, version)
            # 0 states that this version has no such place (the derivation checks that too)
            assert all(isinstance(n, int) and n >= 0 for _, n in at.rewrites), (sub.name, version)
            assert any(n > 0 for _, n in at.rewrites) or not at.rewrites, (sub.name, version)


def test_a_substitute_stated_per_version_refuses_to_bind_without_the_gates_pick():
    versioned = [s for s in registry.substitutions_for("musa") if s.by_version]
    assert versioned
    with pytest.raises(registry.PortableSpecError, match="per vLLM version"):
        registry.install_substitutions("musa", tuple(versioned))
    assert registry.installed() == []


def test_every_musa_substitute_binds_on_this_vllm(vllm_platform):
    """Every MUSA entry derives from this vLLM's kernel (each rewrite changing exactly this version's count) and holds
    every one of this version's sites; uninstalling puts vLLM's objects back."""
    subs = [s.at(version_gate.pick) for s in registry.substitutions_for("musa")]
    targets = [t for s in subs for t in s.targets]
    originals = {t: _current(t) for t in targets}
    try:
        assert registry.install_substitutions("musa", pick=version_gate.pick) == targets
        for sub in (s for s in subs if s.targets):
            objs = {id(_current(t)) for t in sub.targets}
            assert len(objs) == 1 and all(_current(t) is not originals[t] for t in sub.targets), sub.name
    finally:
        registry.uninstall()
    assert all(_current(t) is originals[t] for t in targets)


def test_the_musa_sim_checks_expect_exactly_what_binds_on_each_vllm(vllm_platform):
    """The musa-sim lane's ``substitutes_bound`` and per-substitute log checks expect the entries that bind on the
    vLLM the engines ran, not every entry of the table: on 0.28.0 ``_mulhilo32`` has no site, so a worker reports
    (and logs) 16 of the 17, and a check expecting 17 failed every musa-sim row there."""
    from portable_spec_harness.e2e.musa_sim_checks import musa_substitutes

    try:
        registry.install_substitutions("musa", pick=version_gate.pick)
        bound = sorted({sub.name for sub in registry.bound().values()})
    finally:
        registry.uninstall()
    assert bound and musa_substitutes() == bound
    every = sorted(s.name for s in registry.substitutions_for("musa"))
    for version in version_gate.SPAN:
        assert musa_substitutes(version) == [n for n in every if version not in NOTHING_TO_BIND.get(n, ())], version
    assert musa_substitutes("0.28.0") != musa_substitutes("0.33.0")  # the comparison can tell the versions apart


@pytest.mark.parametrize("name", [s.name for s in registry.substitutions_for("musa") if s.rewrites])
def test_a_rewrite_count_off_by_one_fails_loudly_on_this_vllm(vllm_platform, name):
    """The counts bite: the installed version's count plus one (what a stale count from another version looks like)
    fails the derivation with one line naming the kernel, and binds nothing."""
    sub = next(s for s in registry.substitutions_for("musa") if s.name == name).at(version_gate.pick)
    if not sub.targets:
        pytest.skip(f"{name} binds nothing on vLLM {version_gate.installed_text()}")
    rewrite, count = sub.rewrites[0]
    broken = dataclasses.replace(sub, name=f"{name}:off-by-one", rewrites=((rewrite, count + 1), *sub.rewrites[1:]))
    with pytest.raises(DerivationError, match=f"{rewrite} changed {count} place.*expected {count + 1}"):
        registry.install_substitutions("musa", (broken,), pick=version_gate.pick)
    assert registry.installed() == []


@pytest.mark.parametrize("name, module, dispatcher_name", [
    ("eagle_prepare_next_token_padded_kernel", "vllm.v1.spec_decode.utils", "_eagle_prepare_next_token_padded"),
    ("_topk_topp_kernel", "vllm.v1.sample.ops.topk_topp_triton", "_topk_topp"),
])
def test_a_substitute_launched_through_a_dispatcher_reaches_the_launch_on_this_vllm(vllm_platform, name, module,
                                                                                     dispatcher_name):
    """vLLM >= 0.33 launches the V1 drafter's next-token kernel and the top-k/top-p kernel through dispatchers that
    captured them at import: the substitute is bound on the dispatcher too, so the launch runs ours (earlier versions
    launch the module's)."""
    sub = next(s for s in registry.substitutions_for("musa") if s.name == name).at(version_gate.pick)
    owner = importlib.import_module(module)
    dispatcher = getattr(owner, dispatcher_name, None)
    try:
        registry.install_substitutions("musa", (sub,), pick=version_gate.pick)
        ours = getattr(owner, name)
        assert ours.fn.__module__.startswith("portable_spec.")
        if dispatcher is not None:
            assert dispatcher.kernel is ours
    finally:
        registry.uninstall()
    if dispatcher is not None:
        assert dispatcher.kernel is getattr(owner, name)


def test_an_engine_with_fp64_gumbel_binds_every_substitute_and_a_declining_entry_is_left_with_one_line(
        caplog, monkeypatch):
    """``--use-fp64-gumbel`` (``model_config.use_fp64_gumbel``) changes nothing that is bound: DFlash2's selector-walk
    substitute draws the noise unconditionally, and with ``tl_rand64`` bound that fp64 draw compiles on Triton 3.2
    (the Triton 3.2 check's ``_selector_walk_kernel[fp64]`` rows). An entry whose ``kept_when`` flag an engine turns
    on is left vLLM's, with one line saying why; every other entry is bound as before."""
    import dataclasses
    import logging
    from types import SimpleNamespace

    from portable_spec.vllm_adapter.worker import gpu_worker
    from portable_spec.vllm_adapter.worker.gpu_worker import engine_substitutes

    every = registry.substitutions_for("musa")
    plain = SimpleNamespace(model_config=SimpleNamespace(use_fp64_gumbel=False))
    fp64 = SimpleNamespace(model_config=SimpleNamespace(use_fp64_gumbel=True))
    assert engine_substitutes("musa", "musa", plain) == tuple(every)
    assert engine_substitutes("musa", "musa", None) == tuple(every)  # no config: nothing declined
    assert engine_substitutes("musa", "musa", fp64) == tuple(every)
    assert {"tl_rand64", "gumbel_noised_argmax"} <= {s.name for s in every}
    declining = [dataclasses.replace(s, kept_when=(("use_fp64_gumbel", "a test's reason"),))
                 if s.name == "gumbel_noised_argmax" else s for s in every]
    monkeypatch.setattr(gpu_worker, "substitutions_for", lambda port: declining)
    with caplog.at_level(logging.INFO, logger="portable_spec"):
        kept = engine_substitutes("musa", "musa", fp64)
    assert engine_substitutes("musa", "musa", plain) == tuple(declining)
    assert [s.name for s in declining if s not in kept] == ["gumbel_noised_argmax"]
    lines = [r.getMessage() for r in caplog.records if "not bound, vLLM's kept" in r.getMessage()]
    assert len(lines) == 1 and "gumbel_noised_argmax" in lines[0] and "use_fp64_gumbel is on" in lines[0], lines


_WALK = "mrv2/spec_decode.dflash2.speculator._selector_walk_kernel[fp64]"
_RESAMPLE = "mrv2/spec_decode.rejection_sampler_utils._resample_kernel"
FP64_NEEDS = {
    "0.26.0": {},
    "0.28.0": {_WALK: ("compile", "Cannot bitcast data-type of size 64", "tl_rand64")},
    "0.33.0": {_WALK: ("compile-amd", "does not dominate this use", "gumbel_noised_argmax"),
               **{f"{_RESAMPLE}[{key}]": ("compile", "has no attribute 'mul'", "_mulhilo32")
                  for key in ("greedy-draft-fp64", "draft-logits-fp64", "block-verification-fp64", "watermark-fp64")}},
}
"""The fp64 rows Triton 3.2 rejects as vLLM ships them on each version: the layer, a piece of its first error, and
the substitute that makes the row compile (0.28.0: DFlash2's walk keys its fp64 draw with int64 candidate ids,
``tl_rand64``'s two 32-bit words; 0.33.0: the walk's Gumbel helper, and the resample's watermark Philox)."""


def test_the_fp64_gumbel_rows_pass_the_triton_3_2_check_on_this_vllm(tmp_path):
    """``--use-fp64-gumbel`` on the MUSA path: every row an engine with it launches (``KernelCase.engine``: the V1
    recovered-token sampler, MRV2's Gumbel sampler, resample and DFlash2's walk at ``USE_FP64``) passes both
    backends of the Triton 3.2 check with the substitutes such an engine binds, on this vLLM (a 3.2 virtualenv that
    sees it). Removing ``tl_rand64`` from the table fails it on 0.28.0."""
    import json
    import subprocess
    import sys

    from lane_tools import triton32_python_for_this_vllm

    from portable_spec.kernels.triton_check import ENV_VAR
    from portable_spec.kernels.triton_table import kernel_cases

    rows = [c.key for c in kernel_cases() if c.engine == ("use_fp64_gumbel",)]
    # 0.28.0: DFlash2's walk, x2; 0.33.0: the watermarked resample
    assert len(rows) == version_gate.pick({"0.26.0": 8, "0.28.0": 10, "0.33.0": 11}), rows
    only = [arg for key in rows for arg in ("--only", key)]
    env = {**os.environ, ENV_VAR: triton32_python_for_this_vllm()}
    proc = subprocess.run([sys.executable, "-m", "portable_spec", "kernels", "--check-triton", "--json", "--out",
                           str(tmp_path), *only], capture_output=True, text=True, env=env, timeout=900)
    report = json.loads(proc.stdout) if proc.stdout.startswith("{") else None
    assert report is not None, proc.stderr[-3000:]
    assert report["vllm"] == version_gate.installed_text() and report["layers"] == ["compile", "compile-amd", "static"]
    checked = {r["kernel"]: r for r in report["kernels"]}
    assert sorted(checked) == sorted(rows)
    assert report["green"] and proc.returncode == 0, report["rejected_with_substitutes"]
    needs = version_gate.pick(FP64_NEEDS)
    assert {k for k, r in checked.items() if r["as_shipped"]["verdict"] != "ok"} == set(needs)
    for key, (layer, piece, substitute) in needs.items():
        assert piece in (checked[key]["as_shipped"][layer]["first_error"] or ""), (key, checked[key]["as_shipped"])
        assert any(t.endswith(f".{substitute}") for t in report["substitutes_bound"]), substitute

