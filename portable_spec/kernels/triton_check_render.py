"""Text and markdown renderings of the Triton 3.2 check's report (``triton_check.merge``)."""

from __future__ import annotations

from typing import Any


def _cell(v: dict[str, Any]) -> str:
    return v["verdict"] if v["verdict"] == "ok" else f"{v['verdict']} ({', '.join(v['layers'])})"


def _header(report: dict[str, Any]) -> list[str]:
    lines = []
    if report.get("compile"):
        c = report["compile"]
        lines.append(f"compile layer: triton {c['triton']} for {c['target']} ({c['python']})")
    if report.get("compile_amd"):
        c = report["compile_amd"]
        lines.append(f"compile-amd layer: triton {c['triton']} for {c['target']} (linking with {c['lld']})")
    if report.get("static"):
        rules = report["static"]["rules"]
        lines.append(f"static layer: {len(rules)} MUSA rules ({', '.join(rules)})")
    lines.append(f"vLLM {report.get('vllm')}; {report['proxy']}")
    return lines


def render_text(report: dict[str, Any]) -> str:
    rows = report["kernels"]
    width = max(len(r["kernel"]) for r in rows) + 2
    lines = ["Triton 3.2 front-end check", *_header(report), "",
             f"{'kernel':<{width}}{'MUSA path':<11}{'as shipped':<28}with substitutes"]
    for r in rows:
        lines.append(f"{r['kernel']:<{width}}{'yes' if r['musa_path'] else 'no':<11}{_cell(r['as_shipped']):<28}"
                     f"{_cell(r['with_substitutes'])}")
    # vLLM's kernels the MUSA rules reject as shipped are why the substitutes exist: in a green report they are one
    # count, not lines of errors in a passing log (their first errors are in --json and the --out markdown).
    needing = [r for r in rows if r["as_shipped"]["verdict"] != "ok" and r["with_substitutes"]["verdict"] == "ok"]
    if needing:
        lines += ["", f"{len(needing)} kernels pass only with their substitute bound (why each is rejected as "
                      "vLLM ships it: --json, or triton32_check.md with --out)"]
    bad = [r for r in rows if r["with_substitutes"]["verdict"] != "ok"]
    if bad:
        lines += ["", "first errors with substitutes:"]
        for r in bad:
            for layer in r["with_substitutes"]["layers"]:
                lines.append(f"  {r['kernel']} [{layer}]: {r['with_substitutes'][layer]['first_error']}")
    still = [r["kernel"] for r in rows if r["musa_path"] and r["with_substitutes"]["verdict"] != "ok"]
    lines += ["", f"substitutes bound for the second column: {len(report['substitutes_bound'])} binding sites",
              "result: " + ("NOT green: " + ", ".join(still) if still else
                            "green: every kernel on the MUSA path passes every layer with substitutes bound")]
    return "\n".join(lines)


_LAYER_NAMES = {"compile": "NVIDIA sm_90", "compile-amd": "AMD gfx942", "static": "static rules"}


def render_markdown(report: dict[str, Any]) -> str:
    """One row per kernel; per layer (each backend's compile, the static rules) its verdict as vLLM ships the kernel
    and with substitutes bound (``shipped / substituted``)."""
    layers = report.get("layers") or []
    names = [_LAYER_NAMES.get(la, la) for la in layers]
    lines = ["| kernel | launched at | " + " | ".join(f"{n}: shipped / substituted" for n in names)
             + " | first error as shipped | with substitutes |", "|---|---|" + "---|" * len(layers) + "---|---|"]
    for r in report["kernels"]:
        shipped, subbed = r["as_shipped"], r["with_substitutes"]
        first = "; ".join(f"[{la}] {shipped[la]['first_error']}" for la in shipped["layers"]).replace("|", "\\|")
        cells = [f"{shipped[la]['verdict'] if la in shipped else '-'} / {subbed[la]['verdict'] if la in subbed else '-'}"
                 for la in layers]
        lines.append(f"| `{r['kernel']}` | {r['launched_at']} | {' | '.join(cells)} | {first or '-'} | "
                     f"{_cell(subbed)} |")
    return "\n".join(["## Triton 3.2 front-end check", "", *(f"- {ln}" for ln in _header(report)), "", *lines, "",
                      "green (every MUSA-path kernel passes every layer with substitutes bound): "
                      + ("yes" if report["green"] else "no")])
