"""The top-k/top-p substitute as the first H100 run had it, kept to compare with (``tests/test_mrv2_substitutes.py``
shows the PTX check tells it apart; ``bench/results/2026-11-25-triton32-check-mrv2-fix/`` measures it):
``flip-integer-ternary`` and each uint32 count cast to int32 before its division by an int constant (vllm-musa's
form; the rewrite was called ``int32-unsigned-division``), derived from vLLM's kernel with a rewrite registered
here. Imports neither vLLM nor Triton (the caller passes vLLM's kernel)."""

from __future__ import annotations

import ast


def int32_dividend(func: ast.FunctionDef) -> int:
    """``(n + T - 1) // T`` -> ``((n + T - 1)).to(tl.int32) // T`` on each uint32 count ``n``; returns the count."""
    from portable_spec.kernels.derive_rewrites import divides_unsigned_by_signed, unsigned_names

    unsigned, changed = unsigned_names(func), 0
    for node in ast.walk(func):
        if divides_unsigned_by_signed(node, unsigned):
            node.left = ast.parse(f"({ast.unparse(node.left)}).to(tl.int32)", mode="eval").body
            changed += 1
    return changed


def first_run_kernel(shipped):
    """vLLM's ``_topk_topp_kernel`` in the first run's substitute form."""
    from portable_spec.kernels.derive import derive
    from portable_spec.kernels.derive_rewrites import REWRITES

    REWRITES["int32-dividend"] = int32_dividend
    return derive(shipped, {"flip-integer-ternary": 1, "int32-dividend": 4})
