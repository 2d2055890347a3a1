"""The recorded draft rows (``portable_spec_harness.vllm_door.draft_recorder``: one per request per step, in step order)
regrouped per prompt, as the per-step oracle compares them: prompt i's ordered ``[position, drafts]`` steps.

vLLM's offline ``LLM`` names request i of a ``generate`` call by a counter (``RequestOutput.request_id``); the engine
appends ``-`` and 8 random characters for its internal id, which is what the runner sees. Rows are matched to
prompts by that external id, across every seed's ``generate`` of one boot (a row of an earlier call that ran late
still finds its prompt); rows that match no prompt are counted, never dropped silently.
"""

from __future__ import annotations

from typing import Any, Callable


def external_id(internal: str, known: dict[str, Any]) -> str | None:
    """The external request id an internal one was made from (``"7-1a2b3c4d"`` -> ``"7"``), if known."""
    if internal in known:
        return internal
    head = internal.rsplit("-", 1)[0]
    return head if head in known else None


def steps_by_prompt(rows: list[dict[str, Any]], request_ids: dict[int, list[str]]
                    ) -> tuple[dict[int, list[list[Any]]], dict[str, int]]:
    """``request_ids``: per seed, the external ids of its prompts in prompt order. Returns per seed the per-prompt
    ``[[position, drafts], ...]`` lists (in step order) and a summary: rows, steps, rows that matched no prompt."""
    where = {rid: (seed, i) for seed, ids in request_ids.items() for i, rid in enumerate(ids)}
    out = {seed: [[] for _ in ids] for seed, ids in request_ids.items()}
    unmatched = 0
    for row in rows:
        rid = external_id(row["req_id"], where)
        if rid is None:
            unmatched += 1
            continue
        seed, i = where[rid]
        out[seed][i].append([row["position"], row["drafts"]])
    summary = {"rows": len(rows), "steps": len({row["step"] for row in rows}), "unmatched_rows": unmatched}
    return out, summary


def recorded_runs(llm: Any, seeds: list[int], run_seed: Callable[[int], dict[str, Any]]
                  ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``run_seed(seed)`` for every seed with the drafter's per-step drafts recorded on every rank (installed after
    boot, removed before returning, also on error). Each run (which must carry ``request_ids``) gets its prompts'
    ``draft_steps`` from rank 0; returns the runs and the record's summary (rows, steps, unmatched rows, the runner
    class wrapped, whether every rank recorded the same rows)."""
    from portable_spec_harness.vllm_door import draft_recorder

    wrapped = llm.collective_rpc(draft_recorder.start_recording)
    try:
        runs = [run_seed(seed) for seed in seeds]
        per_rank = llm.collective_rpc(draft_recorder.take_recorded)
    finally:
        llm.collective_rpc(draft_recorder.stop_recording)
    steps, summary = steps_by_prompt(per_rank[0], {run["seed"]: run["request_ids"] for run in runs})
    for run in runs:
        run["draft_steps"] = steps[run["seed"]]
    summary.update(wrapped=wrapped[0], ranks_agree=all(rows == per_rank[0] for rows in per_rank[1:]))
    return runs, summary
