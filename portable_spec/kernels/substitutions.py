"""What we substitute in vLLM's span (0.26.0, 0.28.0, 0.33.0), on which platforms, and why: one entry per replaced
object.

Each entry lists every vLLM module attribute that holds the object (a kernel imported with ``from ... import`` has
one binding site per importing module; a ``@triton.jit`` helper is looked up in its CALLER's module globals when the
caller compiles, so its binding sites are the modules whose kernels call it). Replacements are named lazily
("module:attr") so this table imports neither vLLM nor Triton. An entry with ``rewrites`` or ``unspecialize`` has no
replacement module: its substitute is derived from vLLM's own source (``derive.py``) by those named rewrites, each
changing exactly the given number of places, and with those integer parameters left unspecialized; a ``launcher``
("module:attr") then wraps the derived kernel.

Where vLLM's source differs across the version span, a rewrite's count is stated per version (``{"0.26.0": 2,
"0.28.0": 1}``: the newest key at or below the installed vLLM, as ``version_gate.pick`` reads it) and so are an entry's
binding sites (``targets_by_version``); ``Substitution.at(pick)`` resolves them, and a count other than the installed
version's still fails the derivation (a count of 0 states that a version has no such place).

CUDA's entries change no program, only how many variants Triton compiles: vLLM's spec-decode kernels specialize on
the batch (each integer argument as 1, a multiple of 16 or neither; DFlash's input kernel also on a tile size picked
from the longest query), so serving reaches up to 25 variants of one kernel, each a 0.3-0.5 s compile that the boot
warm-up (``worker.kernel_warmup``) pays so that no request does. Unspecialized, the same kernels need 1-2 variants each.
"""

from __future__ import annotations

import importlib
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from portable_spec.errors import PortableSpecError

_ATTN = "vllm.v1.attention.ops"
_SD = "vllm.v1.spec_decode"
_MRV2 = "vllm.v1.worker.gpu"
_AND = ("Triton 3.2 does not short-circuit a constexpr operand of 'and', so 'if FLAG and t:' compiles its body "
        "even when FLAG is False")
_BATCH = ("its batch-size arguments are specialized as 1 / multiple of 16 / other, one compile each; unspecialized "
          "they are plain loop bounds and row counts (no alignment depends on them), so one variant serves every "
          "batch")
_NO_ANN = ("MUSA's Triton fails on an annotated assignment ('AnnAssign' object has no attribute 'targets'; "
           "vllm-musa patches the same line)")


Pick = Callable[[Mapping[str, Any]], Any]
"""``version_gate.pick``: the value of a ``{version: value}`` mapping's newest key at or below the installed vLLM."""
Count = int | Mapping[str, int]
"""How many places a rewrite must change: one number on every vLLM of the span, or one per version."""


@dataclass(frozen=True)
class Substitution:
    """One replacement object, assigned on every vLLM module attribute (``"pkg.module.attr"``) in ``targets``."""

    name: str
    targets: tuple[str, ...]
    platforms: tuple[str, ...]
    reason: str
    replacement: str | None = None  # "module:attr", imported on install
    rewrites: tuple[tuple[str, Count], ...] = ()
    unspecialize: tuple[str, ...] = ()  # integer parameters Triton must not specialize on (derived entries)
    launcher: str | None = None  # "module:attr" called with the derived kernel; returns what vLLM's sites hold
    targets_by_version: Mapping[str, tuple[str, ...]] | None = None  # where the sites differ by version
    kept_when: tuple[tuple[str, str], ...] = ()
    """(``model_config`` flag, why): an engine with that flag on keeps vLLM's object here, where the substitute would
    fail what vLLM's compiles (our layer never stops an engine vLLM would run)."""

    def declines(self, vllm_config: Any) -> str | None:
        """Why this engine keeps vLLM's object instead (``kept_when``), or None: bind it."""
        model_config = getattr(vllm_config, "model_config", None)
        for flag, why in self.kept_when:
            if getattr(model_config, flag, False) is True:
                return f"{flag} is on: {why}"
        return None

    @property
    def by_version(self) -> bool:
        """Whether a count or the binding sites depend on the vLLM version (``at`` resolves them)."""
        return self.targets_by_version is not None or any(not isinstance(n, int) for _, n in self.rewrites)

    def at(self, pick: Pick | None) -> "Substitution":
        """This entry for the installed vLLM: counts and binding sites resolved by ``pick`` (``version_gate.pick``);
        an entry that states nothing per version is returned as it is."""
        if not self.by_version:
            return self
        if pick is None:
            raise PortableSpecError(f"kernel substitute {self.name} states its rewrite counts or binding sites per "
                                    "vLLM version: bind it with the version gate's pick")
        return dataclasses.replace(
            self, rewrites=tuple((name, n if isinstance(n, int) else pick(n)) for name, n in self.rewrites),
            targets=self.targets if self.targets_by_version is None else tuple(pick(self.targets_by_version)),
            targets_by_version=None)

    @property
    def derived(self) -> bool:
        return bool(self.rewrites or self.unspecialize)

    def load_replacement(self, original: Any = None) -> Any:
        """The replacement object (for a derived entry: derived from ``original``, vLLM's object)."""
        if self.derived:
            from portable_spec.kernels.derive import derive

            if self.by_version:
                raise PortableSpecError(f"kernel substitute {self.name}: resolve it for the installed vLLM first "
                                        "(Substitution.at)")
            kernel = derive(original, dict(self.rewrites), self.unspecialize)  # type: ignore[arg-type]
            return _load(self.launcher)(kernel) if self.launcher else kernel
        return _load(self.replacement or "")

    def describe_replacement(self) -> str:
        if not self.derived:
            return self.replacement or ""
        parts = [f"{name} x{n}" if isinstance(n, int)
                 else f"{name} " + ", ".join(f"x{c} from vLLM {v}" for v, c in n.items()) for name, n in self.rewrites]
        if self.unspecialize:
            parts.append(f"{', '.join(self.unspecialize)} unspecialized")
        text = "vLLM's source with " + "; ".join(parts)
        return f"{text}, launched by {self.launcher}" if self.launcher else text


def _load(qualname: str) -> Any:
    module, _, attr = qualname.partition(":")
    return getattr(importlib.import_module(module), attr)


def _batch_agnostic(kernel: str, modules: tuple[str, ...], params: tuple[str, ...], what: str,
                    launcher: str | None = None, also: str = "") -> Substitution:
    """CUDA: vLLM's spec-decode ``kernel`` (bound in ``modules``) with its batch-size ``params`` unspecialized (and
    launched by ``launcher``, a ``module:factory`` name, when given)."""
    return Substitution(name=f"{kernel}:batch_agnostic", targets=tuple(f"{_SD}.{m}.{kernel}" for m in modules),
                        platforms=("cuda",), reason=f"{_BATCH} (here: {what}){also}", unspecialize=params,
                        launcher=launcher)


def _one_tile(kernel: str, modules: tuple[str, ...], launcher: str, *, what: str, tile: str, variants: str,
              independent: str, also: str = "") -> Substitution:
    """CUDA: vLLM's spec-decode input ``kernel`` (bound in ``modules``) with its token count unspecialized, launched
    at one tile size by ``fixed_tile``'s ``launcher`` (vLLM picks the tile, ``tile``, from the longest query)."""
    return Substitution(
        name=f"{kernel}:one_tile", targets=tuple(f"{_SD}.{m}.{kernel}" for m in modules), platforms=("cuda",),
        reason=(f"{what} specializes on the step's token count and on a tile size vLLM picks from the longest query "
                f"({tile}): up to {variants}. {independent}, so one tile size over a finer grid writes the same "
                f"outputs{also}"),
        unspecialize=("total_input_tokens",), launcher=f"portable_spec.kernels.fixed_tile:{launcher}")


def _new_in_028(name: str, module: str, *, reason: str, rewrites: tuple[tuple[str, Count], ...],
                kept_when: tuple[tuple[str, str], ...] = ()) -> Substitution:
    """MUSA: vLLM's ``name``, derived by ``rewrites``, bound as ``vllm.v1.worker.gpu.<module>.<name>`` from vLLM
    0.28.0 on; 0.26.0 has no such object, so the entry binds nothing there."""
    sites = {"0.26.0": (), "0.28.0": (f"{_MRV2}.{module}.{name}",)}
    return Substitution(name=name, targets=(), targets_by_version=sites, platforms=("musa",), reason=reason,
                        rewrites=rewrites, kept_when=kept_when)


SUBSTITUTIONS: tuple[Substitution, ...] = (
    Substitution(
        name="eagle_prepare_next_token_padded_kernel",
        targets=(
            "vllm.v1.spec_decode.utils.eagle_prepare_next_token_padded_kernel",
            "vllm.v1.spec_decode.llm_base_proposer.eagle_prepare_next_token_padded_kernel",
        ),
        platforms=("musa",),
        reason=("vLLM 0.26.0 assigns valid_count a uint32 in one branch and tl.sum(bool) in the other; "
                "MUSA's Triton 3.2 rejects it ('mismatched type for valid_count')"),
        replacement="portable_spec.kernels.eagle_prepare_next_token:eagle_prepare_next_token_padded_kernel",
        targets_by_version={"0.26.0": ("vllm.v1.spec_decode.utils.eagle_prepare_next_token_padded_kernel",
                                       "vllm.v1.spec_decode.llm_base_proposer.eagle_prepare_next_token_padded_kernel"),
                            # 0.33 launches it through a dispatcher that captured it at import (its `kernel`)
                            "0.33.0": ("vllm.v1.spec_decode.utils.eagle_prepare_next_token_padded_kernel",
                                       "vllm.v1.spec_decode.utils._eagle_prepare_next_token_padded.kernel")},
    ),
    Substitution(
        name="find_seq_idx",
        targets=(f"{_ATTN}.triton_attention_helpers.find_seq_idx", f"{_ATTN}.triton_unified_attention.find_seq_idx",
                 f"{_ATTN}.triton_unified_attention_diffkv.find_seq_idx"),
        platforms=("musa",),
        reason=f"TRITON_ATTN's sequence lookup declares 'left: tl.int32 = 0'; {_NO_ANN}",
        rewrites=(("unannotate-assignments", 1),),
    ),
    Substitution(
        name="compute_tile_loop_bounds",
        targets=tuple(f"{_ATTN}.{m}.compute_tile_loop_bounds" for m in (
            "triton_attention_helpers", "triton_unified_attention", "triton_unified_attention_diffkv",
            "int4_per_token_head")),
        platforms=("musa",),
        reason=("TRITON_ATTN's tile-loop bounds test 'USE_MM_PREFIX or USE_PER_SEQ_CAUSAL or (not USE_CAUSAL)'; "
                "Triton 3.2 refuses boolean chains of more than two operands"),
        rewrites=(("split-boolean-chains", 1),),
    ),
    *(Substitution(
        name=helper,
        targets=(f"{_ATTN}.triton_unified_attention.{helper}",),
        platforms=("musa",),
        reason=("calls tl.make_tensor_descriptor, which Triton 3.2 lacks; 3.2 resolves it while hashing the kernel "
                "even with tensor descriptors off, so kernel_unified_attention does not compile"),
        replacement=f"portable_spec.kernels.attention_td_stubs:{helper}",
    ) for helper in ("_load_q_td", "_load_kv_tile_td", "_store_output_td")),
    Substitution(
        name="kernel_unified_attention",
        targets=(f"{_ATTN}.triton_unified_attention.kernel_unified_attention",),
        platforms=("musa",),
        reason=("declares 'stride_ks_blk: int | None = None' (6 such parameters): Triton 3.2 fails evaluating the "
                f"annotation; {_NO_ANN}"),
        rewrites=(("unannotate-parameters", 6),),
    ),
    # ---------------------------------------------------------------- Model Runner V2 (vllm/v1/worker/gpu/)
    Substitution(
        name="_load_ptr",
        targets=(f"{_MRV2}.buffer_utils._load_ptr", f"{_MRV2}.block_table._load_ptr"),
        platforms=("musa",),
        reason=("MRV2's block-table kernels (and the multi-group staged write) cast a table entry with "
                "tl.pointer_type(elem_dtype), elem_dtype a helper parameter: older front ends (MUSA's) refuse it "
                "('element_ty is a constexpr.'; vllm-musa patches the same lines)"),
        replacement="portable_spec.kernels.load_ptr:_load_ptr",
    ),
    Substitution(
        name="_penalties_kernel",
        targets=(f"{_MRV2}.sample.penalties._penalties_kernel",),
        platforms=("musa",),
        reason=("MRV2's penalties kernel tests 'use_rep_penalty or use_freq_penalty or use_pres_penalty'; Triton 3.2 "
                "refuses boolean chains of more than two operands (vllm-musa patches the same line)"),
        rewrites=(("split-boolean-chains", 1),),
    ),
    Substitution(
        name="tl_rand32",
        targets=(f"{_MRV2}.sample.gumbel.tl_rand32", f"{_MRV2}.spec_decode.rejection_sampler_utils.tl_rand32"),
        platforms=("musa",),
        reason=("MRV2's rejection kernel draws u = tl.rand(seed, position) with an int64 position: Triton 3.2's "
                "64-bit Philox returns a block of one there (a scalar in >= 3.3), so the branches that use u "
                "disagree in shape; drawing with the position's two 32-bit halves as Philox counter words gives "
                ">= 3.3's scalar and numbers for every position"),
        rewrites=(("rand-offsets-two-words", 1),),
    ),
    Substitution(
        name="tl_rand64",
        targets=(),
        targets_by_version={"0.26.0": (f"{_MRV2}.sample.gumbel.tl_rand64",), "0.33.0": ()},
        platforms=("musa",),
        reason=("MRV2's fp64 Gumbel noise (--use-fp64-gumbel) draws lo, hi = tl.randint4x(seed, offset) and "
                "bitcasts each to uint32: DFlash2's selector walk (vLLM 0.28.0) keys the draw with its int64 "
                "candidate ids, where Triton 3.2's 64-bit Philox returns 64-bit words ('Cannot bitcast data-type of "
                "size 64 to data-type of size 32', both backends); drawing with the offset's two 32-bit halves as "
                "Philox counter words gives >= 3.3's 32-bit words and numbers for every offset. Bound where the "
                "helper's callers look it up (the Gumbel module: vLLM's gumbel_noised_argmax and our derived one "
                "compile in its globals); vLLM 0.33.0 draws fp64 noise from a hash, with no Philox (nothing to bind)"),
        rewrites=(("rand-offsets-two-words", 1),),
    ),
    Substitution(
        name="_rejection_kernel",
        targets=(f"{_MRV2}.spec_decode.rejection_sampler_utils._rejection_kernel",),
        platforms=("musa",),
        reason=(f"MRV2's rejection kernel tests 'USE_BLOCK_VERIFICATION and not is_greedy': {_AND} (it loads "
                "through the None cumulative_log_p_ptr); vLLM 0.33.0's (FLy acceptance) also tests chains of "
                "three conditions, which Triton 3.2 refuses"),
        rewrites=(("short-circuit-constexpr-and", {"0.26.0": 2, "0.28.0": 1}),
                  ("split-boolean-chains", {"0.26.0": 0, "0.33.0": 3})),
    ),
    Substitution(
        name="_fill_logprob_token_ids_kernel",
        targets=(f"{_MRV2}.sample.logprob._fill_logprob_token_ids_kernel",),
        platforms=("musa",),
        reason=("MRV2's logprob token-id kernel (requests asking for logprobs) picks its source row pointer and mask "
                "in a run-time if/else and loads through them after it: Triton 3.2's AMD backend rejects that "
                "('operand #0 does not dominate this use') where its NVIDIA backend accepts it, so MUSA's own "
                "backend may too; selected with tl.where, the same values reach the load"),
        rewrites=(("branch-values-to-where", 1),),
    ),
    Substitution(
        name="_apply_write_kernel",
        targets=(f"{_MRV2}.buffer_utils._apply_write_kernel",),
        platforms=("musa",),
        reason=("MRV2's staged write (block tables, token ids, lengths, logit bias) reads where its content starts "
                "with 'tl.load(write_cu_lens_ptr + pid - 1) if pid > 0 else 0', a run-time conditional load: "
                "Triton 3.2's AMD backend rejects vLLM 0.33.0's kernel ('operand #1 does not dominate this use') "
                "where its NVIDIA backend accepts it, so MUSA's own backend may too; as a masked load the same "
                "value is read without a branch. 0.26.0 and 0.28.0 have the same line (their kernel loops over "
                "the content where 0.33.0 launches a second grid axis, and the AMD backend accepts it there): the "
                "substitute is bound on every version, the same rewrite once on each"),
        rewrites=(("guarded-load-to-masked-load", 1),),
    ),
    Substitution(
        name="_mulhilo32",
        targets=(),
        targets_by_version={"0.26.0": (), "0.33.0": (f"{_MRV2}.sample.watermark._mulhilo32",)},
        platforms=("musa",),
        reason=("vLLM 0.33.0's watermark Philox (MRV2's resample kernel calls it; watermarking off is a constexpr "
                "branch) multiplies with tl.mul(..., sanitize_overflow=False), which Triton 3.2 lacks: 3.2 fails "
                "on the name while it hashes the resample kernel's dependencies, so the kernel does not compile "
                "with watermarking on or off. Written as '*', it is 3.2's same wrapping multiply. Earlier vLLMs "
                "have no watermark module (nothing to bind)"),
        rewrites=(("mul-call-to-operator", 1),),
    ),
    _new_in_028(
        "_update_committed_marker_cache_kernel", "sample.thinking_budget",
        reason=("MRV2's thinking-budget marker scan (vLLM >= 0.28.0, requests with a thinking_token_budget) tests "
                "'scan_pos == 0 and last_start < 0 and last_end < 0' and loops while 'block_hi > 0 and "
                "last_start < 0 and last_end < 0'; Triton 3.2 refuses boolean chains of more than two operands. "
                "Earlier vLLMs have no thinking budget (nothing to bind)"),
        rewrites=(("split-boolean-chains", 2),)),
    _new_in_028(
        "gumbel_noised_argmax", "spec_decode.dflash2.speculator",
        reason=("DFlash2's selector walk (vLLM >= 0.28.0, _selector_walk_kernel, probabilistic drafting) inlines the "
                "Gumbel helper, whose two run-time branches on 'temp != 0.0' have no else (the division by the "
                "temperature; the noise draw and masked add): Triton 3.2's AMD backend rejects the kernel ('operand "
                "#0 does not dominate this use') where its NVIDIA backend accepts it, so MUSA's own backend may too. "
                "Selected with tl.where (the noise drawn unconditionally), each value is the branch's own. Bound in "
                "the selector walk's module only, where that kernel looks the helper up (the sampler's callers "
                "compile as shipped); earlier vLLMs have no DFlash2 (nothing to bind)"),
        rewrites=(("if-to-where", 2),)),
    Substitution(
        name="_topk_topp_kernel",
        targets=("vllm.v1.sample.ops.topk_topp_triton._topk_topp_kernel",),
        platforms=("musa",),
        reason=(f"the top-k/top-p sampler (V1's and MRV2's, batches of 8 or more) tests 'TOPP_ENABLED and ...': {_AND} "
                "and its conditional expression next to an if on the same condition trips MLIR's dominance check "
                "('operand #0 does not dominate this use'); it also divides uint32 counts by int constants, which "
                "older front ends (MUSA's) refuse (vllm-musa patches all three). Substituted, it compiles to vLLM's "
                "PTX on Triton 3.6"),
        rewrites=(("flip-integer-ternary", 1), ("unsigned-divisor", 4)),
        targets_by_version={"0.26.0": ("vllm.v1.sample.ops.topk_topp_triton._topk_topp_kernel",),
                            # 0.33 launches it through a dispatcher that captured it at import (its `kernel`)
                            "0.33.0": ("vllm.v1.sample.ops.topk_topp_triton._topk_topp_kernel",
                                       "vllm.v1.sample.ops.topk_topp_triton._topk_topp.kernel")},
    ),
    _batch_agnostic("eagle_prepare_next_token_padded_kernel", ("utils", "llm_base_proposer"),
                    ("num_sampled_tokens_per_req", "num_reqs", "stride_sampled_token_ids"),
                    "requests, tokens per request and the row stride",
                    launcher="portable_spec.kernels.fixed_tile:min_block_launcher",
                    also="; its row tile, 1 or the power of two of 1+K, is launched at 16 lanes or more (masked lanes "
                         "read no token): one variant with and without drafts"),
    _batch_agnostic("eagle_prepare_inputs_padded_kernel", ("utils", "llm_base_proposer"), ("num_reqs",), "requests"),
    _batch_agnostic("eagle_step_slot_mapping_metadata_kernel", ("utils",), ("batch_size",),
                    "requests in a chain step"),
    _one_tile("copy_and_expand_dflash_inputs_kernel", ("utils", "dflash"), "one_tile_launcher",
              what="DFlash's input kernel", tile="BLOCK_SIZE 16..256", variants="25 variants",
              independent="Every element is computed independently (masked by its own index)",
              also="; steps without rejected counts pass zeros (the flag only chooses between reading them and 0)"),
    _one_tile("copy_and_expand_eagle_inputs_kernel", ("utils", "llm_base_proposer"), "one_tile_tokens_launcher",
              what=("the input kernel of drafters that add slots per request (the separate draft model, parallel "
                    "drafting)"),
              tile="BLOCK_SIZE_TOKENS up to 256",
              variants="24 variants, the long ones first reached by a long prompt after boot",
              independent="Every slot is computed and stored on its own (masked by its index)"),
)
