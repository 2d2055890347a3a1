"""One compiled variant for kernels whose caller picks a ``tl.constexpr`` per step (one compile per value).

vLLM's DFlash input kernel (``copy_and_expand_dflash_inputs_kernel``) covers each request's elements
``[0, blocks * BLOCK_SIZE)`` with program ``(row, block)`` taking ``[block * BLOCK_SIZE, (block + 1) * BLOCK_SIZE)``,
and picks ``BLOCK_SIZE`` from the step's longest query. Each element is computed and stored independently, masked by
its own index, so any tiling of the same range writes the same outputs: ``FixedTileLauncher`` keeps the range at one
fixed tile. Its ``HAS_NUM_REJECTED`` flag only decides whether the rejected counts are read (else 0 is used): the
launcher passes zeros and the flag on, so steps with and without drafts share the variant too. vLLM's expand kernel
(``copy_and_expand_eagle_inputs_kernel``: the separate draft model's and parallel drafting's inputs) has the same
shape: program ``(row, block)`` takes ``BLOCK_SIZE_TOKENS`` of the row's slots, each computed and stored on its own,
masked by its index against the row's slot count, its tile picked from the longest query.

vLLM's ``eagle_prepare_next_token_padded_kernel`` loads each request's row masked by ``num_sampled_tokens_per_req``
in a ``BLOCK_SIZE_TOKENS`` tile (the next power of two: 1 in steps without drafts, of 1+K in steps with them); lanes
past the row read -1, which the kernel counts as no token. ``MinBlockLauncher`` launches it with a tile of at least
``MIN_BLOCK`` lanes: the same outputs, one variant for K < 16.
"""

from __future__ import annotations

from typing import Any


def next_pow2(n: int) -> int:
    """``triton.next_power_of_2`` for ``n >= 1``, as vLLM's launchers pick a tile ``tl.constexpr`` from a length: the
    warm-up predicts the variants serving compiles with it, and the fused first pass launches vLLM's kernel with the
    tile vLLM's own caller would pick. Pure Python, so it holds where vLLM's Triton is a placeholder (no GPU)."""
    return 1 if n <= 1 else 1 << (n - 1).bit_length()

TILE = 64
MIN_BLOCK = 16


class FixedTileLauncher:
    """Stands where vLLM's sites hold the JIT kernel: ``launcher[grid](..., BLOCK_SIZE=b)`` launches ``kernel`` on
    ``(grid[0], ceil(grid[1] * b / TILE))`` with ``BLOCK_SIZE=TILE`` (``tile_kw`` names the tile keyword)."""

    def __init__(self, kernel: Any, tile: int = TILE, zero_rejected: bool = False, tile_kw: str = "BLOCK_SIZE") -> None:
        if tile < 1 or tile & (tile - 1):
            raise ValueError(f"tile {tile} is not a power of two")
        self.kernel = kernel
        self.tile = tile
        self.zero_rejected = zero_rejected  # launch steps without rejected counts with zeros (DFlash's flag)
        self.tile_kw = tile_kw

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        rows, blocks = grid[0], grid[1] if len(grid) > 1 else 1

        def launch(*args: Any, **kwargs: Any) -> Any:
            covered = blocks * kwargs.pop(self.tile_kw)
            if self.zero_rejected and not kwargs.get("HAS_NUM_REJECTED", False):
                import torch

                device = kwargs["next_token_ids_ptr"].device
                kwargs["num_rejected_tokens_ptr"] = torch.zeros(rows, dtype=torch.int32, device=device)
                kwargs["HAS_NUM_REJECTED"] = True
            kwargs[self.tile_kw] = self.tile
            return self.kernel[(rows, -(-covered // self.tile))](*args, **kwargs)

        return launch

    def __repr__(self) -> str:
        return f"FixedTileLauncher({self.kernel!r}, tile={self.tile})"


class MinBlockLauncher:
    """Stands where vLLM's sites hold the JIT kernel: ``launcher[grid](..., BLOCK_SIZE_TOKENS=b)`` launches
    ``kernel[grid]`` with ``BLOCK_SIZE_TOKENS=max(b, block)``."""

    def __init__(self, kernel: Any, block: int = MIN_BLOCK) -> None:
        if block < 1 or block & (block - 1):
            raise ValueError(f"block {block} is not a power of two")
        self.kernel = kernel
        self.block = block

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        def launch(*args: Any, BLOCK_SIZE_TOKENS: int, **kwargs: Any) -> Any:  # noqa: N803 - vLLM's keyword
            return self.kernel[grid](*args, BLOCK_SIZE_TOKENS=max(BLOCK_SIZE_TOKENS, self.block), **kwargs)

        return launch

    def __repr__(self) -> str:
        return f"MinBlockLauncher({self.kernel!r}, block={self.block})"


def one_tile_launcher(kernel: Any) -> FixedTileLauncher:
    return FixedTileLauncher(kernel, zero_rejected=True)


def one_tile_tokens_launcher(kernel: Any) -> FixedTileLauncher:
    return FixedTileLauncher(kernel, tile_kw="BLOCK_SIZE_TOKENS")


def min_block_launcher(kernel: Any) -> MinBlockLauncher:
    return MinBlockLauncher(kernel)
