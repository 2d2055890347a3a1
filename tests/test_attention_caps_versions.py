"""The capability table's claims that moved after vLLM 0.26.0 (``table.CLAIM_CHANGES``), checked against the
installed vLLM's source (FlashInfer's backend does not import without a GPU before 0.33.0, so its module is read, not
imported). In the version span: each vLLM's lane checks the entry ``version_gate.pick`` gives it; the H100 checks the
same claim on the device (``tests/gpu/test_attention_verify.py``)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from portable_spec.attention_caps import HostFacts
from portable_spec.attention_caps.table import CLAIM_CHANGES, TABLE, table_as_of
from portable_spec.vllm_adapter.patch import version_gate

H100 = HostFacts(capability=(9, 0), fa_version=3)
B200 = HostFacts(capability=(10, 0), trtllm_attention=True)
T4 = HostFacts(capability=(7, 5))


def flashinfer_source() -> ast.Module:
    spec = importlib.util.find_spec("vllm")
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent / "v1" / "attention" / "backends" / "flashinfer.py"
    return ast.parse(path.read_text())


def listed_kv_dtypes(tree: ast.Module) -> list[str]:
    """``FlashInferBackend.supported_kv_cache_dtypes``, as written."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "supported_kv_cache_dtypes"):
            return [ast.literal_eval(e) for e in node.value.elts]
    raise AssertionError("FlashInferBackend.supported_kv_cache_dtypes not found: vLLM moved it")


def flashinfer_row(facts: HostFacts, changes: dict) -> tuple[str, ...]:
    row = next(r for r in table_as_of(changes) if r.key == "cuda/FLASHINFER")
    return row.kv_cache_dtypes.resolve(facts)


def test_the_installed_vllms_flashinfer_kv_dtypes_are_what_its_table_entry_declares():
    changes = version_gate.pick(CLAIM_CHANGES)
    tree = flashinfer_source()
    listed = listed_kv_dtypes(tree)
    nvfp4 = {d for d in listed if d.startswith("nvfp4")}
    assert nvfp4, "vLLM's FlashInfer backend lists no NVFP4 KV dtype"
    everywhere = set(flashinfer_row(T4, changes))
    assert everywhere <= set(listed) and not everywhere & nvfp4  # never NVFP4 on an old device
    assert set(flashinfer_row(B200, changes)) - everywhere == nvfp4  # SM100 + trtllm-gen: every variant listed
    functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    fa2_nvfp4 = "_nvfp4_kv_on_fa2" in functions  # vLLM >= 0.33: NVFP4 through the FA2 path on SM80/90/120
    assert (set(flashinfer_row(H100, changes)) - everywhere == {"nvfp4"}) is fa2_nvfp4


def test_each_later_entry_changes_only_rows_and_claims_that_exist():
    keys = {row.key for row in TABLE}
    for version, changes in CLAIM_CHANGES.items():
        version_gate.parse(version)
        assert set(changes) <= keys, version
        table = table_as_of(changes)
        assert [r.key for r in table] == [r.key for r in TABLE]
        assert sum(a != b for a, b in zip(table, TABLE)) == len(changes)
    assert table_as_of({}) == TABLE


@pytest.mark.parametrize("facts,expected", [(H100, ("nvfp4",)), (B200, ("nvfp4", "nvfp4_4over6")), (T4, ())])
def test_a_claim_with_two_host_conditions_resolves_each(facts, expected):
    row = flashinfer_row(facts, CLAIM_CHANGES["0.33.0"])
    assert tuple(d for d in row if d.startswith("nvfp4")) == expected


def test_the_installed_vllms_rocm_attn_mm_prefix_is_what_its_table_entry_declares():
    """Read from the source: the ROCm backend module imports on CPU but this claim is a one-line classmethod."""
    changes = version_gate.pick(CLAIM_CHANGES)
    spec = importlib.util.find_spec("vllm")
    tree = ast.parse((Path(spec.origin).parent / "v1" / "attention" / "backends" / "rocm_attn.py").read_text())
    method = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "supports_mm_prefix")
    returned = [ast.literal_eval(n.value) for n in ast.walk(method) if isinstance(n, ast.Return)]
    row = next(r for r in table_as_of(changes) if r.key == "rocm/ROCM_ATTN")
    assert returned == [row.mm_prefix]
