"""``portable-spec census``: every place our layer changes what vLLM does (the census,
``vllm_adapter/patch/manifest.py``), and with ``--platform`` what one platform gets that the others do not: the
entries specific to it, then the kernel substitutes it binds. "Where does MUSA differ from CUDA?" is
``portable-spec census --platform musa``."""

from __future__ import annotations

import argparse
from typing import Any

from portable_spec.errors import UsageError
from portable_spec.output import add_json_flag, emit


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("census", help="every place portable_spec changes vLLM; --platform P: what P gets that "
                                           "the other platforms do not")
    parser.add_argument("--platform", metavar="P", help="cuda, rocm or musa: the entries specific to P first, then "
                                                        "the kernel substitutes P binds")
    add_json_flag(parser)
    parser.set_defaults(func=run)


def _entry(d: Any) -> dict[str, Any]:
    return {"name": d.name, "kind": d.kind, "ours": d.ours, "platforms": list(d.platforms), "what": d.what,
            "why": d.why, "undone": d.undone, "requires": d.requires or None, "needs": d.needs or None}


def census_payload(platform: str | None) -> dict[str, Any]:
    from portable_spec.kernels import substitutions_for
    from portable_spec.vllm_adapter.patch.manifest import CENSUS, PLATFORMS

    if platform is None:
        return {"platform": None, "entries": [_entry(d) for d in CENSUS]}
    name = platform.strip().lower()
    if name not in PLATFORMS:
        raise UsageError(f"--platform {platform!r}: the census knows {', '.join(PLATFORMS)}; pass one of them")
    applies = [d for d in CENSUS if name in d.platforms]
    return {"platform": name,
            "specific": [_entry(d) for d in applies if set(d.platforms) != set(PLATFORMS)],
            "shared": [d.name for d in applies if set(d.platforms) == set(PLATFORMS)],
            "kernel_substitutes": [{"name": s.name, "reason": s.reason} for s in substitutions_for(name)],
            "port": f"portable_spec/ports/{name}_port.py"}


def render(payload: dict[str, Any]) -> str:
    if payload["platform"] is None:
        lines = [f"census: {len(payload['entries'])} places portable_spec changes vLLM"]
        for e in payload["entries"]:
            lines += [f"- {e['name']} [{e['kind']}; {', '.join(e['platforms'])}]", f"    {e['ours']}"]
        return "\n".join(lines)
    name = payload["platform"]
    lines = [f"where {name} differs: {len(payload['specific'])} census entries, "
             f"{len(payload['kernel_substitutes'])} kernel substitutes; port {payload['port']}"]
    for e in payload["specific"]:
        lines += [f"- {e['name']} [{e['kind']}; {', '.join(e['platforms'])}]", f"    {e['ours']}",
                  f"    what: {e['what']}"]
    lines += [f"kernel substitute: {s['name']}" for s in payload["kernel_substitutes"]]
    lines.append(f"shared with every platform: {len(payload['shared'])} entries ({'; '.join(payload['shared'])})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    emit(args, census_payload(args.platform), render)
    return 0
