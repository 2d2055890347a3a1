"""MUSA's kernel substitutes on every vLLM of the span (issue 40 item 1): each is derived from the installed vLLM's
own kernel source with the rewrite counts stated for that version, and binds on that version's sites.

In ``tests/version_span.py``'s list, so the cpu lane runs it against 0.26.0, 0.28.0 and 0.33.0. The bitwise checks
of each substitute against vLLM's kernel live in ``test_mrv2_substitutes.py``, ``test_attention_substitutes.py`` and
``test_kernels.py``, which the lane runs on 0.26.0 only (their children call vLLM 0.26.0's launch functions)."""

from __future__ import annotations

import dataclasses
import importlib

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
                   "gumbel_noised_argmax": ("0.26.0",)}
"""Entries whose object an earlier vLLM of the span lacks (0.33.0's watermark module, 0.28.0's thinking budget,
0.28.0's DFlash2, the Gumbel helper's only binding site): they state no site there."""


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


def test_the_v1_eagle_substitute_reaches_the_launch_on_this_vllm(vllm_platform):
    """vLLM >= 0.33 launches the V1 drafter's next-token kernel through a dispatcher that captured it at import:
    the substitute is bound on the dispatcher too, so the launch runs ours (earlier versions launch the module's)."""
    sub = next(s for s in registry.substitutions_for("musa")
               if s.name == "eagle_prepare_next_token_padded_kernel").at(version_gate.pick)
    utils = importlib.import_module("vllm.v1.spec_decode.utils")
    dispatcher = getattr(utils, "_eagle_prepare_next_token_padded", None)
    try:
        registry.install_substitutions("musa", (sub,), pick=version_gate.pick)
        ours = utils.eagle_prepare_next_token_padded_kernel
        assert ours.fn.__module__ == "portable_spec.kernels.eagle_prepare_next_token"
        if dispatcher is not None:
            assert dispatcher.kernel is ours
    finally:
        registry.uninstall()
    if dispatcher is not None:
        assert dispatcher.kernel is utils.eagle_prepare_next_token_padded_kernel


def test_an_engine_with_fp64_gumbel_keeps_vllms_gumbel_helper_with_one_line(caplog):
    """DFlash2's selector-walk substitute draws the noise unconditionally; with ``use_fp64_gumbel`` that draw is one
    Triton 3.2 rejects on vLLM 0.28.0, also where vLLM's own walk (greedy: its branch skips the draw) compiles. Such
    an engine keeps vLLM's helper, and one line says so; every other entry is bound as before."""
    import logging
    from types import SimpleNamespace

    from portable_spec.vllm_adapter.worker.gpu_worker import engine_substitutes

    every = registry.substitutions_for("musa")
    plain = SimpleNamespace(model_config=SimpleNamespace(use_fp64_gumbel=False))
    fp64 = SimpleNamespace(model_config=SimpleNamespace(use_fp64_gumbel=True))
    with caplog.at_level(logging.INFO, logger="portable_spec"):
        assert engine_substitutes("musa", "musa", plain) == tuple(every)
        assert engine_substitutes("musa", "musa", None) == tuple(every)  # no config: nothing declined
        kept = engine_substitutes("musa", "musa", fp64)
    assert [s.name for s in every if s not in kept] == ["gumbel_noised_argmax"]
    lines = [r.getMessage() for r in caplog.records if "not bound, vLLM's kept" in r.getMessage()]
    assert len(lines) == 1 and "gumbel_noised_argmax" in lines[0] and "use_fp64_gumbel is on" in lines[0], lines
