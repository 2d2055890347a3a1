"""What a serving benchmark runs and in which order: the variants (each an e2e engine variant behind ``vllm serve``),
the cells (input length x sampling x concurrency), the prompts per run, and the interleaved order of the client runs.

Why interleaved: the host's speed drifts by tens of percent over minutes, so a variant measured all at once could
win by timing alone. Every round visits every variant in every cell, and the variant that goes first rotates by
round (``interleave.rotation``), so over the rounds each variant holds each position equally often.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from portable_spec.errors import PortableSpecError
from portable_spec_harness.e2e.interleave import rotation
from portable_spec_harness.serve_bench.variant_names import SUFFIX_SEPARATOR, kind_of, suffix_of

VARIANTS = {"upstream_v1": "upstream_v1", "ours": "full_drafter", "mrv2": "mrv2", "ours_mrv2": "ours_platform_mrv2"}
"""Bench name -> ``harness/e2e/configs.py`` variant: vLLM's drafter under PIECEWISE graphs on vLLM's own platform
and the V1 runner; our FULL drafter (``VLLM_PLATFORM=cuda``, V1 runner); Model Runner V2 with its own drafter;
the runner vLLM picks (MRV2 for a dense target) on our platform, with our worker's MRV2 sampled warm-up."""
DEFAULT_VARIANTS = ("upstream_v1", "ours", "mrv2")
DENSE_ONLY = {v: "MoE target: vLLM 0.26.0 serves it on the V1 runner only, so there is no MRV2 to compare"
              for v in ("mrv2", "ours_mrv2")}
OURS = "ours"
OURS_KINDS = (OURS, "ours_mrv2")
"""The kinds whose servers run our layer, each a ratio's numerator: our V1 drafter, and the runner vLLM picks on our
platform (on vLLM 0.33.0 the draft model's MRV2 speculator with our decode graphs, ``ours_mrv2_over_mrv2``)."""
RATIO_BASES = ("upstream_v1", "mrv2")
"""The ratios the report keys on: ``ours_over_upstream_v1`` and ``ours_over_mrv2`` (``ratio_pairs``)."""
SCHEDULING_SUFFIXES = {"async": "on", "sync": "off"}
"""A ``--variants`` name's suffix (``ours@async``) -> the ``--async-scheduling`` choice of that one server; a name
without one runs with ``--async-scheduling``'s. Why: whether async scheduling helps a drafter differs between ours and
upstream (issue 39), and only servers of one kind with either scheduling, booted together and interleaved on one
machine, answer it without the host's drift between sessions."""
TARGET_LINES = {"upstream_v1": (1.0, 1.1), "mrv2": (0.97,)}
"""The serving targets drawn on each ratio's plot (issues 37 and 41, which ``coverage.TABLES`` judges): ours >=
upstream V1 everywhere and >= 1.10x at c <= 2 (designed acceptance); ours >= 0.97x MRV2 on a dense target."""


SAMPLING = {"greedy": {"temperature": 0.0}, "sampled": {"temperature": 0.8, "top_p": 0.95}}
"""``--sampling`` name -> the sampling parameters ``vllm bench serve`` sends with every request (its ``--temperature``
and ``--top-p``). A sampled run also sends ``seed`` in each request's body (``--extra-body``; the client's own
``--seed`` only seeds its random prompts), the run's seed, so a sampled run is reproducible and every variant of a
cell and round samples from the same generator state."""


def sampling_params(name: str) -> dict:
    """What the report says a sampling sent: its parameters, and for a sampled one where each request's seed came
    from."""
    seeded = {"seed": "each run's seed (its --seed) in every request's body"} if SAMPLING[name]["temperature"] else {}
    return {**SAMPLING[name], **seeded}


WARM_PASSES = 2
"""Untimed runs per cell and variant before its timed ones. The first meets the cell's first steps (a new batch
shape's kernels and graphs, the client's first connections): on the GPU its one wave took 1.5-3x the timed runs' per
wave, so runs sized from it came in short or long. The last pass (round ``SIZING_ROUND``) sizes the timed runs."""
SIZING_ROUND = -1
"""The round number of the warm pass that sizes a cell's timed runs (the earlier passes count down from it)."""
HEADROOM = 1.5
"""Prompts are sized for this many times ``--min-run-s`` from the warm run: the warm run is a cell's first, so its
one prompt per slot may be slower than the timed waves (JIT, first connections), and a timed run sized to exactly
``--min-run-s`` from it would often come in short."""
RUN_TIMEOUT_SHARE = 0.5
"""A sized run is projected to take at most this share of ``--run-timeout``: a cell whose warm run was slow must not
be sized into a client timeout."""


@dataclass(frozen=True)
class Cell:
    """What one comparison holds fixed: prompt length, sampling and ``--max-concurrency``; every variant runs it."""

    input_len: int
    sampling: str
    concurrency: int

    @property
    def key(self) -> str:
        """The cell's key in the report's JSON (``cells[variant][key]``, ``ours_over_<base>[key]``)."""
        return f"in{self.input_len}/{self.sampling}/c{self.concurrency}"

    @property
    def panel(self) -> tuple[int, str]:
        """The report's panel of this cell: one per input length and sampling, concurrency along x."""
        return self.input_len, self.sampling


@dataclass(frozen=True)
class Run:
    """One timed client run: round, cell, variant."""

    round: int
    cell: Cell
    variant: str

    def as_json(self) -> dict[str, int | str]:
        return {"round": self.round, "input_len": self.cell.input_len, "sampling": self.cell.sampling,
                "concurrency": self.cell.concurrency, "variant": self.variant}


def cells(input_lens: list[int] | tuple[int, ...], sampling: list[str] | tuple[str, ...],
          concurrency: list[int] | tuple[int, ...]) -> list[Cell]:
    """Every combination, input length outermost and concurrency innermost (the report's reading order)."""
    return [Cell(n, s, c) for n in input_lens for s in sampling for c in concurrency]


def clock_cell(call_cells: list[Cell], key: str | None) -> Cell:
    """The cell the phase clock runs in: the one of ``call_cells`` whose key is ``key`` (``--clock-cell``), or without a
    key concurrency 1 at the first cell's input length and sampling; a key that is none of them is one line naming
    them (the CLI asks before anything is made, the driver again when called directly: never a silent c=1)."""
    if key is None:
        return Cell(call_cells[0].input_len, call_cells[0].sampling, 1)
    named = [cell for cell in call_cells if cell.key == key]
    if not named:
        raise PortableSpecError(f"--clock-cell {key} is not one of this call's cells: name one of "
                                f"{', '.join(cell.key for cell in call_cells)}")
    return named[0]


def legacy_sampling(workload: dict) -> str:
    """The sampling name of a report written before ``--sampling`` (one ``temperature`` for every run)."""
    temperature = workload.get("temperature", 0.0)
    return "greedy" if not temperature else f"t{temperature:g}"


def workload_cells(workload: dict) -> list[Cell]:
    """A report's cells from its workload, a report written before the axes (one ``input_len``) included."""
    lens = workload.get("input_lens") or [workload["input_len"]]
    return cells(lens, workload.get("sampling") or [legacy_sampling(workload)], workload["concurrency"])


def cell_of(run: dict, workload: dict) -> Cell:
    """A run's cell; a run of a report written before the axes takes its input length and sampling from the
    workload."""
    input_len = run.get("input_len", workload.get("input_len"))
    return Cell(int(input_len), run.get("sampling") or legacy_sampling(workload), int(run["concurrency"]))


def scheduling_of(variant: str, default: str) -> str:
    """The ``--async-scheduling`` choice a bench variant's server is asked for: its suffix's, else ``default``."""
    suffix = suffix_of(variant)
    return SCHEDULING_SUFFIXES[suffix] if suffix else default


def checked_variants(text: str, default: str) -> tuple[str, ...]:
    """``--variants``' names: each a known kind with at most a known scheduling suffix, and no two the same server
    (``ours,ours@async`` under ``--async-scheduling on`` would measure one thing twice). Raises
    ``PortableSpecError``, one line naming the fix; ``default`` is ``--async-scheduling``'s choice."""
    names = tuple(v for v in text.replace(" ", "").split(",") if v)
    if not names or any(kind_of(v) not in VARIANTS for v in names):
        raise PortableSpecError(f"--variants {text!r}: use some of {', '.join(VARIANTS)}, each with an optional "
                                f"@{' or @'.join(SCHEDULING_SUFFIXES)}")
    for v in names:
        if SUFFIX_SEPARATOR in v and suffix_of(v) not in SCHEDULING_SUFFIXES:
            raise PortableSpecError(f"--variants {text!r}: {v}'s suffix is unknown: end it in " + " or ".join(
                f"@{s} (--async-scheduling {c})" for s, c in SCHEDULING_SUFFIXES.items()) + ", or in nothing for "
                "--async-scheduling's choice")
    if len(set(names)) != len(names):
        raise PortableSpecError(f"--variants {text!r} names a variant twice: list each once")
    seen: dict[tuple[str, str], str] = {}
    for v in names:
        other = seen.setdefault((kind_of(v), scheduling_of(v, default)), v)
        if other != v:
            raise PortableSpecError(f"--variants {text!r}: {other} and {v} are the same server under "
                                    f"--async-scheduling {default}: drop one")
    return names


def ratio_pairs(variants: list[str] | tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """Every ratio a report of these variants keys on, ``<variant>_over_<base>`` -> (variant, base): each variant of
    our kinds (``OURS_KINDS``) over each of kind upstream_v1 or mrv2 (``ours_over_upstream_v1``,
    ``ours@async_over_upstream_v1``, ``ours_mrv2_over_mrv2``), then each suffixed variant over its kind without a suffix (``ours@async_over_ours``: what the scheduling alone
    changes, rounds paired on one machine)."""
    pairs = {f"{v}_over_{b}": (v, b) for base in RATIO_BASES for v in variants if kind_of(v) in OURS_KINDS
             for b in variants if kind_of(b) == base}
    pairs.update({f"{v}_over_{kind_of(v)}": (v, kind_of(v)) for v in variants
                  if v != kind_of(v) and kind_of(v) in variants})
    return pairs


def variants_for(asked: list[str], moe: bool) -> tuple[list[str], dict[str, str]]:
    """The variants this pair runs, in the asked order, and those skipped with the reason."""
    skipped = {v: DENSE_ONLY[kind_of(v)] for v in asked if moe and kind_of(v) in DENSE_ONLY}
    return [v for v in asked if v not in skipped], skipped


def num_prompts(concurrency: int, per_slot: int) -> int:
    """Prompts in one run: ``per_slot`` for every concurrent slot, so each slot serves the same number of requests
    at every concurrency (and the last wave is as full as the first)."""
    return concurrency * per_slot


def sized_per_slot(warm_s: float | None, min_run_s: float, floor: int, concurrency: int, max_prompts: int,
                   run_timeout_s: float) -> dict:
    """Prompts per slot for a cell's timed runs, from its warm run (one prompt per slot, so its duration is one
    wave): enough waves for ``HEADROOM`` x ``min_run_s``, never fewer than ``floor`` (``--prompts-per-slot``), at
    most ``max_prompts`` per run and a projected ``RUN_TIMEOUT_SHARE`` of the run timeout (a fast warm run must not
    size a run that never ends; a capped cell's runs may come in short, and the report flags them). ``min_run_s`` 0
    or no warm duration: ``floor``, and the returned ``why`` says which."""
    if not min_run_s > 0:
        return {"per_slot": floor, "why": "--min-run-s 0: --prompts-per-slot"}
    if not warm_s or not warm_s > 0:
        return {"per_slot": floor, "why": "no warm-run duration: --prompts-per-slot"}
    want = math.ceil(HEADROOM * min_run_s / warm_s)
    cap = max(1, min(max_prompts // concurrency, math.floor(RUN_TIMEOUT_SHARE * run_timeout_s / warm_s)))
    per_slot = max(floor, min(want, cap))
    why = (f"capped at {cap} per slot (--max-prompts {max_prompts}, --run-timeout {run_timeout_s:g})"
           if want > cap and per_slot < want else f"{HEADROOM:g} x --min-run-s {min_run_s:g} from the warm run")
    return {"per_slot": per_slot, "warm_s": round(warm_s, 3), "projected_s": round(per_slot * warm_s, 2),
            "why": why}


def resized_from_short(per_slot: int, shortest_s: float, min_run_s: float, concurrency: int, max_prompts: int,
                       run_timeout_s: float) -> dict | None:
    """Prompts per slot for a cell whose earlier call (``--sizing-from``) ran ``per_slot`` per slot and had a timed
    run come in under ``min_run_s``, the shortest at ``shortest_s``; None where none came in short or the caps leave
    ``per_slot`` as it was. Why: the earlier call's sizing came from one warm run, and a host-bound baseline (vLLM's
    eager MRV2) can run much faster in a later round than in that warm run, so keeping its prompts unchanged repeats
    in every later call the short runs the earlier report already lists. Sized as ``sized_per_slot`` sizes from a warm wave, the wave being
    the shortest run's per slot and ``per_slot`` the floor: ``ceil(per_slot x HEADROOM x min_run_s / shortest_s)``,
    within the same caps (``--max-prompts``, ``RUN_TIMEOUT_SHARE`` of the run timeout)."""
    if not (min_run_s > 0 and 0 < shortest_s < min_run_s):
        return None
    sized = sized_per_slot(shortest_s / per_slot, min_run_s, per_slot, concurrency, max_prompts, run_timeout_s)
    if sized["per_slot"] <= per_slot:
        return None
    capped = " (capped)" if sized["why"].startswith("capped") else ""
    return {"per_slot": sized["per_slot"], "projected_s": sized["projected_s"],
            "why": f"the earlier call's runs of {per_slot} per slot came in at {shortest_s:.2f} s, under --min-run-s "
                   f"{min_run_s:g}: {HEADROOM:g} x --min-run-s from the shortest{capped}",
            "resized_from_short": {"shortest_s": shortest_s, "earlier_per_slot": per_slot}}


def interleaved(variants: list[str], cell_list: list[Cell], rounds: int, first_round: int = 0) -> list[Run]:
    """Servers up together: per round, per cell, every variant once, the first rotating by round."""
    return [Run(r, cell, v) for r in range(first_round, first_round + rounds) for cell in cell_list
            for v in rotation(list(variants), r)]


def in_turn(variants: list[str], cell_list: list[Cell], rounds: int, first_round: int = 0) -> list[Run]:
    """One server at a time: per round, the variants in rotated order, each running every cell while its server is
    up (one boot per variant per round, whatever the cells)."""
    return [Run(r, cell, v) for r in range(first_round, first_round + rounds) for v in rotation(list(variants), r)
            for cell in cell_list]


def order(mode: str, variants: list[str], cell_list: list[Cell], rounds: int, first_round: int = 0) -> list[Run]:
    return (interleaved if mode == "together" else in_turn)(variants, cell_list, rounds, first_round)


def max_model_len(input_len: int, output_len: int, k: int) -> int:
    """Each request's prompt and output, the drafts past its end and 64 tokens of slack (the client re-encodes
    its random prompts), rounded up to a KV block (16). The serve bench passes its longest input length (or
    ``--server-max-input-len``, ``server_shape``): one server serves every cell."""
    need = input_len + output_len + k + 1 + 64
    return -(-need // 16) * 16


def server_shape(concurrency: tuple[int, ...], input_lens: tuple[int, ...], max_num_seqs: int | None,
                 max_input_len: int | None) -> tuple[int, int]:
    """The servers' ``--max-num-seqs`` and the input length their ``--max-model-len`` fits (``max_model_len``): the
    call's highest concurrency and longest input, or ``--server-max-num-seqs`` / ``--server-max-input-len`` where
    given. Why the flags: a kept server is reused only where its ``vllm serve`` arguments are the same
    (``kept_servers``), so a chained call running a subset of the cells (only c=2, only 1024 in) booted again
    (2-4.5 minutes of a 10-minute device call); naming the widest call's shape on every call keeps one server shape
    for the whole chain. A value below the cells is refused (``PortableSpecError``, one line naming the fix): a
    server of fewer sequences would queue the client's requests, one of a shorter context would refuse its prompts."""
    for flag, given, axis, need in (("--server-max-num-seqs", max_num_seqs, "the largest --concurrency",
                                     max(concurrency)),
                                    ("--server-max-input-len", max_input_len, "the longest --input-len",
                                     max(input_lens))):
        if given is not None and given < need:
            raise PortableSpecError(f"{flag} {given} is below {axis}, {need}: pass {need} or more, or drop {flag} "
                                    f"(default: {axis})")
    return (max(concurrency) if max_num_seqs is None else max_num_seqs,
            max(input_lens) if max_input_len is None else max_input_len)
