"""``python -m portable_spec_harness.serve_bench.finalize DIR --environment-from REPORT``: the report of a call that
was killed before it could write one, assembled from the record it left (``serve_bench.partial.json``, rewritten
after every timed run).

Why: a device call has a hard time limit. A benchmark stopped by SIGTERM writes its own report, but one killed
outright (the call's limit passed while a run was still going) leaves only the partial record, and with it every
timed run that finished: whole ``vllm bench serve`` runs, each as good as in a finished call. This keeps them:

* a run whose cell and round did not run on every variant is dropped (it pairs with nothing, and a median over one
  variant's extra round would not be the other's), and listed in ``finalized.dropped_unpaired_runs``;
* ``rounds_done`` counts the rounds every cell ran on every variant; the shortfall stays a problem, so ``combine``
  pools the kept rounds and says which cells still lack one;
* the JIT judge reads the server logs the folder holds (copied when the call was packed, so a compile after that is
  not seen: the report says the logs end where the call did);
* the host facts (versions, device, commit) the partial record lacks come from ``REPORT``, a finished call of the same
  lease, and the report names it (``finalized.environment_from``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from portable_spec.errors import PortableSpecError
from portable_spec.output import emit_error
from portable_spec_harness.serve_bench import driver, report
from portable_spec_harness.serve_bench.combine import load
from portable_spec_harness.serve_bench.plan import cell_of, workload_cells
from portable_spec_harness.soak.report import ENVIRONMENT_KEYS

PARTIAL = "serve_bench.partial.json"


def variants_of(record: dict[str, Any]) -> list[str]:
    """The variants the call ran, in its asked order (skipped ones left out)."""
    skipped = record.get("skipped_variants") or {}
    return [v for v in record["settings"]["variants"] if v not in skipped]


def paired_runs(record: dict[str, Any], variants: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(kept, dropped): a run is kept where its cell and round ran on every variant."""
    workload = record["workload"]
    seen: dict[tuple[int, str], set[str]] = {}
    for run in record["runs"]:
        seen.setdefault((run["round"], cell_of(run, workload).key), set()).add(run["variant"])
    whole = {key for key, ran in seen.items() if ran >= set(variants)}
    kept = [run for run in record["runs"] if (run["round"], cell_of(run, workload).key) in whole]
    return kept, [run for run in record["runs"] if run not in kept]


def whole_rounds(record: dict[str, Any], runs: list[dict[str, Any]], variants: list[str]) -> int:
    """Rounds in which every cell ran on every variant."""
    cells = {c.key for c in workload_cells(record["workload"])}
    ran: dict[int, set[tuple[str, str]]] = {}
    for run in runs:
        ran.setdefault(run["round"], set()).add((cell_of(run, record["workload"]).key, run["variant"]))
    return sum(1 for pairs in ran.values() if pairs >= {(c, v) for c in cells for v in variants})


def finalize(folder: Path, environment_from: Path) -> dict[str, Any]:
    if (folder / "serve_bench.json").exists():
        raise PortableSpecError(f"{folder} already holds serve_bench.json: the call finished; nothing to assemble")
    try:
        record = json.loads((folder / PARTIAL).read_text())
    except (OSError, ValueError):
        raise PortableSpecError(f"{folder / PARTIAL} is missing or not JSON: pass the folder of a killed serve "
                                "bench call") from None
    finished = load(environment_from)
    if finished.get("kind") != record.get("kind") or not finished.get("vllm"):
        raise PortableSpecError(f"{environment_from} is no finished serve bench report: pass one call of the same "
                                "lease that wrote serve_bench.json")
    variants = variants_of(record)
    kept, dropped = paired_runs(record, variants)
    if not kept:
        raise PortableSpecError(f"{folder / PARTIAL} holds no cell that ran on every variant: nothing to keep")
    record["runs"] = kept
    record["rounds_done"] = whole_rounds(record, kept, variants)
    record["stopped_because"] = ("killed at the call's time limit; report assembled afterwards from "
                                 f"{PARTIAL} (serve_bench.finalize)")
    logs = {}
    for variant in variants:
        entry = record["variants"].get(variant)
        if entry is None:
            record["problems"].append(f"{variant}: no server recorded in {folder}; its compiles after boot were not "
                                      "judged")
            continue
        for name, ready in server_logs(entry, variant):
            log = folder / name
            if not log.exists():
                record["problems"].append(f"{variant}: no server log {name} in {folder}; its compiles after boot "
                                          "were not judged")
                continue
            driver.judge_log(record, entry, variant, log, ready)
            logs.setdefault(variant, []).append(name)
    record.update({key: finished[key] for key in ENVIRONMENT_KEYS if key in finished})
    record["finalized"] = {
        "from": PARTIAL, "environment_from": str(environment_from), "server_logs": logs,
        "server_logs_end": "where the call was packed: a compile after that is not in them",
        "dropped_unpaired_runs": [{k: run.get(k) for k in ("variant", "input_len", "sampling", "concurrency", "round",
                                                           "duration_s")} for run in dropped]}
    result = report.assemble(record, variants, workload_cells(record["workload"]))
    (folder / "serve_bench.json").write_text(json.dumps(result, indent=1))
    (folder / "serve_bench.txt").write_text(report.table(result) + "\n")
    report.plot(result, folder / "serve_bench.png")
    return result


def server_logs(entry: dict[str, Any], variant: str) -> list[tuple[str, bool]]:
    """Each server log a variant's boots name (``driver.Bench.log_for``: one per server booted or adopted), in boot
    order, with whether that server got ready; ``server_<variant>.log`` for a variant with no boot recorded."""
    named: dict[str, bool] = {}
    for boot in entry.get("boots", []):
        name = boot.get("log") or f"server_{variant}.log"
        named[name] = named.get(name, False) or bool(boot.get("ready"))
    return list(named.items()) or [(f"server_{variant}.log", False)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portable_spec_harness.serve_bench.finalize",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="the killed call's serve-bench folder (holds serve_bench.partial.json)")
    parser.add_argument("--environment-from", type=Path, required=True,
                        help="a finished call of the same lease (its serve_bench.json or folder): versions, device")
    parser.add_argument("--json", action="store_true", help="print the assembled report's summary as JSON")
    args = parser.parse_args(argv)
    try:
        result = finalize(args.folder, args.environment_from)
    except PortableSpecError as exc:
        return emit_error(str(exc), 2, as_json=args.json)
    summary = {"folder": str(args.folder), "status": result["status"], "rounds_done": result["rounds_done"],
               "runs": len(result["runs"]), "dropped_unpaired_runs": len(result["finalized"]["dropped_unpaired_runs"]),
               "problems": result["problems"]}
    print(json.dumps(summary, indent=1) if args.json else report.table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
