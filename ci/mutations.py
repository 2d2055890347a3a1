#!/usr/bin/env python3
"""Planted bugs, one at a time, each in a temporary copy of the repository: does the suite catch it?

Each mutation names a file, the exact text it replaces (which must occur once), the text it puts there, what that
breaks, and the test files (or node ids) that must catch it. For each, the tracked files are copied to a temporary
folder (the working tree is never touched), the mutation applied there, and the tests run with this Python and
``PYTHONPATH`` at the copy; a mutation is caught when a test fails (the failing tests are named), survived when
they all pass. A survivor is a missing test.

    python ci/mutations.py [--list] [--only NAME ...] [--json] [--out FILE]

On demand (not in ``.ci/run``: minutes of CPU). The last report lives under ``bench/results/<date>-mutations/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROPOSER = "portable_spec/vllm_adapter/spec_decode/proposer.py"
RUNNER = "portable_spec/draft/runner.py"
KERNEL = "portable_spec/kernels/eagle_prepare_next_token.py"
JUDGE = "harness/portable_spec_harness/soak/judge.py"
EXACTNESS = "harness/portable_spec_harness/e2e/exactness.py"
EDGES = "tests/test_drafter_edges.py"
HOST = "tests/test_draft_runner_host.py"
VOCAB = "tests/test_kernel_vocab_boundary.py"
MALFORMED = "tests/test_judges_malformed.py"


@dataclass(frozen=True)
class Mutation:
    name: str
    area: str
    file: str
    original: str
    mutated: str
    breaks: str
    tests: tuple[str, ...]


MUTATIONS = (
    Mutation("ragged_total_any_multiple", "drafter", PROPOSER,
             " and cad.num_actual_tokens % query_len == 0)", ")",
             "a ragged first pass whose token total is no multiple of 1+K replays a uniform graph", (EDGES,)),
    Mutation("uniform_ignores_max_query_len", "drafter", PROPOSER,
             "    return cad.max_query_len == query_len and cad.num_actual_tokens == cad.num_reqs * query_len",
             "    return cad.num_actual_tokens == cad.num_reqs * query_len",
             "query lengths [5, 3] at 1+K = 4 count as uniform: wrong drafts on UNIFORM_BATCH backends", (EDGES,)),
    Mutation("pending_key_serves_smaller_forward", "drafter", PROPOSER,
             "return key if key.num_tokens == tokens else None", "return key if key.num_tokens >= tokens else None",
             "a first-pass graph replays for a forward smaller than its key", (EDGES,)),
    Mutation("pending_key_serves_larger_forward", "drafter", PROPOSER,
             "return key if key.num_tokens == tokens else None", "return key if key.num_tokens <= tokens else None",
             "a first-pass graph replays for a forward larger than its key", (EDGES,)),
    Mutation("budget_per_runner", "budget", RUNNER,
             "room = max(0, self.live_graph_limit - live_graphs(self.platform))", "room = self.live_graph_limit",
             "each runner gets the whole live-graph budget: two runners exceed MUSA's cap", (HOST,)),
    Mutation("budget_not_released", "budget", RUNNER,
             "            _add_live(self.platform, -n)", "            _add_live(self.platform, 0)",
             "a closed runner keeps its share of the budget", (HOST,)),
    Mutation("budget_keeps_largest", "budget", RUNNER,
             "wanted.sort(key=lambda k: (k.num_tokens, order.index(k.step)))",
             "wanted.sort(key=lambda k: (-k.num_tokens, order.index(k.step)))",
             "under a budget the largest batches keep their graphs instead of the launch-bound smallest", (HOST,)),
    Mutation("piecewise_one_piece_short", "planner", "portable_spec/vllm_adapter/platform/graph_pieces.py",
             "return int(model_config.get_num_layers(parallel_config)) + 1",
             "return int(model_config.get_num_layers(parallel_config))",
             "FULL_AND_PIECEWISE counts one piece too few per target size: a MUSA plan exceeds torchada's cap",
             ("tests/test_graphs_per_target_size.py",)),
    Mutation("drafter_pieces_uncounted", "planner", "portable_spec/vllm_adapter/platform/config_hook.py",
             "            per_size += draft_pieces(draft, parallel, fallback=target)",
             "            per_size += 0",
             "the V1 drafter's own PIECEWISE graphs go uncounted: the engine's live graphs exceed the plan",
             ("tests/test_graphs_per_target_size.py",)),
    Mutation("uncompiled_draft_pieces_counted", "planner", "portable_spec/vllm_adapter/platform/graph_pieces.py",
             "    if not compiled_by_vllm(draft_config):", "    if False:",
             "a draft vLLM does not compile (MiMo's MTP head) is counted layers + 1 pieces per size: the plan "
             "overcounts by what the GPU showed (50 planned, 32 live)",
             ("tests/test_graph_pieces.py", "tests/test_graphs_per_target_size.py")),
    Mutation("budget_ignores_pieces", "planner", "portable_spec/capture_sizes/budget.py",
             "return len(self.target) * self.graphs_per_target_size + sum(",
             "return len(self.target) + sum(",
             "the planner counts one graph per target size whatever the pieces",
             ("tests/test_capture_sizes.py::test_property_live_graph_budget",)),
    Mutation("vocab_edge_valid", "kernels", KERNEL,
             "(token_ids < vocab_size)", "(token_ids <= vocab_size)",
             "MUSA's next-token substitute takes id == vocab_size as a valid token", (VOCAB,)),
    Mutation("discarded_count_kept", "kernels", KERNEL,
             "valid_count = tl.where(is_discarded, 0, num_valid)", "valid_count = num_valid",
             "a discarded request reports its sampled tokens as valid", (VOCAB,)),
    Mutation("no_backup_when_none_valid", "kernels", KERNEL,
             "use_backup = is_discarded | (num_valid == 0)", "use_backup = is_discarded",
             "a request with no valid sampled token does not fall back to its backup token", (VOCAB,)),
    Mutation("soak_missing_outcome_uncompared", "judges", JUDGE,
             "            result.missing += 1\n", "            result.uncompared += 1\n",
             "a request with no outcome on one side (a truncated run) passes", (MALFORMED,)),
    Mutation("soak_choices_only_seen", "judges", JUDGE,
             "set(range(spec.n)) | set(a.choices) | set(b.choices)", "set(a.choices) | set(b.choices)",
             "a choice the request asked for, missing on both sides, passes", (MALFORMED,)),
    Mutation("soak_condition_never_counted", "judges", "harness/portable_spec_harness/soak/conditions.py",
             'out[name] = "never counted: no reading of it reached the judge"', "pass",
             "a condition whose counter was never read passes", (MALFORMED,)),
    Mutation("soak_stop_past_the_step", "judges", JUDGE,
             "if not 0 <= extra <= budget.K:", "if not 0 <= extra:",
             "on a stop-string request, ours may run any number of tokens past the stop string's step",
             (MALFORMED, "tests/test_soak_judge.py")),
    Mutation("exactness_unread_counts", "judges", EXACTNESS,
             "return [i for i, v in enumerate(values) if isinstance(v, bool) or not isinstance(v, (int, float))]",
             "return []", "unread (None) counters equal each other and pass", (MALFORMED,)),
    Mutation("exactness_prefix_prompt", "judges", EXACTNESS,
             "        if len(mine) != len(theirs):  # after", "        if False:  # after",
             "a prompt's output a strict prefix of the reference's passes",
             (MALFORMED, "tests/test_e2e_exactness.py::test_greedy_equals_nospec_counts_tokens_and_fails_on_nothing")),
    Mutation("v1_judge_skips_missing_row", "judges", "harness/portable_spec_harness/e2e/v1_checks.py",
             '                    judged.checks[prefix + "ran"] = False\n', "                    pass\n",
             "a variant's row missing for one seed passes", (MALFORMED,)),
)


def tracked_copy(repo: Path, dest: Path) -> None:
    """The repository's tracked and untracked-but-not-ignored files, copied to ``dest`` (no .git, no build output)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=repo,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src = repo / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def apply(mutation: Mutation, tree: Path) -> None:
    path = tree / mutation.file
    text = path.read_text()
    found = text.count(mutation.original)
    if found != 1:
        raise SystemExit(f"mutation {mutation.name}: its original text occurs {found} times in {mutation.file} "
                         "(must be once): update the mutation to the code")
    path.write_text(text.replace(mutation.original, mutation.mutated))


def failed_tests(junit: Path) -> list[str]:
    if not junit.exists():
        return []
    failed = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(f"{case.get('classname')}::{case.get('name')}")
    return failed


def run_one(mutation: Mutation, repo: Path = ROOT, python: str = sys.executable, timeout_s: int = 900) -> dict:
    """Apply ``mutation`` to a copy of ``repo``, run its tests there; caught or survived, with the failing tests."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"mutation-{mutation.name}-") as tmp:
        tree = Path(tmp) / "repo"
        tracked_copy(repo, tree)
        apply(mutation, tree)
        junit = Path(tmp) / "junit.xml"
        paths = [str(tree), str(tree / "harness")] if (tree / "harness").is_dir() else [str(tree)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "PYTHONDONTWRITEBYTECODE": "1"}
        proc = subprocess.run([python, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not gpu",
                               f"--junitxml={junit}", *mutation.tests], cwd=tree, env=env, capture_output=True,
                              text=True, timeout=timeout_s)
        failing = failed_tests(junit)
    # 1: tests failed. 2 (interrupted, collection error) counts only with a named failing test; 5 (nothing collected)
    # and anything else never: nothing checked the mutation.
    caught = proc.returncode == 1 or (proc.returncode == 2 and bool(failing))
    return {**asdict(mutation), "caught": caught, "pytest_exit": proc.returncode, "failing": failing,
            "seconds": round(time.monotonic() - start, 1),
            "tail": "" if caught else proc.stdout[-1500:]}


def table(results: list[dict]) -> str:
    width = max([len(r["name"]) for r in results] + [4])
    lines = [f"{'name':<{width}}  {'area':<8} verdict   failing"]
    for r in results:
        verdict = "caught" if r["caught"] else "SURVIVED"
        first = r["failing"][0] if r["failing"] else "-"
        lines.append(f"{r['name']:<{width}}  {r['area']:<8} {verdict:<9} {first}"
                     + (f" (+{len(r['failing']) - 1})" if len(r["failing"]) > 1 else ""))
    caught = sum(r["caught"] for r in results)
    lines.append(f"{caught} of {len(results)} caught")
    return "\n".join(lines)


def main(argv: list[str] | None = None, mutations: tuple[Mutation, ...] = MUTATIONS, repo: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only these (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--out", type=Path, help="also write the JSON report here")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs the tests")
    args = parser.parse_args(argv)
    chosen = list(mutations)
    if args.only:
        unknown = sorted(set(args.only) - {m.name for m in mutations})
        if unknown:
            print(f"error: unknown mutation(s) {', '.join(unknown)}: see --list", file=sys.stderr)
            return 2
        chosen = [m for m in mutations if m.name in args.only]
    if args.list:
        for m in chosen:
            print(f"{m.name} [{m.area}] {m.file}: {m.breaks} -> {', '.join(m.tests)}")
        return 0
    results = []
    for m in chosen:
        results.append(run_one(m, repo, args.python))
        print(f"[mutations] {m.name}: {'caught' if results[-1]['caught'] else 'SURVIVED'} "
              f"({results[-1]['seconds']} s)", file=sys.stderr, flush=True)
    report = {"mutations": results, "caught": sum(r["caught"] for r in results), "total": len(results),
              "survived": [r["name"] for r in results if not r["caught"]]}
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2) if args.json else table(results))
    return 0 if not report["survived"] else 1


if __name__ == "__main__":
    sys.exit(main())
