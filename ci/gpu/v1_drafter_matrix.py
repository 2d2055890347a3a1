"""Issue 6's end-to-end matrix on the GPU host, in parts that run side by side on one GPU.

    python ci/gpu/v1_drafter_matrix.py OUTDIR [--parts perfect,partial] [--parallel 3]   (default: the TP=1 parts)
    --parts tp2   the tensor-parallel parts (2 GPUs; NVLink multicast off, custom all-reduce and the all-reduce +
                  RMSNorm fusion off, as a host without multicast needs); --parts tp2_ctx only issue 37's: the
                  context parts, MTP on MLA and the draft model at TP=2 (tp2_ctx_eagle, ..., tp2_ctx_draft_model)
    --parts bugs  every injected bug (``--inject-bug``) on every part in ``BUG_BASES``; one of them:
                  ``bug_<bug>_<part>``, e.g. ``bug_wrong_slot_attention`` (any TP=1 part may be named as the base)
    --parts mrv2  issue 23's Model Runner V2 parts (``harness/portable_spec_harness/e2e/mrv2_parts.py``: mrv2_perfect,
                  mrv2_eagle3, mrv2_dflash, mrv2_ctx_eagle, mrv2_ctx_eagle3, mrv2_ctx_dflash, and from vLLM 0.33.0
                  mrv2_ctx_draft_model), each through ci/gpu/mrv2_e2e.py: MRV2 on our CUDA platform vs MRV2 on
                  vLLM's and no speculation

Each part runs ci/gpu/v1_drafter_e2e.py with one configuration (its variants one after another, every seed inside
one boot) and writes its JSON into OUTDIR. Parts run ``--parallel`` at a time: each engine gets a fixed KV cache
(no memory profiling, which other processes on the GPU would disturb) and each part its own vLLM compile cache
(no two processes write one cache entry). Timing from such runs means nothing; the checks are about correctness.
The exit code is non-zero if any part failed its checks, or if an injected bug was caught by none of the parts
that ran it (a bug part exits non-zero when its bug went unseen: on a pair blind to that bug, that is the expected
finding, not a failure). OUTDIR/injected_bugs.json tabulates, per bug and part, which checks caught it and which of
those the matrix had before the per-step oracle.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from portable_spec.envs import BY_NAME, INJECT_BUG_ENV
from portable_spec.versions import installed_text
from portable_spec_harness.e2e.mrv2_parts import PARTS as MRV2_PARTS
from portable_spec_harness.e2e.mrv2_parts import runnable as mrv2_runnable
from portable_spec_harness.e2e.parent import own_compile_cache

E2E = str(Path(__file__).with_name("v1_drafter_e2e.py"))
MRV2_E2E = str(Path(__file__).with_name("mrv2_e2e.py"))
KV_CACHE_BYTES = 1 << 30
PARTS: dict[str, list[str]] = {
    # 100%-acceptance EAGLE pair: every position must stay at 100% under FULL graphs.
    "perfect": ["--pair", "llama_eagle", "--variant", "perfect"],
    # Needs the draft's attention to read the current position's K/V: catches stale metadata or slots.
    "attention": ["--pair", "llama_eagle", "--variant", "attention", "--variants", "nospec,eager_drafter,full_drafter"],
    "partial": ["--pair", "llama_eagle", "--variant", "partial", "--seeds", "0,1,2", "--tolerance-pts", "1",
                "--variants", "nospec,eager_drafter,full_drafter"],
    "eagle3": ["--pair", "llama_eagle3", "--variant", "perfect", "--variants", "nospec,eager_drafter,full_drafter"],
    # The published EAGLE-3 shape: a draft vocabulary (855 of 1024 ids) with its d2t map; our fused graphs must take
    # the argmax over the draft vocabulary and gather the target id (``draft_sample``) and draft what vLLM drafts.
    "eagle3_d2t": ["--pair", "llama_eagle3", "--variant", "d2t", "--variants", "nospec,eager_drafter,full_drafter",
                   "--expect-draft-sample", "d2t_gather"],
    # MoE target: vLLM picks the V1 runner by itself.
    "moe": ["--pair", "mixtral_eagle", "--variant", "perfect", "--runner", "auto",
            "--variants", "nospec,eager_drafter,full_drafter"],
    "dflash": ["--pair", "qwen3_dflash", "--variant", "perfect", "--variants", "nospec,eager_drafter,full_drafter"],
    # Sampling runs use the soft target (winning logit 8: p(f(t)) ~ 0.745 at temperature 1), so the output really
    # departs from greedy (checked); the sharp target samples its greedy chain. Partial head: acceptance within
    # 2 points of the eager drafter over 3 seeds. Perfect head: draft distribution == target distribution, so every
    # position must stay at 100% while sampling.
    "probabilistic": ["--pair", "llama_eagle", "--variant", "partial", "--seeds", "0,1,2", "--temperature", "1.0",
                      "--draft-sample-method", "probabilistic", "--target-logit", "8", "--max-tokens", "160",
                      "--tolerance-pts", "2", "--variants", "eager_drafter,full_drafter"],
    # The context pairs (model_zoo.CONTEXT_PAIRS): the target's next token reads the current and previous positions
    # through attention and RoPE, and each head is right only with correct hidden states, positions, KV slots and
    # draft attention; prompts longer than 16 KV blocks, a shared 18-block prefix (ragged prefix-cache prefills) and
    # one ending at max_model_len (trimmed drafts). Checked also against the construction (greedy_equals_design,
    # acceptance_as_designed).
    "ctx_eagle": ["--pair", "llama_ctx_eagle", "--variants", "nospec,upstream_v1,eager_drafter,full_drafter"],
    "ctx_eagle3": ["--pair", "llama_ctx_eagle3", "--variants", "nospec,eager_drafter,full_drafter"],
    "ctx_dflash": ["--pair", "qwen3_ctx_dflash", "--variants", "nospec,eager_drafter,full_drafter"],
    # vLLM's separate draft model (method draft_model): a 4-layer LlamaForCausalLM of the target's vocabulary whose
    # context attention is its last layer, right only with that layer's K/V at the right positions and slots;
    # its first pass (2+K tokens per request) and chain steps replay per-forward FULL graphs (no fused kinds).
    "ctx_draft_model": ["--pair", "llama_ctx_draft_model", "--variants", "nospec,eager_drafter,full_drafter"],
    # The same under async scheduling, which vLLM 0.26.0 runs for draft_model only when asked (0.28.0 by default):
    # the host prepares the next step while the GPU runs this one, from the valid counts left on the device.
    "ctx_draft_model_async": ["--pair", "llama_ctx_draft_model", "--variants", "nospec,eager_drafter,full_drafter",
                              "--async-scheduling"],
    # Sampled drafts (issue 39 item 1): temperature 1 on the soft context target (logit 8, so samples leave the
    # greedy path) with probabilistic draft sampling; per seed, ours' outputs and acceptance equal vLLM's eager drafter's.
    "ctx_draft_model_probabilistic": ["--pair", "llama_ctx_draft_model", "--seeds", "0,1,2", "--temperature", "1.0",
                                      "--draft-sample-method", "probabilistic", "--target-logit", "8",
                                      "--variants", "eager_drafter,full_drafter"],
    # MTP on a DeepSeek-V3-shaped MLA target: vLLM picks an MLA backend whose graphs need uniform batches.
    "mla_mtp": ["--pair", "deepseek_mla_mtp", "--variants", "nospec,eager_drafter,full_drafter"],
    # MTP on standard attention (vLLM mimo_mtp): a MiMo-shaped Qwen2 target (q/k/v bias, GQA) and its one MTP layer,
    # run for the first pass and every chain step; the backend is the target's ordinary one, not an MLA one.
    "gqa_mtp": ["--pair", "mimo_ctx_mtp", "--variants", "nospec,eager_drafter,full_drafter"],
    "probabilistic_perfect": ["--pair", "llama_eagle", "--variant", "perfect", "--seeds", "0,1,2",
                              "--temperature", "1.0", "--draft-sample-method", "probabilistic", "--target-logit", "8",
                              "--max-tokens", "160", "--variants", "eager_drafter,full_drafter"],
}
TP2 = ["--tp", "2", "--disable-custom-all-reduce", "--no-fuse-allreduce-rms"]
TP2_CTX_BASES = ("ctx_eagle", "ctx_eagle3", "ctx_dflash", "mla_mtp", "ctx_draft_model")
"""Issue 37's exactness at TP=2 (``--parts tp2_ctx``): the context pairs (each head right only with correct hidden
states, positions, KV slots and draft attention, checked against the construction), MTP on the MLA target and the
draft model, every rank's facts judged (``v1_checks.rank_checks``)."""
TP2_PARTS: dict[str, list[str]] = {
    "tp2_perfect": [*PARTS["perfect"], *TP2],
    "tp2_partial": [*PARTS["partial"], *TP2],
    "tp2_eagle3": [*PARTS["eagle3"], *TP2],
    "tp2_moe": [*PARTS["moe"], *TP2],
    "tp2_dflash": [*PARTS["dflash"], *TP2],
    # One rank's capture of one fused chain size fails: every rank must drop it, and the output stay exact.
    "tp2_fail_capture": ["--pair", "llama_eagle", "--variant", "partial", "--seeds", "0,1", "--variants",
                         "nospec,eager_drafter,full_drafter", "--tolerance-pts", "1", "--fail-capture",
                         "1:chain_fused:4", *TP2],
    **{f"tp2_{base}": [*PARTS[base], *TP2] for base in TP2_CTX_BASES},
}
BUGS = BY_NAME[INJECT_BUG_ENV].choices
BUG_BASES = ("ctx_eagle", "attention", "partial")
"""The parts every injected bug runs on (``--parts bugs``): the context pair, which should catch every bug in its
greedy output too, and two f-chain pairs (any TP=1 part may also be named, ``bug_<bug>_<part>``)."""
OWN_BUG_BASES = {"d2t_unmapped": ("eagle3_d2t",), "draft_position_off_by_one": ("ctx_draft_model",)}
"""Bugs that exist only on one kind of head, with the parts they run on instead (a head without a draft vocabulary
never takes the d2t gather, and only our draft-model drafter runs the draft-model position bug, so elsewhere the bug
could not fire)."""


def bug_part(name: str) -> list[str] | None:
    """``bug_<bug>_<part>``: the TP=1 part ``<part>`` with our variant running bug ``<bug>``; None if not one."""
    for bug in BUGS:
        base = name.removeprefix(f"bug_{bug}_")
        if base != name and base in PARTS:  # upstream V1 never runs the bug: leave it out of the part
            return [*PARTS[base], "--variants", "nospec,eager_drafter,full_drafter", "--inject-bug", bug]
    return None


BUG_PARTS = {f"bug_{bug}_{base}": bug_part(f"bug_{bug}_{base}") for bug in BUGS
             for base in OWN_BUG_BASES.get(bug, BUG_BASES)}
ALL_PARTS = {**PARTS, **TP2_PARTS, **BUG_PARTS, **{name: part.args() for name, part in MRV2_PARTS.items()}}
GROUPS = {"tp1": list(PARTS), "tp2": list(TP2_PARTS), "tp2_ctx": [f"tp2_{base}" for base in TP2_CTX_BASES],
          "bugs": list(BUG_PARTS), "mrv2": mrv2_runnable(installed_text())}


def part_args(name: str) -> list[str] | None:
    return ALL_PARTS.get(name) or bug_part(name)


def part_script(name: str) -> str:
    """The driver a part runs: the Model Runner V2 parts have their own (other variants, other checks)."""
    return MRV2_E2E if name in MRV2_PARTS else E2E


def build_mrv2_pairs(parts: list[str]) -> None:
    """Generate the Model Runner V2 parts' models once, before any part starts: parts sharing a target (the Llama
    pairs) never write one model directory together."""
    from portable_spec_harness.model_zoo import build_pair

    for name in dict.fromkeys(p for p in parts if p in MRV2_PARTS):
        part = MRV2_PARTS[name]
        build_pair(part.pair, Path("/tmp/portable_spec_zoo"), variant=part.model_variant, num_speculative_tokens=part.k)


def last_line(log: Path, prefix: str) -> str | None:
    lines = [line for line in log.read_text().splitlines() if line.startswith(prefix)]
    return lines[-1] if lines else None


def bug_table(outcomes: dict[str, dict | None]) -> dict[str, dict]:
    """Per injected bug: each part's outcome (None: the part printed none, e.g. it crashed before judging) and
    whether any part caught it."""
    table: dict[str, dict] = {}
    for part, outcome in outcomes.items():
        bug = next(b for b in BUGS if part.startswith(f"bug_{b}_"))
        entry = table.setdefault(bug, {"parts": {}, "caught_somewhere": False})
        entry["parts"][part] = outcome
        entry["caught_somewhere"] |= bool(outcome and outcome.get("caught"))
    return table


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("outdir")
    parser.add_argument("--parts", default="tp1", help=f"parts or groups ({', '.join(GROUPS)})")
    parser.add_argument("--parallel", type=int, default=1, help="parts running at once on the GPU(s)")
    parser.add_argument("--concurrent-variants", action="store_true",
                        help="inside each part, boot the variants at once too (with --parallel > 1)")
    args = parser.parse_args()
    parts = [p for name in args.parts.split(",") for p in GROUPS.get(name, [name])]
    unknown = [p for p in parts if part_args(p) is None]
    if unknown:
        parser.error(f"unknown part(s) {', '.join(unknown)}; choose from {', '.join([*GROUPS, *ALL_PARTS])}")
    too_old = [p for p in parts if p in MRV2_PARTS and not MRV2_PARTS[p].runs_on(installed_text())]
    if too_old:
        parser.error(f"part(s) {', '.join(too_old)} need vLLM >= {MRV2_PARTS[too_old[0]].since} (installed: "
                     f"{installed_text()}): run them with VLLM_SITE naming such a vLLM")
    out = Path(args.outdir)
    out.mkdir(parents=True, exist_ok=True)
    build_mrv2_pairs(parts)
    pending, running, failed, bug_outcomes = list(parts), {}, [], {}
    while pending or running:
        while pending and len(running) < max(args.parallel, 1):
            part = pending.pop(0)
            cmd = [sys.executable, part_script(part), str(out), *part_args(part)]
            env = dict(os.environ)
            if args.parallel > 1:
                cmd += ["--kv-cache-bytes", str(KV_CACHE_BYTES)]
                env.update(own_compile_cache(part))
            if args.concurrent_variants:
                cmd += ["--concurrent"]
            print(f"=== e2e matrix: {part} started ===", flush=True)
            log = open(out / f"matrix_{part}.log", "w")
            running[part] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log, time.time())
        time.sleep(2)
        for part, (proc, log, started) in list(running.items()):
            if proc.poll() is None:
                continue
            log.close()
            del running[part]
            part_log = out / f"matrix_{part}.log"
            if part.startswith("bug_"):
                line = last_line(part_log, "INJECTED_BUG ")
                bug_outcomes[part] = json.loads(line.split(" ", 1)[1]) if line else None
            elif proc.returncode:
                failed.append(part)
            checks = last_line(part_log, "CHECKS")
            print(f"=== {part}: exit {proc.returncode} in {time.time() - started:.0f} s "
                  f"{checks or '(no checks)'} ===", flush=True)
    print(f"=== failed parts: {failed or 'none'} ===", flush=True)
    unseen = []
    if bug_outcomes:
        table = bug_table(bug_outcomes)
        (out / "injected_bugs.json").write_text(json.dumps(table, indent=1))
        for bug, entry in table.items():
            for part, outcome in entry["parts"].items():
                print(f"=== injected {bug} on {part}: " + (
                    "no outcome (see its log)" if outcome is None else
                    f"caught by {outcome['caught_by']} (pre-oracle checks: {outcome['caught_by_pre_oracle']})"
                    if outcome["caught"] else f"unseen; run checks failed: {outcome['run_checks_failed']}") + " ===",
                      flush=True)
        unseen = [bug for bug, entry in table.items() if not entry["caught_somewhere"]]
        print(f"=== injected bugs caught by no part: {unseen or 'none'} ===", flush=True)
    return 1 if failed or unseen else 0


if __name__ == "__main__":
    sys.exit(main())
