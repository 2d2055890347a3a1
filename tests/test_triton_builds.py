"""The warm-up's Triton build record (``worker/triton_builds.py``) on real builds: kernels compiled for sm_90 by the
running Triton on this CPU into a fresh cache folder, the way a boot's warm-up builds them (in a child process without
``TRITON_INTERPRET``, which the cpu lane sets: the interpreter's patched language breaks compiling in its process).
With ``PORTABLE_SPEC_LOG_TRITON_KEYS=on`` each build's key parts name which part set two keys apart: a second build of
the same kernel comes from disk with every part equal; another constexpr changes the source hash and not the options;
another warp count changes the options and not the source hash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from portable_spec.envs import TRITON_KEY_LOG_ENV

pytest.importorskip("triton")

CHILD = '''
import json
import triton
import triton.language as tl
from portable_spec.kernels.triton_compile import compile_for_target
from portable_spec.vllm_adapter.worker.triton_builds import counted_triton_builds, keys_line


@triton.jit
def doubled(x, y, n, B: tl.constexpr):
    i = tl.program_id(0) * B + tl.arange(0, B)
    m = i < n
    tl.store(y + i, tl.load(x + i, mask=m) * 2, mask=m)


SIGNATURE = {"x": "*fp32", "y": "*fp32", "n": "i32"}
with counted_triton_builds() as builds:
    compile_for_target(doubled, SIGNATURE, {"B": 64}, {"num_warps": 4})
    compile_for_target(doubled, SIGNATURE, {"B": 64}, {"num_warps": 4})
    compile_for_target(doubled, SIGNATURE, {"B": 128}, {"num_warps": 4})
    compile_for_target(doubled, SIGNATURE, {"B": 64}, {"num_warps": 8})
print(json.dumps({"builds": builds, "line": keys_line(builds)}))
'''


def build_four(tmp_path: Path, keys: str | None) -> tuple[dict, str | None, str]:
    """Four builds in a fresh child process and cache folder (``keys``: ``PORTABLE_SPEC_LOG_TRITON_KEYS``, unset
    where None): the build record, the keys line, and the child's stderr."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "four_builds.py"
    script.write_text(CHILD)
    root = str(Path(__file__).resolve().parents[1])
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", TRITON_KEY_LOG_ENV)}
    env.update(TRITON_CACHE_DIR=str(tmp_path / "triton"),
               PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
    if keys is not None:
        env[TRITON_KEY_LOG_ENV] = keys
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {}, None, proc.stderr
    out = json.loads(lines[-1])
    return out["builds"], out["line"], proc.stderr


def test_each_builds_key_parts_tell_what_set_it_apart(tmp_path):
    builds, line, err = build_four(tmp_path, "on")
    assert builds, err[-3000:]
    assert (builds["compiled"], builds["from_disk"]) == (3, 1) and builds["cache_dir"] == str(tmp_path / "triton")
    first, again, other_block, other_warps = builds["keys"]
    assert [k["name"] for k in builds["keys"]] == ["doubled"] * 4
    assert [k["from_disk"] for k in builds["keys"]] == [False, True, False, False]
    assert all(len(first[part]) == 10 for part in ("key", "source", "options"))
    assert {part: again[part] for part in first if part != "from_disk"} == {
        part: first[part] for part in first if part != "from_disk"}  # read back from disk: every part as built
    assert other_block["source"] != first["source"] and other_block["options"] == first["options"]
    assert other_warps["options"] != first["options"] and other_warps["source"] == first["source"]
    assert len({first["key"], other_block["key"], other_warps["key"]}) == 3
    assert line.startswith("Triton build keys (4") and line.count("doubled ") == 4
    assert f"doubled from disk key {first['key']} source {first['source']} options {first['options']}" in line


def test_keys_are_recorded_only_when_asked(tmp_path):
    builds, line, err = build_four(tmp_path / "unset", None)
    assert builds, err[-3000:]
    assert (builds["compiled"], builds["from_disk"]) == (3, 1)
    assert "keys" not in builds and line is None
    builds, _, err = build_four(tmp_path / "bad", "sometimes")
    assert not builds and "PORTABLE_SPEC_LOG_TRITON_KEYS='sometimes' is not one of on, off" in err
