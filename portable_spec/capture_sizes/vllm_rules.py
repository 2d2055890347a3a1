"""vLLM 0.26.0's own capture-size rules, mirrored in pure Python so the planner needs no ``import vllm``.

Each function names the vLLM code it mirrors; tests check them against the installed vLLM. The only departure is
the error text: vLLM's errors are rewritten as one line that names the portable-spec flag to change.
"""

from __future__ import annotations

from collections.abc import Iterable

DEFAULT_MAX_CAPTURE_CAP = 512
"""``_set_cudagraph_sizes`` never picks a default max capture size above this."""


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def vllm_default_ladder(max_size: int) -> list[int]:
    """vLLM's default capture list (``VllmConfig._set_cudagraph_sizes``, ``config/vllm.py``), sizes <= ``max_size``.

    ``[1, 2, 4]`` + ``range(8, min(max + 1, 256), 8)`` + ``range(256, max + 1, 16)``. vLLM also appends
    ``max_num_batched_tokens`` when it fits; that is not an input here.
    """
    if max_size < 1:
        return []
    sizes = [i for i in (1, 2, 4) if i <= max_size]
    if max_size >= 8:
        sizes += range(8, min(max_size + 1, 256), 8)
    if max_size >= 256:
        sizes += range(256, max_size + 1, 16)
    return sorted(set(sizes))


def vllm_default_max_capture_size(num_spec: int, max_num_seqs: int) -> int:
    """vLLM's default ``max_cudagraph_capture_size``: ``min(max_num_seqs * (1 + K) * 2, 512)``."""
    return min(max_num_seqs * (1 + num_spec) * 2, DEFAULT_MAX_CAPTURE_CAP)


def sequence_parallel_filter(sizes: Iterable[int], tp: int, sp: bool) -> list[int]:
    """``VllmConfig.update_sizes_for_sequence_parallelism``: with TP > 1 and SP, keep multiples of TP only."""
    sizes = list(sizes)
    if tp > 1 and sp:
        return [s for s in sizes if s % tp == 0]
    return sizes


def spec_decode_multiple_of(uniform_decode_query_len: int, tp: int, sp: bool) -> int:
    """The multiple vLLM rounds verify sizes to: 1+K, or ``max(1+K, TP)`` under sequence parallelism.

    Mirrors the check in ``CompilationConfig.adjust_cudagraph_sizes_for_spec_decode``: the larger of the two must
    be a multiple of both, i.e. one must divide the other.
    """
    multiple_of = uniform_decode_query_len
    if tp > 1 and sp:
        multiple_of = max(uniform_decode_query_len, tp)
        if multiple_of % uniform_decode_query_len or multiple_of % tp:
            raise ValueError(
                f"sequence parallelism needs capture sizes that are multiples of both 1+num_speculative_tokens "
                f"({uniform_decode_query_len}) and tensor_parallel_size ({tp}), and max of the two ({multiple_of}) "
                f"is not: pick --num-spec so that 1+K divides or is a multiple of --tp, or drop --sp")
    return multiple_of


def vllm_spec_decode_sizes(sizes: Iterable[int], max_size: int, uniform_decode_query_len: int, tp: int = 1,
                           sp: bool = False) -> list[int]:
    """``CompilationConfig.adjust_cudagraph_sizes_for_spec_decode`` (``config/compilation.py``), as a function.

    Rounds every size up to the multiple, keeps those <= ``max_size``, falls back to ``[multiple]`` when it fits,
    and raises where vLLM raises. An empty input or a multiple of 1 returns the sizes unchanged, as vLLM does.
    The new max capture size is the last element of the result.
    """
    multiple_of = spec_decode_multiple_of(uniform_decode_query_len, tp, sp)
    sizes = list(sizes)
    if not sizes or multiple_of <= 1:
        return sizes
    rounded = sorted({round_up(s, multiple_of) for s in sizes if round_up(s, multiple_of) <= max_size})
    if not rounded and multiple_of <= max_size:
        rounded = [multiple_of]
    if not rounded:
        raise ValueError(
            f"no capture size is left after rounding to a multiple of {multiple_of} (1+num_speculative_tokens, or "
            f"tensor_parallel_size under sequence parallelism) within the max capture size {max_size}: pass "
            f"--max-capture-size {multiple_of} or more, or lower --num-spec")
    return rounded

