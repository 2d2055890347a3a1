"""Finding rows in the table by platform and backend, with one-line errors that list the valid choices."""

from __future__ import annotations

from portable_spec.attention_caps.model import BackendCaps
from portable_spec.attention_caps.table import PLATFORMS, TABLE
from portable_spec.errors import PortableSpecError


def check_platform(platform: str) -> str:
    key = platform.strip().lower()
    if key not in PLATFORMS:
        raise PortableSpecError(f"no attention capability rows for platform {platform!r}; "
                                f"valid choices: {', '.join(PLATFORMS)}")
    return key


def rows(platform: str | None = None, backend: str | None = None) -> list[BackendCaps]:
    """Rows filtered by platform and/or backend (vLLM enum name, case-insensitive); unknown names raise."""
    selected = list(TABLE)
    if platform is not None:
        key = check_platform(platform)
        selected = [r for r in selected if r.platform == key]
    if backend is not None:
        name = backend.strip().upper()
        matching = [r for r in selected if r.backend == name]
        if not matching:
            where = f" on {selected[0].platform}" if platform is not None and selected else ""
            known = ", ".join(dict.fromkeys(r.backend for r in selected))
            raise PortableSpecError(f"no attention backend {backend!r}{where}; valid choices: {known}")
        selected = matching
    return selected


def get_row(platform: str, backend: str) -> BackendCaps:
    return rows(platform, backend)[0]
