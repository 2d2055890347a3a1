"""``portable-spec kernels``: the kernel substitutions a platform binds over vLLM's; (``--check-triton``) the
Triton 3.2 front-end check of every Triton kernel on the MUSA serving path, as vLLM ships it and with them bound;
and (``--check-triton --target T``) every Triton kernel of the ROCm path compiled for AMD targets with the installed
Triton."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from portable_spec.commands._common import check_out_dir, ensure_out_dir, platform_flag
from portable_spec.output import add_json_flag, emit
from portable_spec.errors import PortableSpecError
from portable_spec.ports import env_platform_name


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("kernels", help="kernel substitutions per platform; --check-triton: the Triton 3.2 check")
    parser.add_argument("--platform", metavar="P", type=platform_flag,
                        help="whose substitutions to list (default: $VLLM_PLATFORM, else musa, the platform whose "
                             "Triton needs them)")
    parser.add_argument("--check-triton", action="store_true",
                        help="compile every MUSA-path Triton kernel with triton 3.2.0 for an NVIDIA (sm_90) and an "
                             "AMD (gfx942; needs ld.lld: apt-get install lld, or TRITON_HIP_LLD_PATH) target and "
                             "apply the MUSA rules, without and with substitutes; exit 1 unless every MUSA-path "
                             "kernel passes all three with them")
    parser.add_argument("--triton32-python", metavar="PATH",
                        help="interpreter of the triton==3.2.0 virtualenv (default: $PORTABLE_SPEC_TRITON32_PYTHON)")
    parser.add_argument("--only", action="append", metavar="KERNEL", help="check only this table row (repeatable)")
    parser.add_argument("--cases", action="append", default=[], metavar="MODULE:ATTR",
                        help="also check the kernel rows of this table (repeatable; the cpu lane adds the harness's "
                             "synthetic kernels, portable_spec_harness.synthetic.triton_cases:SYNTHETIC_KERNELS)")
    parser.add_argument("--target", action="append", default=[], metavar="T",
                        help="with --check-triton: compile every ROCm-path kernel for T (hip:gfx942, hip:gfx90a, "
                             "cuda:90; repeatable) with the installed Triton instead; exit 1 if one fails on a "
                             "target ROCm serves")
    parser.add_argument("--out", metavar="DIR", help="also write the report as JSON and markdown into DIR "
                                                     "(triton32_check.*, or rocm_compile.* with --target)")
    add_json_flag(parser)
    parser.set_defaults(func=run)


def _listing(platform: str) -> dict[str, Any]:
    from portable_spec.kernels import substitutions_for

    return {"platform": platform.strip().lower(), "substitutions": [
        {"name": s.name, "replacement": s.describe_replacement(), "targets": list(s.targets), "reason": s.reason}
        for s in substitutions_for(platform)]}


def _render_listing(payload: dict[str, Any]) -> str:
    lines = [f"kernel substitutions on {payload['platform']}: {len(payload['substitutions'])}"]
    for s in payload["substitutions"]:
        lines += ["", f"{s['name']} <- {s['replacement']}", f"  why: {s['reason']}"]
        lines += [f"  bound at: {t}" for t in s["targets"]]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if not args.check_triton:
        if args.only or args.out or args.triton32_python or args.cases or args.target:
            raise PortableSpecError("--only, --out, --cases, --target and --triton32-python go with --check-triton")
        # The platform the user serves on (--platform, then VLLM_PLATFORM); musa only when neither names one.
        emit(args, _listing(args.platform or env_platform_name() or "musa"), _render_listing)
        return 0
    if args.out:
        check_out_dir(args.out)  # before minutes of compiling, not after: the report is written at the end
    if args.target:
        return _run_rocm(args)
    from portable_spec.kernels.triton_check import run_check, triton32_python
    from portable_spec.kernels.triton_check_render import render_markdown, render_text

    # The serving path's kernels, plus any table named by --cases (the worker imports it by name).
    report = run_check(triton32_python(args.triton32_python), only=args.only, case_sources=tuple(args.cases))
    _write(args.out, "triton32_check", report, render_markdown)
    emit(args, report, render_text)
    if not report["green"]:
        print(f"portable-spec: still rejected with substitutes bound: {', '.join(report['rejected_with_substitutes'])}",
              file=sys.stderr)
        return 1
    return 0


def _write(out: str | None, name: str, report: dict[str, Any], markdown: Any) -> None:
    if out:
        ensure_out_dir(out)
        with open(os.path.join(out, f"{name}.json"), "w") as fh:
            json.dump(report, fh, indent=1)
        with open(os.path.join(out, f"{name}.md"), "w") as fh:
            fh.write(markdown(report) + "\n")


def _run_rocm(args: argparse.Namespace) -> int:
    """The AMD compile check (``triton_rocm_check``): the installed Triton, no 3.2 virtualenv, no substitutes."""
    if args.triton32_python or args.cases:
        raise PortableSpecError("--triton32-python and --cases go with the Triton 3.2 check; drop them with --target")
    from portable_spec.kernels.triton_rocm_check import render_markdown, render_text, run_rocm_check

    report = run_rocm_check(args.target, only=args.only)
    _write(args.out, "rocm_compile", report, render_markdown)
    emit(args, report, render_text)
    if not report["green"]:
        why = (f"failed on a target ROCm serves: {', '.join(report['failed_served'])}" if report["failed_served"]
               else "no compile on a target ROCm serves; add --target hip:gfx942 or hip:gfx90a")
        print(f"portable-spec: {why}", file=sys.stderr)
        return 1
    return 0
