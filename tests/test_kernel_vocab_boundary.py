"""MUSA's next-token substitute at the vocabulary's edge: a sampled id is valid only below ``vocab_size``, so ids
``vocab_size - 1``, ``vocab_size`` and ``vocab_size + 1`` must fall on the sides vLLM's own kernel puts them.

Why a test of its own: rejection-sampler rows rarely hold an id exactly at ``vocab_size`` (random ids almost never
land on it), so ``<`` turned ``<=`` passes every random comparison. Here every row is drawn from the boundary ids,
and ours, vLLM's kernel (run by the Triton interpreter) and the torch reference must agree row for row."""

from __future__ import annotations

import itertools

import torch
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from interpreted_vllm import spec_decode_utils
from portable_spec.kernels import eagle_prepare_next_token as ours


def boundary_rows(vocab: int, width: int) -> torch.Tensor:
    """Every row of ``width`` ids over -1 (rejected), 0, and vocab - 1, vocab, vocab + 1."""
    ids = (-1, 0, vocab - 1, vocab, vocab + 1)
    return torch.tensor(list(itertools.product(ids, repeat=width)), dtype=torch.int32)


@settings(max_examples=6, deadline=None, phases=(Phase.explicit, Phase.generate))  # no shrinking: each
# example is interpreter launches, and any failing row set already names the bug
@given(vocab=st.integers(2, 70000), width=st.integers(1, 3), discard_every=st.integers(2, 7))
def test_the_substitute_puts_each_id_at_the_vocabulary_edge_where_vllm_does(vocab, width, discard_every):
    upstream = spec_decode_utils().eagle_prepare_next_token_padded_kernel
    # Every row twice, a table apart: with one copy, every discard_every-th row discarded can take each row holding
    # vocab_size (width 1, discard_every 3: the one such row, row 3), leaving nothing at the edge to compare. Both
    # copies of row i go only where discard_every divides i and 5**width, i.e. 5 and i a multiple of 5, while the
    # row ending in vocab_size sits at i = 3 (mod 5).
    sampled = boundary_rows(vocab, width).repeat(2, 1)
    rows = sampled.shape[0]
    discard = torch.arange(rows) % discard_every == 0
    backup = torch.full((rows,), 7, dtype=torch.int32)
    mine = ours.launch(ours.eagle_prepare_next_token_padded_kernel, sampled, discard, backup, vocab)
    theirs = ours.launch(upstream, sampled, discard, backup, vocab)
    reference = ours.prepare_next_token_padded_reference(sampled, discard, backup, vocab)
    at_edge = (sampled == vocab).any(dim=1) & ~discard
    assert int(at_edge.sum()) > 0, "the draw must hold ids equal to vocab_size in kept rows"
    for name, got in (("vLLM's kernel", theirs), ("reference", reference)):
        assert torch.equal(mine[0], got[0].to(torch.int32)), (name, vocab, width)
        assert torch.equal(mine[1], got[1].to(torch.int32)), (name, vocab, width)
    assert rows == 2 * 5 ** width  # every boundary row, twice
