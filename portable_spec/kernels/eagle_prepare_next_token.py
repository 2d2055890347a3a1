"""``eagle_prepare_next_token_padded_kernel`` in the Triton subset MUSA's Triton 3.2 compiles.

vLLM 0.26.0's kernel (``vllm/v1/spec_decode/utils.py``) sets ``valid_count`` to a uint32 in the discarded branch and
to ``tl.sum(bool_mask)`` in the other, which MUSA's Triton rejects ("mismatched type for valid_count"). This kernel
has the same launch signature and results but is branch-free after the padding check: every value has one dtype
(int32 counts, ``tl.sum(mask.to(tl.int32))``), with no annotated assignments and no PDL/TMA intrinsics.

Semantics, per request row ``r < num_reqs`` (rows ``>= num_reqs`` are left untouched):
a sampled token is valid when it is not -1 and below ``vocab_size``; ``valid_sampled_tokens_count[r]`` is the number
of valid tokens among the first ``num_sampled_tokens_per_req`` (0 for a discarded request); ``next_token_ids[r]`` is
the valid token with the highest index, or the backup token when the request is discarded or none is valid.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from portable_spec.kernels.fixed_tile import next_pow2


@triton.jit
def eagle_prepare_next_token_padded_kernel(
    sampled_token_ids_ptr,  # [num_reqs, num_sampled_tokens_per_req]
    discard_request_mask_ptr,  # [num_reqs] bool
    backup_next_token_ids_ptr,  # [num_reqs]
    next_token_ids_ptr,  # [num_reqs] (output)
    valid_sampled_tokens_count_ptr,  # [num_reqs] (output)
    vocab_size,
    num_sampled_tokens_per_req,  # num_spec_tokens + 1
    num_reqs,
    stride_sampled_token_ids,  # stride of dim 0
    BLOCK_SIZE_TOKENS: tl.constexpr,  # power of 2 >= num_sampled_tokens_per_req
):
    req_idx = tl.program_id(axis=0)
    if req_idx >= num_reqs:
        return

    is_discarded = tl.load(discard_request_mask_ptr + req_idx).to(tl.int32) != 0
    backup_token = tl.load(backup_next_token_ids_ptr + req_idx)

    token_offs = tl.arange(0, BLOCK_SIZE_TOKENS)
    token_mask = token_offs < num_sampled_tokens_per_req
    row_ptr = sampled_token_ids_ptr + req_idx * stride_sampled_token_ids
    token_ids = tl.load(row_ptr + token_offs, mask=token_mask, other=-1)

    # Rejected tokens are -1; valid tokens are in [0, vocab_size).
    is_valid = (token_ids != -1) & (token_ids < vocab_size) & token_mask
    num_valid = tl.sum(is_valid.to(tl.int32), axis=0)
    last_valid_index = tl.max(tl.where(is_valid, token_offs, -1), axis=0)
    last_valid_token = tl.sum(tl.where(token_offs == last_valid_index, token_ids, 0), axis=0)

    use_backup = is_discarded | (num_valid == 0)
    next_token = tl.where(use_backup, backup_token, last_valid_token)
    valid_count = tl.where(is_discarded, 0, num_valid)
    tl.store(next_token_ids_ptr + req_idx, next_token)
    tl.store(valid_sampled_tokens_count_ptr + req_idx, valid_count)


def prepare_next_token_padded_reference(sampled_token_ids: torch.Tensor, discard_request_mask: torch.Tensor,
                                        backup_next_token_ids: torch.Tensor, vocab_size: int,
                                        num_sampled_tokens_per_req: int | None = None,
                                        num_reqs: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Pure-torch statement of the kernel: ``(next_token_ids, valid_sampled_tokens_count)`` (int32) for the first
    ``num_reqs`` rows, reading the first ``num_sampled_tokens_per_req`` columns (defaults: the whole tensor)."""
    rows = sampled_token_ids.shape[0] if num_reqs is None else num_reqs
    cols = sampled_token_ids.shape[1] if num_sampled_tokens_per_req is None else num_sampled_tokens_per_req
    tokens = sampled_token_ids[:rows, :cols].to(torch.int64)
    discarded = discard_request_mask[:rows].to(torch.bool)
    backup = backup_next_token_ids[:rows].to(torch.int64)

    valid = (tokens != -1) & (tokens < vocab_size)
    num_valid = valid.sum(dim=1)
    offs = torch.arange(cols, device=tokens.device).expand_as(tokens)
    if cols == 0:
        last_token = torch.zeros_like(backup)
    else:
        last_index = torch.where(valid, offs, torch.full_like(offs, -1)).amax(dim=1)
        last_token = tokens.gather(1, last_index.clamp(min=0).unsqueeze(1)).squeeze(1)
    use_backup = discarded | (num_valid == 0)
    next_ids = torch.where(use_backup, backup, last_token)
    counts = torch.where(discarded, torch.zeros_like(num_valid), num_valid)
    return next_ids.to(torch.int32), counts.to(torch.int32)


def launch(kernel, sampled_token_ids: torch.Tensor, discard_request_mask: torch.Tensor,
           backup_next_token_ids: torch.Tensor, vocab_size: int, *, grid_rows: int | None = None,
           num_reqs: int | None = None, num_sampled_tokens_per_req: int | None = None,
           next_token_ids: torch.Tensor | None = None,
           valid_sampled_tokens_count: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch ``kernel`` (ours or vLLM's: same signature) the way ``prepare_next_token_ids_padded`` does.

    ``grid_rows`` > ``num_reqs`` launches padding programs; pass pre-filled outputs to see that they stay untouched."""
    batch, width = sampled_token_ids.shape
    rows = batch if num_reqs is None else num_reqs
    cols = width if num_sampled_tokens_per_req is None else num_sampled_tokens_per_req
    if next_token_ids is None:
        next_token_ids = torch.empty(batch, dtype=torch.int32, device=sampled_token_ids.device)
    if valid_sampled_tokens_count is None:
        valid_sampled_tokens_count = next_token_ids.new_empty(batch)
    kernel[(batch if grid_rows is None else grid_rows,)](
        sampled_token_ids, discard_request_mask, backup_next_token_ids, next_token_ids, valid_sampled_tokens_count,
        vocab_size, cols, rows, sampled_token_ids.stride(0), BLOCK_SIZE_TOKENS=next_pow2(cols))
    return next_token_ids, valid_sampled_tokens_count
