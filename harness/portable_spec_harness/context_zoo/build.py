"""Writing the context pairs: targets, heads, manifests. ``model_zoo.build_pair`` dispatches here for them.

The ``expected`` block of a context pair (``kind: "context"``) carries the tables of :mod:`.function` (``A``,
``B1``, ``B2``, ``phi``, ``table``): ``ContextFunction.from_json(expected)`` rebuilds the greedy rule, and
``model_zoo.expected_output(expected, prompt, n)`` is the target's greedy output for any prompt. An MTP pair's
"draft" directory holds the target's ``config.json`` and a relative symlink to its weights (the MTP layer lives in
the target checkpoint), so ``speculative_config.model`` and ``load_expected`` work as for every other pair.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from portable_spec_harness import zoo_base
from portable_spec_harness.context_zoo import function, mimo, mla, models

FAMILIES = ("llama_ctx", "qwen3_ctx", "deepseek_mla", "mimo_ctx")
MIN_PROMPT_TOKENS = {"eagle": 2, "eagle3": 2, "dflash": 1, "mtp": 3, "draft_model": 1}
"""The shortest prompt for which a head's first draft is exact (see the modules' docstrings)."""


def target_weights(family: str, seed: int, logit: float) -> dict[str, Any]:
    if family == "deepseek_mla":
        return mla.target_weights(seed, logit)
    if family == "mimo_ctx":
        return mimo.target_weights(seed, logit)
    return models.target_weights(family, seed, logit)


def target_config(family: str) -> dict[str, Any]:
    if family == "deepseek_mla":
        return mla.target_config()
    return mimo.target_config() if family == "mimo_ctx" else models.target_config(family)


def target_manifest(family: str, seed: int, logit: float, zoo_version: int) -> dict[str, Any]:
    return {"zoo_version": zoo_version, "role": "target", "family": family, "seed": seed, "logit": logit,
            "context_function": function.context_function(seed).as_json()}


def draft_weights(method: str, seed: int, logit: float) -> dict[str, Any]:
    if method == "draft_model":  # its own lm_head: the target's winning logit
        return models.draft_model_weights(seed, logit)
    return {"eagle": models.eagle_weights, "eagle3": models.eagle3_weights,
            "dflash": models.dflash_weights}[method](seed)


def expected_block(method: str, seed: int, k: int, logit: float) -> dict[str, Any]:
    return {**function.context_function(seed).as_json(), "f": None,
            "acceptance_per_position": function.expected_acceptance(method, k),
            "min_prompt_tokens": MIN_PROMPT_TOKENS[method], "target_logit": logit,
            "target_top_probability_t1": context_top_probability(logit),
            "mask_token_id": zoo_base.MASK_ID, "eos_token_id": zoo_base.EOS_ID}


def context_top_probability(logit: float, temperature: float = 1.0) -> float:
    """p(greedy token) when sampling: the 512 table tokens score ``L (1/2 [same group] + 1/4 [same c1] + 1/4 [same
    c2])`` against the greedy one (see :mod:`.models`), the 512 other tokens 0."""
    import math

    counts: dict[float, int] = {}
    for g in range(function.GROUPS):
        for c1 in range(function.CLASSES):
            for c2 in range(function.CLASSES):
                score = 0.5 * (g == 0) + 0.25 * (c1 == 0) + 0.25 * (c2 == 0)
                counts[score] = counts.get(score, 0) + 1
    counts[0.0] += zoo_base.VOCAB - function.TABLE_SIZE
    z = sum(n * math.exp(s * logit / temperature) for s, n in counts.items())
    return math.exp(logit / temperature) / z


def link_mtp_draft(target: Path, draft: Path, manifest: dict[str, Any]) -> None:
    """``draft`` = the target's config + a relative symlink to its weights + the draft manifest."""
    tmp = draft.with_name(draft.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copyfile(target / "config.json", tmp / "config.json")
    os.symlink(os.path.join("..", target.name, "model.safetensors"), tmp / "model.safetensors")
    zoo_base._write_json(tmp / zoo_base.MANIFEST, manifest)
    shutil.rmtree(draft, ignore_errors=True)
    os.replace(tmp, draft)


def fresh_link(draft: Path, manifest: dict[str, Any]) -> bool:
    try:
        ok = json.loads((draft / zoo_base.MANIFEST).read_text()) == manifest
        return ok and (draft / "model.safetensors").resolve().is_file()
    except (OSError, ValueError):
        return False
