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
