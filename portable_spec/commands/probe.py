"""``portable-spec probe``: platform facts; on a device, a capture/replay check into the shared pool; on MUSA, which
stack this interpreter has (vllm-musa and its version, or our standalone class) and what our layer binds on top; on
a platform with kernel substitutions (MUSA), which substitutes bind on this host's vLLM and why each exists."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from portable_spec import envs
from portable_spec.commands._common import INSTALL_VLLM, add_platform_flag, render_mapping
from portable_spec.output import add_json_flag, emit
from portable_spec.errors import PortableSpecError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("probe", help="report platform facts and check graph capture on the live device")
    add_platform_flag(parser)
    add_json_flag(parser)
    parser.add_argument("--verify", action="store_true",
                        help="also run each importable attention backend's kernel against a torch reference and "
                             "mark its declared claims (needs vLLM and the device); exit 1 if a claim is refuted")
    parser.set_defaults(func=run)


_SECTIONS = ("attention_verify", "kernel_substitutions")


def render(report: dict[str, Any]) -> str:
    """Platform facts as ``key: value`` lines, then the kernel-substitution and attention-verify sections."""
    lines = [render_probe({k: v for k, v in report.items() if k not in _SECTIONS})]
    if "kernel_substitutions" in report:
        lines.append(render_substitutions(report["kernel_substitutions"]))
    if "attention_verify" in report:
        from portable_spec.attention_caps.checks import render_verify

        lines.append(render_verify(report["attention_verify"]))
    return "\n".join(lines)


def render_substitutions(section: dict[str, Any]) -> str:
    bound = sum(1 for s in section["substitutions"] if s["bound"])
    lines = [f"kernel substitutions: {bound}/{len(section['substitutions'])} bound (vLLM {section['vllm']}; "
             f"vLLM's kernels are Triton JIT functions: {section['vllm_kernels_are_triton_jit']})"]
    for s in section["substitutions"]:
        state = "bound" if s["bound"] else f"NOT bound: {s['error'] or 'a target does not hold it'}"
        lines += [f"  {s['name']} <- {s['replacement']}: {state}", f"    why: {s['reason']}"]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    # torch comes in with a device only (a graph port's device module, the capture check, --verify): the facts of a
    # port without graphs (cpu), and detection on a host whose torch is no GPU build, read torch's version file alone.
    from portable_spec.kernels import SUBSTITUTIONS, substitutions_for
    from portable_spec.ports import select_platform
    from portable_spec.probe import run_probe

    if args.verify:
        envs.verify_jit_budget_s()  # a bad budget fails in one line now, not after the device work began
    platform = select_platform(args.platform)
    if args.verify and not platform.supports_graphs:
        raise PortableSpecError(f"probe --verify needs a GPU host (platform {platform.name!r} has no device to run "
                                "attention kernels on): run it there, or drop --verify")
    report = run_probe(platform)
    substitutions = SUBSTITUTIONS
    if platform.name == "musa":
        from portable_spec.vllm_adapter.platform.stack_report import stack_report, substitutions_bound_here

        report["stack"] = stack_report()
        substitutions = substitutions_bound_here()
    if [sub for sub in substitutions_for(platform.name) if sub in substitutions]:
        # What the platform's vLLM worker binds before it builds the model (PortableWorker.init_device).
        from portable_spec.vllm_adapter.tools.kernel_report import substitution_report

        report["kernel_substitutions"] = substitution_report(platform.name, substitutions)
    code, message = 0, None
    if args.verify:
        from portable_spec.attention_caps.checks import refutation_exit

        verify = _load_verifier()
        report["attention_verify"] = verify(platform.name)
        code, message = refutation_exit(report["attention_verify"])
    emit(args, report, render)
    if message:
        print(f"portable-spec: {message}", file=sys.stderr)
    return code


def render_probe(report: dict[str, Any]) -> str:
    """``key: value`` lines in which nothing reads ``None``: what was not checked says so, and why."""
    shown = dict(report)
    check = shown.get("graph_check") or {}
    if check.get("ran") is False:
        shown["graph_check"] = f"not run: {check['reason']}"
        if shown.get("pool_shared") is None:
            shown["pool_shared"] = f"not checked: {check['reason']}"
    if shown.get("live_graph_limit") is None:
        shown["live_graph_limit"] = "none (no cap on live graphs)"
    return render_mapping(_no_none(shown))


def _no_none(value: Any) -> Any:
    """A fact the platform could not read (e.g. a runtime version) shows as ``unknown``, not ``None``."""
    if isinstance(value, dict):
        return {k: _no_none(v) for k, v in value.items()}
    return "unknown" if value is None else value


def _load_verifier():
    try:
        from portable_spec.vllm_adapter.tools.attention_verify import verify_attention
    except ImportError as exc:
        raise PortableSpecError(f"probe --verify needs vLLM 0.26.0 ({exc}); install it: {INSTALL_VLLM}") from exc
    return verify_attention
