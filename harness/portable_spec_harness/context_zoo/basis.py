"""The residual-stream basis of the context pairs: exactly orthogonal +-1 directions, one per token and one per code.

Hidden size 2048 = twice the vocabulary: the rows of a seeded 2048 x 2048 Hadamard matrix (Sylvester, rows permuted,
columns sign-flipped) are split into

* ``tokens``: 1024 rows, the token embeddings ``e_t`` (the embedding table of every context model);
* named code blocks, 8 rows each (one per group or class value): ``w`` (the group of the predicted token), ``u1``
  and ``u2`` (its class parts), ``r`` (the EAGLE heads' state: the class part ``B1`` of the token before the input),
  ``m1``/``m2`` (the DFlash context codes), and ``z0`` (one row: the DFlash context's constant).

Every row is +-1 with RMS exactly 1 and any two rows are exactly orthogonal (dot = 0, own dot = 2048), so a sum of
``n`` distinct rows has RMS exactly ``sqrt(n)``, a reader ``d / 2048`` returns exactly 1 on ``d`` and 0 on every other
row, and every weight built from a few rows is exact in bf16. ``latent`` is the same construction in 512 dimensions
for the MLA target's compressed KV (``kv_lora_rank`` 512).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Sequence

from portable_spec_harness import zoo_base
from portable_spec_harness.zoo_base import _torch

HIDDEN = 2048
LATENT = 512  # MLA kv_lora_rank
CODES = 8
BLOCKS = ("w", "u1", "u2", "r", "m1", "m2")


def hadamard(n: int, seed: int, tag: str):
    """n x n, +-1, rows exactly orthogonal: Sylvester rows in a seeded order with seeded column signs."""
    torch = _torch()
    had = torch.ones(1, 1)
    while had.shape[0] < n:
        had = torch.cat([torch.cat([had, had], 1), torch.cat([had, -had], 1)], 0)
    g = zoo_base._generator(seed, tag)
    perm = torch.randperm(n, generator=g)
    signs = torch.randint(0, 2, (n,), generator=g).float() * 2 - 1
    return (had[perm] * signs).contiguous()


@dataclass(frozen=True)
class Basis:
    tokens: Any  # [VOCAB, HIDDEN]
    blocks: dict[str, Any]  # name -> [CODES, HIDDEN]
    z0: Any  # [HIDDEN]
    latent: dict[str, Any]  # MLA: "a", "b1", "b2" -> [CODES, LATENT]

    @property
    def mean_token(self):
        """``c = sum_t e_t / 2048``: ``c . e_t == 1`` for every token and ``c . d == 0`` for every code row, the
        constant a position-only query or key reads from any token."""
        return self.tokens.sum(0) / HIDDEN

    def __getitem__(self, name: str):
        return self.blocks[name]


@functools.lru_cache(maxsize=4)
def basis(seed: int = 0) -> Basis:
    rows = hadamard(HIDDEN, seed, "context-basis")
    vocab = zoo_base.VOCAB
    blocks = {name: rows[vocab + i * CODES: vocab + (i + 1) * CODES] for i, name in enumerate(BLOCKS)}
    z0 = rows[vocab + len(BLOCKS) * CODES]
    lat = hadamard(LATENT, seed, "context-latent")
    latent = {name: lat[i * CODES:(i + 1) * CODES] for i, name in enumerate(("a", "b1", "b2"))}
    return Basis(rows[:vocab].contiguous(), blocks, z0, latent)


def code_readers(codes: Sequence[int], rows, scale: float = 1.0, exclude: Sequence[int] = ()):
    """[CODES, dim]: row v reads ``scale * [codes[t] == v]`` from ``e_t`` (``rows`` = the token rows; tokens in
    ``exclude`` read 0). Entries are integers / dim with |integer| <= the class size: exact in bf16."""
    torch = _torch()
    dim = rows.shape[1]
    out = torch.zeros(CODES, dim)
    skip = set(exclude)
    for t, v in enumerate(codes):
        if t not in skip:
            out[v] += rows[t]
    return out * (scale / dim)


def direction_readers(directions, scale: float = 1.0):
    """[n, dim]: row i reads ``scale`` times the coefficient of ``directions[i]`` (each +-1, orthogonal)."""
    return directions * (scale / directions.shape[1])


def code_map(codes: Sequence[int], targets, rows):
    """[target dim, dim]: sends token row ``e_t`` to ``targets[codes[t]]`` (linear; other code rows go to 0)."""
    torch = _torch()
    images = targets[torch.tensor(list(codes))]  # [VOCAB, target dim]
    return images.t() @ rows / rows.shape[1]
