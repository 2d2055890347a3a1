"""The GPU-host probe's judge (``ci/gpu/triton_folder_probe.py``): it passes the fix only where the loading process
read both probed kernels from disk in the folder the compiling process built them in, and it fails on every way a
report can fall short of that (each injected below). The probe itself needs a GPU; its judge reads a report alone."""

from __future__ import annotations

import copy

import pytest
from ci_scripts import load_ci_script


@pytest.fixture(scope="module")
def probe():
    return load_ci_script("ci/gpu/triton_folder_probe.py")


def build(name: str, from_disk: bool, folder: str) -> dict:
    return {"name": name, "from_disk": from_disk, "key": f"{name}-key", "folder": folder}


def run(role: str, *builds: dict, rc: int = 0) -> dict:
    return {"role": role, "scope": "", "rc": rc, "child": {"builds": list(builds)}}


DEFAULT, INDUCTORS = "home/.triton/cache", "inductor/triton/0"


def report_as_expected() -> dict:
    """The outcome the fix predicts: ``unset`` loses ``k2`` to inductor's folder, ``named`` keeps both together
    (inductor's own kernel among the builds, as on the host)."""
    return {"scopes": {
        "unset": [run("compiling", build("k1", False, DEFAULT), build("triton_poi_fused_cos", False, INDUCTORS),
                      build("k2", False, INDUCTORS)),
                  run("loading", build("k1", True, DEFAULT), build("k2", False, DEFAULT))],
        "named": [run("compiling", build("k1", False, DEFAULT), build("triton_poi_fused_cos", False, DEFAULT),
                      build("k2", False, DEFAULT)),
                  run("loading", build("k1", True, DEFAULT), build("k2", True, DEFAULT))]}}


def test_the_expected_report_passes_and_names_the_unset_scopes_miss(probe):
    judged = probe.verdict(report_as_expected())
    assert judged["named_finds_both_on_disk"] is True
    assert judged["unset_loading_compiled"] == ["k2"]
    assert judged["compared"] == 8 and judged["problems"] == []


def named(report: dict, role: str) -> dict:
    return next(r for r in report["scopes"]["named"] if r["role"] == role)


def compiled_again(report):
    named(report, "loading")["child"]["builds"][1]["from_disk"] = False


def loaded_from_another_folder(report):
    for b in named(report, "loading")["child"]["builds"]:
        b["folder"] = INDUCTORS


def built_in_two_folders(report):
    named(report, "compiling")["child"]["builds"][2]["folder"] = INDUCTORS


def compiling_found_it_on_disk(report):  # a folder that was not empty: the probe proves nothing
    named(report, "compiling")["child"]["builds"][0]["from_disk"] = True


def loading_failed(report):
    named(report, "loading")["rc"] = 1


def loading_missing(report):
    report["scopes"]["named"] = [named(report, "compiling")]


def k2_never_built(report):
    named(report, "loading")["child"]["builds"].pop()


def no_builds_at_all(report):
    for runs in report["scopes"].values():
        for r in runs:
            r["child"]["builds"] = []


@pytest.mark.parametrize("inject", [compiled_again, loaded_from_another_folder, built_in_two_folders,
                                    compiling_found_it_on_disk, loading_failed, loading_missing, k2_never_built,
                                    no_builds_at_all])
def test_each_way_short_of_the_fix_fails_the_verdict(probe, inject):
    report = copy.deepcopy(report_as_expected())
    inject(report)
    judged = probe.verdict(report)
    assert judged["named_finds_both_on_disk"] is False, inject.__name__


def test_no_builds_compares_nothing_and_leaves_the_unset_scope_unjudged(probe):
    report = report_as_expected()
    no_builds_at_all(report)
    judged = probe.verdict(report)
    assert judged["compared"] == 0 and judged["unset_loading_compiled"] is None and len(judged["problems"]) == 2


def test_an_unset_scope_that_kept_both_says_so(probe):
    report = report_as_expected()
    report["scopes"]["unset"][1]["child"]["builds"][1]["from_disk"] = True
    assert probe.verdict(report)["unset_loading_compiled"] == []


# ---- the serving phase: a launcher the warm-up built, looked up after it (serving_verdict) ---------------------------
def serving_run(role: str, c_builds: list, rc: int = 0, launches: int = 1) -> dict:
    return {"role": role, "scope": "", "rc": rc,
            "child": {"builds": [], "serving_launches": launches, "serving_c_builds": c_builds}}


def serving_report_as_expected() -> dict:
    """What the fix predicts: the compiling process of the scopes that put the variable back builds the sibling's
    launcher again in inductor's folder while serving; ``named`` builds none, nor does any loading process."""
    return {"scopes": {
        "unset": [serving_run("compiling", [INDUCTORS]), serving_run("loading", [])],
        "restored": [serving_run("compiling", [INDUCTORS]), serving_run("loading", [])],
        "named": [serving_run("compiling", []), serving_run("loading", [])]}}


def test_the_expected_serving_report_passes_and_counts_each_process(probe):
    judged = probe.serving_verdict(serving_report_as_expected())
    assert judged["named_serves_without_c_builds"] is True and judged["compared"] == 6
    assert judged["c_builds_while_serving"] == {"unset/compiling": 1, "unset/loading": 0, "restored/compiling": 1,
                                                "restored/loading": 0, "named/compiling": 0, "named/loading": 0}


def serving(report: dict, scope: str, role: str) -> dict:
    return next(r for r in report["scopes"][scope] if r["role"] == role)


def named_rebuilt_it(report):  # the bug: the variable put back after the warm-ups
    serving(report, "named", "compiling")["child"]["serving_c_builds"] = [INDUCTORS]


def no_serving_launch(report):
    serving(report, "named", "loading")["child"]["serving_launches"] = 0


def named_failed(report):
    serving(report, "named", "compiling")["rc"] = 1


def named_missing(report):
    report["scopes"]["named"] = [serving(report, "named", "loading")]


def control_saw_no_build(report):  # a probe that cannot see a C build proves nothing
    serving(report, "restored", "compiling")["child"]["serving_c_builds"] = []


def old_report_without_serving(report):  # a session-43 report: no serving phase
    for runs in report["scopes"].values():
        for r in runs:
            del r["child"]["serving_c_builds"]


@pytest.mark.parametrize("inject", [named_rebuilt_it, no_serving_launch, named_failed, named_missing,
                                    control_saw_no_build, old_report_without_serving])
def test_each_way_short_of_the_serving_fix_fails(probe, inject):
    report = serving_report_as_expected()
    inject(report)
    assert probe.serving_verdict(report)["named_serves_without_c_builds"] is False, inject.__name__
