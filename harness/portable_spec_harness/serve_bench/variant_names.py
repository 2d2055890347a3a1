"""A serving variant's name: its kind (a key of ``plan.VARIANTS``) with at most one scheduling suffix after ``@``
(``ours@async``). Its own module, importing nothing, so that the judge of "no compile after boot"
(``portable_spec_harness.jit_judge``), which the e2e drivers import too, can read a name's kind without importing
``plan`` (whose rotation comes from the e2e package)."""

from __future__ import annotations

SUFFIX_SEPARATOR = "@"


def kind_of(variant: str) -> str:
    """What a bench variant's server runs, a key of ``plan.VARIANTS`` (``ours@async`` -> ``ours``)."""
    return variant.partition(SUFFIX_SEPARATOR)[0]


def suffix_of(variant: str) -> str:
    """A bench variant's scheduling suffix (``ours@async`` -> ``async``), empty when it has none."""
    return variant.partition(SUFFIX_SEPARATOR)[2]
