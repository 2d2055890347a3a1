"""Counts of each ``vllm-<version>/triton32_check.json`` in this folder, as ``summary.json``: what the README's session
20 table states, read from the check's own report (nothing typed in by hand). A row counts as "not checked" when a
layer's first error is the table's ("no type or value for parameter" or "cannot load"); the rows new in vLLM 0.28.0
(``since``) are listed with their verdicts. Run: ``python summarize.py`` in this folder."""

import json
import pathlib

from portable_spec.kernels.triton_table import VLLM_KERNELS

NEW = {c.key for c in VLLM_KERNELS if c.since != "0.26.0"}
TABLE_ERRORS = ("no type or value for parameter", "cannot load")


def counts(report: dict) -> dict:
    rows = report["kernels"]

    def unchecked(r: dict) -> bool:
        return any(any(e in (r[side][la].get("first_error") or "") for e in TABLE_ERRORS)
                   for side in ("as_shipped", "with_substitutes") for la in report["layers"])

    shipped = [r["kernel"] for r in rows if r["as_shipped"]["verdict"] != "ok"]
    return {"vllm": report["vllm"], "green": report["green"], "compiles_in_table": len(rows),
            "compiles_checked": sum(not unchecked(r) for r in rows), "rejected_as_shipped": shipped,
            "accepted_with_substitutes": [k for k in shipped if k not in report["rejected_with_substitutes"]],
            "rejected_with_substitutes": report["rejected_with_substitutes"],
            "sites_bound": len(report["substitutes_bound"]),
            "new_rows": {r["kernel"]: {"as_shipped": r["as_shipped"]["verdict"],
                                       "with_substitutes": r["with_substitutes"]["verdict"],
                                       "first_error": r["as_shipped"]["first_error"]}
                         for r in rows if r["kernel"] in NEW}}


if __name__ == "__main__":
    here = pathlib.Path(__file__).parent
    found = {p.parent.name.removeprefix("vllm-"): counts(json.load(open(p)))
             for p in sorted(here.glob("vllm-*/triton32_check.json"))}
    assert found, "no vllm-*/triton32_check.json here"
    (here / "summary.json").write_text(json.dumps(found, indent=1) + "\n")
    print(json.dumps({v: {k: (len(x) if isinstance(x, (list, dict)) else x) for k, x in c.items()}
                      for v, c in found.items()}))
