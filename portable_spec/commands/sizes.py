"""``portable-spec sizes``: the capture sizes a speculative-decoding deployment needs, target and drafter.

Pure planning: it reads the platform CLASS's ``live_graph_limit`` and never constructs the platform, so
``--platform musa`` works on a host without torch_musa.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

from portable_spec.capture_sizes import METHODS, plan_capture_sizes
from portable_spec.commands._common import add_platform_flag
from portable_spec.output import add_json_flag, emit
from portable_spec.errors import PortableSpecError
from portable_spec.ports import platform_class, requested_platform_name


def _int_or_text(text: str) -> int | str:
    """An int where the text is one; otherwise the text, so the planner's one-line error names the flag to fix."""
    try:
        return int(text)
    except ValueError:
        return text


def _size_list(text: str) -> list[int | str]:
    return [_int_or_text(part) for part in text.replace(",", " ").split()]


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("sizes", help="plan graph capture sizes for the target verify pass and the drafter")
    parser.add_argument("--method", required=True, metavar="M", help=f"one of {', '.join(METHODS)}")
    parser.add_argument("--num-spec", required=True, type=_int_or_text, metavar="K", help="num_speculative_tokens")
    parser.add_argument("--max-num-seqs", required=True, type=_int_or_text, metavar="N", help="vLLM max_num_seqs")
    parser.add_argument("--max-capture-size", type=_int_or_text, metavar="S",
                        help="max capture size (default: vLLM's min(N * (1+K) * 2, 512))")
    parser.add_argument("--tp", type=_int_or_text, default=1, metavar="T", help="tensor-parallel size (default 1)")
    parser.add_argument("--sp", action="store_true", help="sequence parallelism is enabled")
    parser.add_argument("--sizes", type=_size_list, metavar="LIST",
                        help="user capture sizes, comma-separated (default: vLLM's ladder)")
    parser.add_argument("--graphs-per-size", type=_int_or_text, default=1, metavar="G",
                        help="live graphs per target size (1 for FULL; pieces (+1 FULL) for PIECEWISE targets)")
    parser.add_argument("--live-graph-limit", type=_int_or_text, metavar="L",
                        help="override the platform's live-graph budget")
    parser.add_argument("--allow-eager-draft", action="store_true",
                        help="when no FULL draft graph fits, warn and plan without one instead of failing")
    add_platform_flag(parser)
    add_json_flag(parser)
    parser.set_defaults(func=run)


def _live_graph_limit(args: argparse.Namespace) -> tuple[str, int | None]:
    name, source = requested_platform_name(args.platform)
    port = platform_class(name, source=source)
    # The flag wins, and then the platform's own limit (an environment setting) is not read at all.
    limit = port.live_graph_limit if args.live_graph_limit is None else args.live_graph_limit
    return name, limit


def run(args: argparse.Namespace) -> int:
    platform_name, limit = _live_graph_limit(args)
    # Warnings are part of the output (text and JSON); keep the logger from echoing them a second time on stderr.
    logger = logging.getLogger("portable_spec.capture_sizes")
    if not logger.hasHandlers():
        logger.addHandler(logging.NullHandler())
    try:
        plan = plan_capture_sizes(
            args.method, args.num_spec, args.max_num_seqs, max_capture_size=args.max_capture_size, tp=args.tp,
            sp=args.sp, live_graph_limit=limit, user_sizes=args.sizes, graphs_per_target_size=args.graphs_per_size,
            require_full_draft=not args.allow_eager_draft, require_within_limit=True)
    except ValueError as exc:
        raise PortableSpecError(str(exc)) from None
    emit(args, {**plan.to_dict(), "platform": platform_name}, render_plan)
    return 0


def _sizes_text(sizes: list[int]) -> str:
    return " ".join(str(s) for s in sizes) if sizes else "-"


def render_plan(payload: dict[str, Any]) -> str:
    """A readable table: one row per list, then the live-graph count and any warnings."""
    p = payload
    head = (f"method={p['method']} K={p['num_spec']} max_num_seqs={p['max_num_seqs']} "
            f"max_capture_size={p['max_capture_size']} tp={p['tp']} sp={'on' if p['sp'] else 'off'} "
            f"platform={p['platform']}")
    rows = [("target verify", 1 + p["num_spec"], "(target)", p["target_sizes"])]
    rows.append(("draft first step", p["first_step"]["query_len"], p["first_step"]["mode"], p["first_step"]["sizes"]))
    if p["chain_step"] is not None:
        rows.append(("draft chain step", p["chain_step"]["query_len"], p["chain_step"]["mode"],
                     p["chain_step"]["sizes"]))
    table = [("list", "query_len", "mode", "count", "sizes (num_tokens)")]
    table += [(name, str(q), mode, str(len(sizes)), _sizes_text(sizes)) for name, q, mode, sizes in rows]
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    lines = [head, ""]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row[:4], widths)) + "  " + row[4] for row in table]
    limit = "none" if p["live_graph_limit"] is None else str(p["live_graph_limit"])
    lines += ["", f"live graphs: {p['live_graphs']} (limit {limit}; {p['graphs_per_target_size']} per target size)"]
    lines += [f"warning: {w}" for w in p["warnings"]]
    return "\n".join(lines)
