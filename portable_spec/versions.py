"""Which vLLM is installed, read from its distribution's metadata (nothing here imports vLLM), and the value a
``{version: value}`` mapping states for it.

It sits in the lowest layer because the kernel tables below the adapter state their launches per vLLM version
(``kernels.triton_case``) and must order and resolve them without reaching up into the adapter.
``vllm_adapter.patch.version_gate`` builds the feature verdicts on these and re-exports them.
"""

from __future__ import annotations

import importlib.metadata
import re
from typing import Mapping, TypeVar

T = TypeVar("T")
Version = tuple[int, int, int]


def parse(text: str) -> Version:
    """``"0.33.0"``, ``"0.33.1.dev4+g1234"`` or ``"0.28.0+musa"`` -> ``(0, 33, 1)``: the release numbers only."""
    match = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        raise ValueError(f"not a vLLM version: {text!r}")
    major, minor, micro = match.groups()
    return int(major), int(minor), int(micro or 0)


def installed_text(distribution: str = "vllm") -> str | None:
    """The installed vLLM's (or another distribution's) version string (None where it is not installed)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def installed() -> Version | None:
    text = installed_text()
    return None if text is None else parse(text)


def pick(by_version: Mapping[str, T], version: Version | None = None) -> T:
    """The value of the newest key at or below ``version`` (default: the installed vLLM). Raises below every key."""
    version = installed() if version is None else version
    if version is None:
        raise LookupError("no vLLM installed")
    fitting = [key for key in by_version if parse(key) <= version]
    if not fitting:
        raise LookupError(f"nothing stated for vLLM {'.'.join(map(str, version))} (keys: {', '.join(by_version)})")
    return by_version[max(fitting, key=parse)]
