"""One row of the Triton 3.2 check: a kernel, the argument types and constexpr values one launch passes it, and
where it is launched. Apart from the tables (``triton_table.py`` for the V1 path, ``triton_table_mrv2.py`` for Model
Runner V2) so each table can import it without importing the other."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def sig(spec: str) -> dict[str, str]:
    """``"a b:*i32 | c:i32"`` -> ``{"a": "*i32", "b": "*i32", "c": "i32"}`` (groups keep parameter order)."""
    out: dict[str, str] = {}
    for group in spec.split("|"):
        names, _, ty = group.strip().rpartition(":")
        for name in names.split():
            out[name] = ty.strip()
    return out


@dataclass(frozen=True)
class KernelCase:
    """One compile of one kernel: ``ref`` is ``"module:attr"`` of the object the launch site calls."""

    key: str
    ref: str
    signature: dict[str, str]
    constexprs: dict[str, Any]
    launched_at: str
    owner: str = "vllm"
    musa_path: bool = True
    options: dict[str, int] = field(default_factory=dict)

    @property
    def module(self) -> str:
        return self.ref.partition(":")[0]

    @property
    def attr(self) -> str:
        return self.ref.partition(":")[2]
