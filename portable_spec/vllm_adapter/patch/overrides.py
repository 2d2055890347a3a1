"""Narrowly scoped, reversible attribute overrides: the only way portable_spec changes vLLM's behaviour.

No installed vLLM file is ever edited. Each override names the exact module attribute it swaps, checks that the
attribute exists (so a vLLM upgrade that moves it fails loudly instead of silently doing nothing), and restores the
original on exit, also when the body raises.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator


class HookPointMissing(RuntimeError):
    """A vLLM attribute we hook is gone: vLLM moved it; portable_spec must be updated for this vLLM version."""


@contextlib.contextmanager
def overridden(owner: Any, name: str, value: Any) -> Iterator[Any]:
    """Temporarily set ``owner.name = value``; yields the original."""
    if not hasattr(owner, name):
        raise HookPointMissing(f"{getattr(owner, '__name__', owner)!r} has no attribute {name!r}; portable_spec "
                               "checks vLLM 0.26.0, 0.28.0 and 0.33.0 (patch/version_gate.py) — pin vllm==0.26.0")
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield original
    finally:
        setattr(owner, name, original)
