"""``python -m portable_spec_harness.real_shapes``: build real-shape pairs, list them, print the loader's plugin path.

* ``build --pair NAME --mode dummy|designed --out DIR [--seed N] [--scale real|small]``: writes the pair's folder and
  prints where it is, the ``vllm serve`` arguments per head and the memory plan;
* ``list``: the pairs, their shapes' sources and memory plans;
* ``plugin-env``: the ``export PYTHONPATH=...`` line that lets ``vllm serve`` load designed folders.

``--json`` prints one JSON object; bad input is one line and exit 2 (``{"error": ..., "exit": 2}`` with ``--json``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from typing import Any, NoReturn

from portable_spec.errors import PortableSpecError, UsageError
from portable_spec.output import emit, emit_error


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _parser() -> argparse.ArgumentParser:
    from portable_spec_harness.real_shapes.build import MODES
    from portable_spec_harness.real_shapes.shapes import PAIR_NAMES, SCALES

    parser = _Parser(prog="python -m portable_spec_harness.real_shapes",
                     description="Real-shape target/draft pairs from public numbers (no downloads).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    build = sub.add_parser("build", help="write one pair's folder")
    build.add_argument("--pair", required=True, help=f"one of {', '.join(PAIR_NAMES)}")
    build.add_argument("--mode", required=True, help=f"one of {', '.join(MODES)}")
    build.add_argument("--out", required=True, help="the pair's folder (replaced)")
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--scale", default="real", help=f"one of {', '.join(SCALES)} (small: the tests' scale)")
    sub.add_parser("list", help="the pairs and their memory plans")
    sub.add_parser("plugin-env", help="the PYTHONPATH that registers the designed-weights loader")
    for p in (parser, *sub.choices.values()):
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print one JSON object")
    return parser


def _build(args: argparse.Namespace) -> dict[str, Any]:
    from portable_spec_harness.real_shapes.build import build_pair, load, serve_args

    path = build_pair(args.pair, args.mode, args.out, seed=args.seed, scale=args.scale)
    info = load(path)
    return {"pair": info["pair"], "mode": info["mode"], "path": str(path), "target": info["target"],
            "drafts": info["drafts"], "serve_args": {v: serve_args(path, v) for v in info["drafts"]},
            "expected_acceptance": info["expected_acceptance"], "memory": info["memory"]}


def _list() -> dict[str, Any]:
    from portable_spec_harness.real_shapes.memory import plan
    from portable_spec_harness.real_shapes.shapes import PAIRS

    return {"pairs": {name: {"public": p.public, "method": p.method, "memory": plan(p)} for name, p in PAIRS.items()}}


def _render(payload: dict[str, Any]) -> str:
    if "export" in payload:
        return payload["export"]
    if "pairs" in payload:
        return "\n".join(f"{name:<20} {info['method']:<7} {info['memory']['weights_gib']:>6} GiB  "
                         f"kind {info['memory']['kind']}  ({info['public']})" for name, info in payload["pairs"].items())
    lines = [f"{payload['pair']} ({payload['mode']}) at {payload['path']}"]
    lines += [f"  vllm serve {shlex.join(args)}" for args in payload["serve_args"].values()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    as_json = "--json" in argv
    try:
        args = _parser().parse_args(argv)
        if args.command == "build":
            payload = _build(args)
        elif args.command == "list":
            payload = _list()
        else:
            from portable_spec_harness.real_shapes.plugin import plugin_env

            env = plugin_env()
            payload = {**env, "export": f"export PYTHONPATH={shlex.quote(env['PYTHONPATH'])}"}
    except PortableSpecError as exc:
        return emit_error(str(exc), exc.exit_code, as_json)
    emit(args, payload, _render)
    return 0


if __name__ == "__main__":
    sys.exit(main())
