"""One row of the Triton 3.2 check: a kernel, the argument types and constexpr values one launch passes it, and
where it is launched. Apart from the tables (``triton_table.py`` for the V1 path, ``triton_table_mrv2.py`` for Model
Runner V2) so each table can import it without importing the other.

A row states vLLM 0.26.0's launch (``BASE``), or, for a kernel new in a later vLLM, that vLLM's (``since``); where a
later vLLM of the span launches the kernel differently, the row states what that version changed (``Change``:
parameters added, retyped or gone, constexprs, the kernel's new module), each change once, at the version that made
it. ``KernelCase.at(pick)`` applies the changes up to the installed vLLM (``version_gate.pick`` chooses among the
versions' launches), so the check compiles each kernel with the signature the installed vLLM launches it with; a row
of a kernel the installed vLLM does not have yet resolves to None (``launched`` decides that, for the rows and for the
tables' exclusions alike). ``resolved`` does that for a whole table: the MUSA check's (``triton_table.kernel_cases``) and
the ROCm check's (``triton_table_rocm.rocm_rows``) both take their rows from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from portable_spec.versions import parse

BASE = "0.26.0"
"""The vLLM whose launch a row's own fields state (and whose launch line ``launched_at`` names)."""


def launched(since: str, pick: Callable[[Mapping[str, bool]], bool]) -> bool:
    """Whether the vLLM ``pick`` resolves for launches a kernel first launched in vLLM ``since`` (``BASE`` for the
    kernels 0.26.0 has): a kernel added later is absent below its version, not an error there."""
    return since == BASE or pick({BASE: False, since: True})


def sig(spec: str) -> dict[str, str]:
    """``"a b:*i32 | c:i32"`` -> ``{"a": "*i32", "b": "*i32", "c": "i32"}`` (groups keep parameter order)."""
    out: dict[str, str] = {}
    for group in spec.split("|"):
        names, _, ty = group.strip().rpartition(":")
        for name in names.split():
            out[name] = ty.strip()
    return out


@dataclass(frozen=True)
class Change:
    """What one vLLM version changed in a row's launch, against the version before it: parameters added or retyped
    (a ``sig`` spec), parameters gone, constexpr values added or changed, compile options, and, for a kernel that
    moved, its new ``ref`` and launch site."""

    signature: str = ""
    dropped: tuple[str, ...] = ()
    constexprs: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, int] = field(default_factory=dict)
    ref: str | None = None
    launched_at: str | None = None


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
    changes: Mapping[str, Change] = field(default_factory=dict)  # vLLM version -> what it changed
    since: str = BASE  # the first vLLM that launches the kernel: the version the row's own fields state
    engine: tuple[str, ...] = ()
    """The ``model_config`` flags an engine turns on to launch this row (``("use_fp64_gumbel",)``: only an engine
    served with ``--use-fp64-gumbel``). With substitutes bound, the check binds what such an engine binds: the
    substitutes its configuration declines (``Substitution.kept_when``) stay vLLM's (``engine_config``)."""

    def engine_config(self) -> Any:
        """A stand-in ``vllm_config`` with this row's engine flags on, for ``Substitution.declines``."""
        from types import SimpleNamespace

        return SimpleNamespace(model_config=SimpleNamespace(**{flag: True for flag in self.engine}))

    def at(self, pick: Callable[[Mapping[str, Any]], Any]) -> "KernelCase | None":
        """This row as the installed vLLM launches it: ``since``'s launch with every change up to the version ``pick``
        (``versions.pick``) chooses applied in version order; None where that vLLM predates the kernel."""
        if not launched(self.since, pick):
            return None
        if not self.changes:
            return self
        case = dataclasses.replace(self, changes={})
        launches = {self.since: case}
        for version in sorted(self.changes, key=parse):
            change = self.changes[version]
            signature = {n: t for n, t in case.signature.items() if n not in change.dropped}
            case = dataclasses.replace(
                case, signature={**signature, **sig(change.signature)} if change.signature else signature,
                constexprs={**{n: v for n, v in case.constexprs.items() if n not in change.dropped},
                            **change.constexprs},
                options={**case.options, **change.options}, ref=change.ref or case.ref,
                launched_at=change.launched_at or case.launched_at)
            launches[version] = case
        return pick(launches)

    @property
    def module(self) -> str:
        return self.ref.partition(":")[0]

    @property
    def attr(self) -> str:
        return self.ref.partition(":")[2]


def resolved(rows: Iterable[KernelCase], pick: Callable[[Mapping[str, Any]], Any] | None = None) \
        -> tuple[KernelCase, ...]:
    """``rows`` as the installed vLLM launches them (``KernelCase.at``; ``pick`` defaults to ``versions.pick``, the
    installed vLLM), in order, without the rows of kernels newer than that vLLM."""
    if pick is None:
        from portable_spec.versions import pick
    return tuple(case for case in (row.at(pick) for row in rows) if case is not None)
