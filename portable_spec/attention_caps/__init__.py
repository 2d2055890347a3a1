"""Attention-backend capability declarations: one table (platform x backend), selection from it, and the record of
which claims a real device has verified. Pure Python; nothing here imports vLLM."""

from portable_spec.attention_caps.lookup import get_row, rows
from portable_spec.attention_caps.model import (
    CLAIM_FIELDS,
    CONDITIONS,
    GRAPH_LEVELS,
    MM_PREFIX_TEXT_ONLY,
    BackendCaps,
    BlockSizes,
    Cond,
    HeadSizes,
    HostFacts,
)
from portable_spec.attention_caps.selection import (
    rejection_reasons,
    select_backend,
    select_for_vllm,
    selector_kwargs,
)
from portable_spec.attention_caps.table import DEVICES_HERE, PLATFORMS, TABLE, VLLM_VERSION
from portable_spec.attention_caps.verification import verification_label

__all__ = ["BackendCaps", "BlockSizes", "CLAIM_FIELDS", "CONDITIONS", "Cond", "DEVICES_HERE", "GRAPH_LEVELS",
           "HeadSizes", "HostFacts", "MM_PREFIX_TEXT_ONLY", "PLATFORMS", "TABLE", "VLLM_VERSION", "get_row",
           "rejection_reasons", "rows", "select_backend", "select_for_vllm", "selector_kwargs",
           "verification_label"]
