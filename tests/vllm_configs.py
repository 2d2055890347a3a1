"""The one place the tests build a real ``VllmConfig``: as vLLM's own engine does, through
``EngineArgs(...).create_engine_config()``.

Why one place: a dozen test files each wrote the same ``EngineArgs(model=..., skip_tokenizer_init=True, ...)`` call,
and a change in how vLLM builds a config (or in what every test must pass) had a dozen places to follow. Only
``skip_tokenizer_init=True`` is filled here (the zoo's models have no tokenizer); every other engine argument is the
caller's, so each test keeps the ``max_num_seqs`` / ``max_model_len`` its capture sizes depend on. vLLM is imported on
call, after the test session has chosen its platform.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def engine_config(target: str, speculative: dict[str, Any] | None = None, **engine_args):
    """``EngineArgs(model=target, skip_tokenizer_init=True, speculative_config=speculative, **engine_args)
    .create_engine_config()`` (``speculative=None`` is EngineArgs' own default: no speculation)."""
    from vllm.engine.arg_utils import EngineArgs

    return EngineArgs(model=target, skip_tokenizer_init=True, speculative_config=speculative,
                      **engine_args).create_engine_config()


def speculative(method: str, draft: str, k: int, **extra) -> dict[str, Any]:
    """vLLM's ``speculative_config`` dict: ``method``, the draft model's folder, ``k`` speculative tokens."""
    return {"method": method, "model": draft, "num_speculative_tokens": k, **extra}


def pair_config(pair: dict[str, Any], **engine_args):
    """The config of a model-zoo pair (``build_pair``'s dict: its ``target`` and ``speculative_config``)."""
    return engine_config(pair["target"], pair["speculative_config"], **engine_args)


def zoo_config(pair_name: str, zoo: Path, *, max_num_seqs: int = 8, k: int | None = None, sizes=None, mode=None):
    """A zoo pair built in ``zoo`` (``k`` speculative tokens where given), at ``max_num_seqs`` and max_model_len 512,
    with capture ``sizes`` and cudagraph ``mode`` as a ``CompilationConfig`` where either is given."""
    from vllm.config import CompilationConfig

    from portable_spec_harness.model_zoo import build_pair

    pair = build_pair(pair_name, zoo, **({} if k is None else {"num_speculative_tokens": k}))
    compilation = {}
    if sizes is not None:
        compilation["cudagraph_capture_sizes"] = list(sizes)
    if mode is not None:
        compilation["cudagraph_mode"] = mode
    kwargs = {"compilation_config": CompilationConfig(**compilation)} if compilation else {}
    return pair_config(pair, max_num_seqs=max_num_seqs, max_model_len=512, **kwargs)
