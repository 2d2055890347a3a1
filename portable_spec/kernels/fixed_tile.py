"""One tile size for a kernel launched on a ``(rows, blocks)`` grid with a ``BLOCK_SIZE`` tile the caller picks.

vLLM's DFlash input kernel (``copy_and_expand_dflash_inputs_kernel``) covers each request's elements
``[0, blocks * BLOCK_SIZE)`` with program ``(row, block)`` taking ``[block * BLOCK_SIZE, (block + 1) * BLOCK_SIZE)``,
and picks ``BLOCK_SIZE`` (a ``tl.constexpr``: one compile per value) from the step's longest query. Each element is
computed and stored independently, masked by its own index, so any tiling of the same range writes the same outputs.
This launcher keeps the range and changes the tiling to one fixed tile: a single compiled variant for every step.
"""

from __future__ import annotations

from typing import Any

TILE = 64


class FixedTileLauncher:
    """Stands where vLLM's sites hold the JIT kernel: ``launcher[grid](..., BLOCK_SIZE=b)`` launches ``kernel`` on
    ``(grid[0], ceil(grid[1] * b / TILE))`` with ``BLOCK_SIZE=TILE``."""

    def __init__(self, kernel: Any, tile: int = TILE) -> None:
        if tile < 1 or tile & (tile - 1):
            raise ValueError(f"tile {tile} is not a power of two")
        self.kernel = kernel
        self.tile = tile

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        rows, blocks = grid[0], grid[1] if len(grid) > 1 else 1

        def launch(*args: Any, BLOCK_SIZE: int, **kwargs: Any) -> Any:  # noqa: N803 - vLLM's keyword
            covered = blocks * BLOCK_SIZE
            return self.kernel[(rows, -(-covered // self.tile))](*args, BLOCK_SIZE=self.tile, **kwargs)

        return launch

    def __repr__(self) -> str:
        return f"FixedTileLauncher({self.kernel!r}, tile={self.tile})"


def one_tile_launcher(kernel: Any) -> FixedTileLauncher:
    return FixedTileLauncher(kernel)
