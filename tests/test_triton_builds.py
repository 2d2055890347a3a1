"""The warm-up's Triton build record (``worker/triton_builds.py``) on real builds: kernels compiled for sm_90 by the
running Triton on this CPU into a fresh cache folder, the way a boot's warm-up builds them. With
``PORTABLE_SPEC_LOG_TRITON_KEYS=on`` each build's key parts name which part set two keys apart: a second build of
the same kernel comes from disk with every part equal; another constexpr changes the source hash and not the options;
another warp count changes the options and not the source hash."""

from __future__ import annotations

import pytest

from portable_spec.envs import TRITON_KEY_LOG_ENV
from portable_spec.kernels.triton_compile import compile_for_target
from portable_spec.vllm_adapter.worker.triton_builds import counted_triton_builds, keys_line

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


def _doubled(x, y, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    tl.store(y + i, tl.load(x + i, mask=m) * 2, mask=m)


doubled = triton.runtime.jit.JITFunction(_doubled)
"""A compiled kernel whatever ``TRITON_INTERPRET`` says (the cpu lane sets it, and ``triton.jit`` would then give an
interpreted function, which has no compile key)."""


SIGNATURE = {"x": "*fp32", "y": "*fp32", "n": "i32"}


@pytest.fixture
def fresh_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    return tmp_path / "triton"


def build_four() -> dict:
    with counted_triton_builds() as builds:
        compile_for_target(doubled, SIGNATURE, {"B": 64}, {"num_warps": 4})
        compile_for_target(doubled, SIGNATURE, {"B": 64}, {"num_warps": 4})
        compile_for_target(doubled, SIGNATURE, {"B": 128}, {"num_warps": 4})
        compile_for_target(doubled, SIGNATURE, {"B": 64}, {"num_warps": 8})
    return builds


def test_each_builds_key_parts_tell_what_set_it_apart(monkeypatch, fresh_cache):
    monkeypatch.setenv(TRITON_KEY_LOG_ENV, "on")
    builds = build_four()
    assert (builds["compiled"], builds["from_disk"]) == (3, 1) and builds["cache_dir"] == str(fresh_cache)
    first, again, other_block, other_warps = builds["keys"]
    assert [k["name"] for k in builds["keys"]] == ["_doubled"] * 4
    assert [k["from_disk"] for k in builds["keys"]] == [False, True, False, False]
    assert all(len(first[part]) == 10 for part in ("key", "source", "options"))
    assert {part: again[part] for part in first if part != "from_disk"} == {
        part: first[part] for part in first if part != "from_disk"}  # read back from disk: every part as built
    assert other_block["source"] != first["source"] and other_block["options"] == first["options"]
    assert other_warps["options"] != first["options"] and other_warps["source"] == first["source"]
    assert len({first["key"], other_block["key"], other_warps["key"]}) == 3
    line = keys_line(builds)
    assert line.startswith("Triton build keys (4") and line.count("_doubled ") == 4
    assert f"_doubled from disk key {first['key']} source {first['source']} options {first['options']}" in line


def test_keys_are_recorded_only_when_asked(monkeypatch, fresh_cache):
    monkeypatch.delenv(TRITON_KEY_LOG_ENV, raising=False)
    builds = build_four()
    assert (builds["compiled"], builds["from_disk"]) == (3, 1)
    assert "keys" not in builds and keys_line(builds) is None
    monkeypatch.setenv(TRITON_KEY_LOG_ENV, "sometimes")
    with pytest.raises(Exception, match="PORTABLE_SPEC_LOG_TRITON_KEYS='sometimes' is not one of on, off"):
        build_four()
