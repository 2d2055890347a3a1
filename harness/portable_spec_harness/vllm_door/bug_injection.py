"""Known drafter bugs the e2e harness injects into our FULL drafter, to show that the exactness checks catch each
(issue 21: "show the oracle bites"). ``PORTABLE_SPEC_INJECT_BUG`` (``envs.inject_bug``) names one; the e2e child of
our variant installs it before the engine boots, in its own process (TP=1: the worker is in that process), and
nothing else ever does: with the variable unset nothing is installed, and no product module imports this one.

Each bug imitates a mistake at the place it would naturally be made in our drafter, from the outside: one function
or method swapped for a wrapper through ``patch.overrides.overridden`` (scoped, reversible, refuses a missing
attribute, so a renamed hook point fails loudly instead of injecting nothing), restored when the block ends. Methods
vLLM's proposer defines are wrapped on vLLM's class and act only on our proposers. Every wrapper counts the calls
it perturbed (``Injection.fired``): a bug that never fired proves nothing, and the e2e check says so. A wrapper that
runs while our graph runner records a graph (``DraftGraphRunner.capturing``) is baked into that graph and never runs
again from Python: it marks the step kind as holding the bug, and every later replay of that kind counts as a fire.

- ``position_off_by_one`` (``spec_decode.fused_chain``: the chain's first positions, which the fused first pass
  leaves in ``chain_positions`` and the unfused path takes from the sampled rows): the chain starts one position
  too far, so every chain step's RoPE position and KV slot are off by one. Drafts 1..K-1 change wherever the draft
  attends (attention-sensitive heads).
- ``wrong_slot`` (``spec_decode.draft_prep``/upstream's first pass: the target's slot mapping copied into the
  drafter's persistent slot buffer): the batch's last request's first-pass rows get the padding slot, as a padding
  fill off by one request would leave them, so its draft K/V of this pass is never written and its queries read
  stale slots. Draft 0 of that request changes on attention-sensitive heads.
- ``stale_seq_lens`` (the chain steps' ``seq_lens``, advanced in place by vLLM's step kernel): each chain step
  reads the ``seq_lens`` of the step before, as a graph reading a buffer the kernel does not update would, so a
  draft does not attend to its own K/V. Drafts 1..K-1 change on attention-sensitive heads.
- ``wrong_num_computed`` (``spec_decode.draft_prep.hand_off_counts``: the valid-token counts vLLM's
  ``_copy_valid_sampled_token_count`` hands to the runner's next step): the first request's count is handed off one
  too high, so the runner's next step computes its ``num_computed_tokens`` (positions, slots, ``seq_lens``) one
  too far. Its drafts go to another position (the per-step oracle's position stamp); a context-sensitive target's
  greedy output changes.
- ``draft_position_off_by_one`` (the separate draft model's chain steps, ``spec_decode.draft_model``'s
  ``_classify``: the positions buffer a chain graph reads, after vLLM's step advanced it): each chain step our
  draft-model drafter replays runs one position ahead, so its RoPE positions are off by one while its KV slots stay
  right. Drafts 1..K-1 change on a position-sensitive draft (the zoo's ``llama_ctx_draft_model``). A step that
  replays no graph (vLLM's path) is untouched.
- ``d2t_unmapped`` (``spec_decode.fused_chain``'s call of ``draft_sample.greedy_draft_tokens`` where the fused graphs
  take the d2t gather): the graphs sample the EAGLE-3 draft vocabulary's argmax and never map it, so every draft is a
  draft id, not a target id. Fires only on a head with a draft vocabulary (the zoo's ``llama_eagle3`` ``d2t``), and
  only at capture (inside the FIRST_FUSED / CHAIN_FUSED graphs): it counts through those graphs' replays.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from portable_spec.vllm_adapter.patch.overrides import overridden

BASE_PROPOSER = "vllm.v1.spec_decode.llm_base_proposer:SpecDecodeBaseProposer"
FUSED_CHAIN = "portable_spec.vllm_adapter.spec_decode.fused_chain:FusedChainMixin"
FUSED_CHAIN_MODULE = "portable_spec.vllm_adapter.spec_decode.fused_chain"
DRAFT_PREP = "portable_spec.vllm_adapter.spec_decode.draft_prep"
DRAFT_MODEL = "portable_spec.vllm_adapter.spec_decode.draft_model:FullGraphDraftModelProposer"
PADDING_SLOT = -1  # vLLM's PADDING_SLOT_ID: the KV-cache write skips the row


def _ours(proposer: Any) -> bool:
    from portable_spec.vllm_adapter.spec_decode.proposer import DrafterGraphMixin

    return isinstance(proposer, DrafterGraphMixin)


def _position_off_by_one(owner: Any, fired: Callable[[], None]) -> contextlib.AbstractContextManager:
    original = vars(owner)["_run_fused_chain"]

    @functools.wraps(original)
    def _run_fused_chain(self: Any, key: Any, batch: int, positions: Any, cad: Any, num_rejected: Any) -> Any:
        fired()
        return original(self, key, batch, positions + 1, cad, num_rejected)

    return overridden(owner, "_run_fused_chain", _run_fused_chain)


def _wrong_slot(owner: Any, fired: Callable[[], None]) -> contextlib.AbstractContextManager:
    original = vars(owner)["_get_slot_mapping"]

    @functools.wraps(original)
    def _get_slot_mapping(self: Any, num_tokens: int, slot_mapping: Any = None) -> Any:
        out = original(self, num_tokens, slot_mapping)
        if slot_mapping is not None and slot_mapping.shape[0] > 0 and _ours(self):
            real = slot_mapping.shape[0]  # a first pass: the target's slots were just copied in
            self._slot_mapping_buffer[real - min(self.verify_len, real): real].fill_(PADDING_SLOT)
            fired()
        return out

    return overridden(owner, "_get_slot_mapping", _get_slot_mapping)


def _stale_seq_lens(owner: Any, fired: Callable[[], None]) -> contextlib.AbstractContextManager:
    original = vars(owner)["_update_positions_dependent_metadata"]

    @functools.wraps(original)
    def _update_positions_dependent_metadata(self: Any, positions: Any, common_attn_metadata: Any, *args: Any,
                                             **kwargs: Any) -> Any:
        if not _ours(self):
            return original(self, positions, common_attn_metadata, *args, **kwargs)
        before = common_attn_metadata.seq_lens.clone()
        out = original(self, positions, common_attn_metadata, *args, **kwargs)
        common_attn_metadata.seq_lens.copy_(before)
        fired()
        return out

    return overridden(owner, "_update_positions_dependent_metadata", _update_positions_dependent_metadata)


def _draft_position_off_by_one(owner: Any, fired: Callable[[], None]) -> contextlib.AbstractContextManager:
    original = vars(owner)["_classify"]

    @functools.wraps(original)
    def _classify(self: Any, cad: Any, draft_index: int) -> Any:
        key = original(self, cad, draft_index)
        if draft_index > 0 and key is not None:  # a chain step our graph replays: its positions are already set
            self.positions[: cad.num_reqs] += 1
            fired()
        return key

    return overridden(owner, "_classify", _classify)


def _wrong_num_computed(owner: Any, fired: Callable[[], None]) -> contextlib.AbstractContextManager:
    original = vars(owner)["hand_off_counts"]

    @functools.wraps(original)
    def hand_off_counts(runner: Any, next_token_ids: Any, valid_counts: Any) -> None:
        counts = valid_counts.clone()
        counts[:1] += 1
        fired()
        return original(runner, next_token_ids, counts)

    return overridden(owner, "hand_off_counts", hand_off_counts)


def _d2t_unmapped(owner: Any, fired: Callable[..., None]) -> contextlib.AbstractContextManager:
    from portable_spec.vllm_adapter.spec_decode.draft_sample import GATHER

    original = vars(owner)["greedy_draft_tokens"]

    @functools.wraps(original)
    def greedy_draft_tokens(proposer: Any, mode: str, hidden_states: Any) -> Any:
        if mode != GATHER:
            return original(proposer, mode, hidden_states)
        fired(proposer)
        model = proposer.model
        return model.logits_processor(model.lm_head, hidden_states).argmax(dim=-1)

    return overridden(owner, "greedy_draft_tokens", greedy_draft_tokens)


@dataclass(frozen=True)
class InjectedBug:
    name: str
    owner: str
    """``module`` or ``module:Class`` whose attribute ``attr`` is swapped (it must define ``attr`` itself)."""
    attr: str
    install: Callable[[Any, Callable[..., None]], contextlib.AbstractContextManager]
    """``install(owner, fired)``: the scoped override of ``owner.attr`` (``fired()`` counts a perturbed call;
    ``fired(proposer)`` also sees whether the call was recorded into a graph ``proposer`` is capturing)."""
    imitates: str
    """The place in our drafter the bug would naturally be."""
    should_fail: str
    """Which exactness checks should fail, on which pairs."""


BUGS: dict[str, InjectedBug] = {bug.name: bug for bug in (
    InjectedBug("position_off_by_one", FUSED_CHAIN, "_run_fused_chain", _position_off_by_one,
                "fused_chain: the chain's first positions (chain_positions / the sampled rows' positions)",
                "drafts_equal_eager_per_step and acceptance_counts_equal_eager on attention-sensitive heads"),
    InjectedBug("wrong_slot", BASE_PROPOSER, "_get_slot_mapping", _wrong_slot,
                "draft_prep / upstream first pass: the target's slots copied into the drafter's slot buffer",
                "drafts_equal_eager_per_step and acceptance_counts_equal_eager on attention-sensitive heads"),
    InjectedBug("stale_seq_lens", BASE_PROPOSER, "_update_positions_dependent_metadata", _stale_seq_lens,
                "fused_chain: the seq_lens each chain step's graph reads",
                "drafts_equal_eager_per_step and acceptance_counts_equal_eager on attention-sensitive heads"),
    InjectedBug("wrong_num_computed", DRAFT_PREP, "hand_off_counts", _wrong_num_computed,
                "draft_prep.hand_off_counts: the count hand-off to the runner's next step",
                "drafts_equal_eager_per_step (position stamps) on every pair; greedy_equals_nospec on "
                "context-sensitive targets"),
    InjectedBug("draft_position_off_by_one", DRAFT_MODEL, "_classify", _draft_position_off_by_one,
                "draft_model: the positions buffer our draft-model chain graphs read",
                "drafts_equal_eager_per_step and acceptance_counts_equal_eager on the context draft-model pair "
                "(the ctx_draft_model part)"),
    InjectedBug("d2t_unmapped", FUSED_CHAIN_MODULE, "greedy_draft_tokens", _d2t_unmapped,
                "fused_chain: the d2t gather after the draft vocabulary's argmax",
                "drafts_equal_eager_per_step and acceptance_counts_equal_eager on an EAGLE-3 head with a draft "
                "vocabulary (the eagle3_d2t part)"),
)}


def resolve_owner(spec: str) -> Any:
    module, _, qualname = spec.partition(":")
    owner = importlib.import_module(module)
    for part in filter(None, qualname.split(".")):
        owner = getattr(owner, part)
    return owner


@dataclass
class Injection:
    name: str
    fired: Counter
    """Calls the wrapper perturbed from Python, by bug name; ``start_counting()`` after boot counts only the
    requests'."""
    baked: dict[Any, set[str]] = field(default_factory=dict)
    """Graph runner -> the step kinds whose graphs it captured with the bug in them."""
    replays_before: dict[Any, Counter] = field(default_factory=dict)
    """Each baked runner's replay counts when counting started."""

    def record(self, proposer: Any = None) -> None:
        """One perturbed call: baked into the graph being captured by ``proposer``'s runner, or run from Python."""
        runner = getattr(proposer, "graph_runner", None)
        key = getattr(runner, "capturing", None)
        if key is None:
            self.fired[self.name] += 1
            return
        self.baked.setdefault(runner, set()).add(key.step)

    def start_counting(self) -> None:
        """Forget the boot's fires (warm-ups, captures' dummy runs); graphs keep the bug they were captured with."""
        self.fired.clear()
        self.replays_before = {runner: Counter(runner.replays) for runner in self.baked}

    def baked_replays(self) -> Counter:
        """Replays, since counting started, of graphs captured with the bug in them, by step kind."""
        out: Counter = Counter()
        for runner, kinds in self.baked.items():
            before = self.replays_before.get(runner, Counter())
            for kind in kinds:
                out[kind] += runner.replays[kind] - before[kind]
        return +out

    def report(self) -> dict[str, Any]:
        replayed = self.baked_replays()
        fired = Counter(self.fired)
        fired[self.name] += sum(replayed.values())
        return {"name": self.name, "fired": dict(+fired), "replays_with_bug": dict(replayed)}


@contextlib.contextmanager
def injected(name: str | None) -> Iterator[Injection | None]:
    """Install bug ``name`` for the block (None: nothing installed, yields None); restored on exit, also on error."""
    if not name:
        yield None
        return
    if name not in BUGS:
        raise ValueError(f"unknown injected bug {name!r}; one of {', '.join(BUGS)}")
    bug = BUGS[name]
    owner = resolve_owner(bug.owner)
    if bug.attr not in vars(owner):
        raise AttributeError(f"{bug.owner} does not define {bug.attr}: the hook point moved; update {__name__}")
    injection = Injection(name, Counter())
    with bug.install(owner, injection.record):
        yield injection
