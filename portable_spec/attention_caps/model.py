"""The vocabulary of the capability table: head-size and block-size rules, claims that depend on the host, and one
row per (platform, backend).

Pure Python on purpose (no torch, no vLLM): ``portable-spec caps`` prints the table on any machine, and the MUSA
platform selects a backend from it before vLLM has chosen anything.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Union

# vLLM's AttentionCGSupport members, weakest first (v1/attention/backend.py:600).
GRAPH_LEVELS = ("NEVER", "UNIFORM_SINGLE_TOKEN_DECODE", "UNIFORM_BATCH", "ALWAYS")
MM_PREFIX_TEXT_ONLY = "text-only"
"""mm-prefix value for a backend whose class says yes but whose kernel was validated with causal/window masks only."""
DTYPES = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class HostFacts:
    """What the host resolved at vLLM import time; the device-dependent claims of a row are functions of these."""

    fa_version: int | None = None
    """What vLLM's ``get_flash_attn_version()`` resolves (3 on H100 with the FA3 kernels, None without a GPU)."""
    fa4_available: bool = False
    """vLLM's ``is_fa_version_supported(4)``: the FA4 sources are present and the device family is 9.x/10.x/11.x."""
    capability: tuple[int, int] | None = None
    trtllm_attention: bool = False
    """FlashInfer's trtllm-gen attention is usable (SM100 family), per ``vllm.utils.flashinfer``."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _major(facts: HostFacts) -> int | None:
    return facts.capability[0] if facts.capability else None


# Named host conditions a claim may depend on: name -> (meaning, predicate).
CONDITIONS: dict[str, tuple[str, Callable[[HostFacts], bool]]] = {
    "fa>=3": ("vLLM resolves FlashAttention 3 or 4 on this host", lambda f: f.fa_version in (3, 4)),
    "fa==3": ("vLLM resolves FlashAttention 3 on this host", lambda f: f.fa_version == 3),
    "fa3+sm90": ("FlashAttention 3 on an SM90 (Hopper) device", lambda f: f.fa_version == 3 and _major(f) == 9),
    "fa4-available": ("the FA4 (CuTe DSL) kernels are present and the device is SM90/SM100/SM110",
                      lambda f: f.fa4_available),
    "sm100+trtllm": ("an SM100-family device with FlashInfer's trtllm-gen kernels",
                     lambda f: _major(f) == 10 and f.trtllm_attention),
    "sm80/90/120": ("an SM80-, SM90- or SM120-family device (FlashInfer's FA2 path: vLLM >= 0.33 writes an NVFP4 KV "
                    "cache for it there)", lambda f: _major(f) in (8, 9, 12)),
}


@dataclass(frozen=True)
class Cond:
    """A claim whose value depends on the host: ``then`` where condition ``when`` holds, else ``default``."""

    default: Any
    when: str
    then: Any

    def __post_init__(self) -> None:
        if self.when not in CONDITIONS:
            raise ValueError(f"unknown condition {self.when!r}; known: {', '.join(CONDITIONS)}")

    def resolve(self, facts: HostFacts) -> Any:
        """The value for ``facts``; a ``Cond`` inside (a claim with two host conditions) is resolved in turn."""
        value = self.then if CONDITIONS[self.when][1](facts) else self.default
        return value.resolve(facts) if isinstance(value, Cond) else value


@dataclass(frozen=True)
class HeadSizes:
    """Which head sizes a backend accepts: an explicit list, or a rule (minimum, maximum, multiple_of)."""

    values: tuple[int, ...] = ()
    minimum: int | None = None
    maximum: int | None = None
    multiple_of: int | None = None

    def accepts(self, head_size: int) -> bool:
        if head_size <= 0:
            return False
        if self.values:
            return head_size in self.values
        if self.minimum is not None and head_size < self.minimum:
            return False
        if self.maximum is not None and head_size > self.maximum:
            return False
        return self.multiple_of is None or head_size % self.multiple_of == 0

    def describe(self) -> str:
        if self.values:
            return ", ".join(map(str, self.values))
        parts = []
        if self.multiple_of:
            parts.append(f"multiple of {self.multiple_of}")
        if self.minimum is not None:
            parts.append(f">= {self.minimum}")
        if self.maximum is not None:
            parts.append(f"<= {self.maximum}")
        return ", ".join(parts) or "any"

    def samples(self, upper: int = 512) -> list[int]:
        """The head sizes worth running: the listed ones, or common model sizes the rule accepts, up to ``upper``."""
        if self.values:
            return [h for h in self.values if h <= upper]
        common = (32, 64, 80, 128, 256, 512)  # both ends, a non-power of two, 256 and 512
        return [h for h in common if h <= upper and self.accepts(h)]

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.describe(), **{k: v for k, v in dataclasses.asdict(self).items() if v not in ((), None)}}


@dataclass(frozen=True)
class BlockSizes:
    """Kernel block sizes as vLLM's ``get_supported_kernel_block_sizes()`` lists them (ints and ``MultipleOf``).

    vLLM's ``supports_block_size`` accepts any block size that is a multiple of one entry (hybrid blocks), and so
    does ``accepts``.
    """

    values: tuple[int, ...] = ()
    multiple_of: int | None = None

    def accepts(self, block_size: int) -> bool:
        bases = list(self.values) + ([self.multiple_of] if self.multiple_of else [])
        return not bases or any(block_size % b == 0 for b in bases)

    def describe(self) -> str:
        parts = [str(v) for v in self.values]
        if self.multiple_of:
            parts.append(f"multiple of {self.multiple_of}")
        return ", ".join(parts) or "any"

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.describe(), **{k: v for k, v in dataclasses.asdict(self).items() if v not in ((), None)}}


Claim = Union[Any, Cond]

# The claim fields of a row, in the order the CLI prints them.
CLAIM_FIELDS = ("head_sizes", "dtypes", "kv_cache_dtypes", "kernel_block_sizes", "non_causal", "mm_prefix", "sinks",
                "batch_invariance", "per_head_quant_scales", "graph_support")


@dataclass(frozen=True)
class BackendCaps:
    """One row: what ``backend`` on ``platform`` claims, and where that claim comes from."""

    platform: str
    backend: str
    """vLLM's ``AttentionBackendEnum`` member name."""
    class_path: str | None
    """The class to hand to vLLM; None where the class lives in a package this project does not ship (MUSA FA)."""
    head_sizes: HeadSizes | Cond
    dtypes: tuple[str, ...] | Cond
    kv_cache_dtypes: tuple[str, ...] | Cond
    kernel_block_sizes: BlockSizes | Cond
    non_causal: bool | Cond
    mm_prefix: bool | str | Cond
    sinks: bool | Cond
    batch_invariance: bool | Cond
    per_head_quant_scales: bool | Cond
    graph_support: str | Cond
    source: str
    requires: tuple[str, ...] = ()
    """Python packages the kernels import; selection skips the row with "<pkg> not installed" when one is missing."""
    notes: tuple[str, ...] = field(default=())
    vendor_class: str | None = None
    """The class a vendor package registers over ``backend``'s ``AttentionBackendEnum`` member (vllm-musa's
    ``register_backend``): what vLLM runs for this row on that vendor's stack."""

    @property
    def key(self) -> str:
        return f"{self.platform}/{self.backend}"

    def device_dependent(self) -> list[str]:
        """Claims whose value depends on the host (``Cond``): only a device can check them."""
        return [name for name in CLAIM_FIELDS if isinstance(getattr(self, name), Cond)]

    def resolved(self, facts: HostFacts) -> "BackendCaps":
        """The row with every host-dependent claim decided for ``facts``."""
        changes = {name: getattr(self, name).resolve(facts) for name in self.device_dependent()}
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"platform": self.platform, "backend": self.backend, "class_path": self.class_path,
                               "vendor_class": self.vendor_class}
        for name in CLAIM_FIELDS:
            out[name] = claim_to_json(getattr(self, name))
        out.update(requires=list(self.requires), device_dependent=self.device_dependent(), source=self.source,
                   notes=list(self.notes))
        return out


def claim_to_json(value: Any) -> Any:
    if isinstance(value, Cond):
        return {"default": claim_to_json(value.default), "when": value.when,
                "when_means": CONDITIONS[value.when][0], "then": claim_to_json(value.then)}
    if isinstance(value, (HeadSizes, BlockSizes)):
        return value.to_dict()
    if isinstance(value, tuple):
        return list(value)
    return value


def describe_claim(value: Any) -> str:
    """One short human rendering of a claim value."""
    if isinstance(value, Cond):
        return f"{describe_claim(value.default)}; with {value.when}: {describe_claim(value.then)}"
    if isinstance(value, (HeadSizes, BlockSizes)):
        return value.describe()
    if isinstance(value, tuple):
        return ", ".join(value)
    if value is True:
        return "yes"
    if value is False:
        return "no"
    return str(value)
