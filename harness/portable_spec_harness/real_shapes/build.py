"""``build_pair``: one pair's folder, written from the public numbers (no weights on disk).

``OUT/`` holds ``target/`` (config.json, generation_config.json, the tokenizer), the heads (``draft/`` for dummy
weights; ``draft_perfect/`` and ``draft_partial/`` for designed ones: config.json) and ``pair.json`` (what to pass
``vllm serve``, shapes, the memory plan, what acceptance to expect). Designed folders carry a marker
(``design.MARKER``) that the harness's model loader reads (``harness/portable_spec_harness/vllm_door/designed_loader.py``, load
format ``portable_spec_designed``), writing every weight on the device at load time.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path
from typing import Any

from portable_spec.errors import PortableSpecError
from portable_spec_harness.real_shapes import design as D
from portable_spec_harness.real_shapes import memory, tokenizer
from portable_spec_harness.real_shapes.shapes import PAIR_NAMES, SCALES, Pair, pair

MODES = ("dummy", "designed")
LOAD_FORMATS = {"dummy": "dummy", "designed": D.FORMAT}
PAIR_FILE = "pair.json"


def problem(name: str, mode: str, scale: str = "real") -> str | None:
    """Why ``name`` / ``mode`` / ``scale`` is not something this package builds (naming the choices), or None."""
    if name not in PAIR_NAMES:
        return f"unknown pair {name!r}; use one of {', '.join(PAIR_NAMES)}"
    if mode not in MODES:
        return f"unknown mode {mode!r}; use one of {', '.join(MODES)}"
    if scale not in SCALES:
        return f"unknown scale {scale!r}; use one of {', '.join(SCALES)}"
    return None


def design_of(p: Pair, seed: int = 0) -> D.Design:
    return D.Design(vocab_size=p.target["vocab_size"], hidden_size=p.target["hidden_size"],
                    words=p.vocabulary.words, active=p.active, seed=seed)


def draft_design(p: Pair, design: D.Design) -> D.Design:
    """A draft model's design: the target's at the draft's hidden size (same token tables); a head's is the
    target's (it reads the target's embeddings)."""
    if p.method != "draft_model":
        return design
    return dataclasses.replace(design, hidden_size=p.head["hidden_size"])


def draft_config(p: Pair, mode: str) -> dict[str, Any]:
    """The draft folder's config.json: the public shape, but a designed draft model unties its lm_head from its
    embeddings (``design``: it reads out ``g``, not the input token; recorded in ``pair.json``'s ``deviations``)."""
    if mode == "designed" and p.method == "draft_model" and p.head.get("tie_word_embeddings"):
        return {**p.head, "tie_word_embeddings": False}
    return p.head


def deviations(p: Pair, mode: str) -> dict[str, str]:
    """Where a folder's config differs from the public shape in ``shapes``, and why."""
    if draft_config(p, mode) is p.head:
        return {}
    return {"draft.tie_word_embeddings": "false (public: true): the designed draft's lm_head reads out g(t), so it "
                                         "cannot be the embeddings' transpose; per step the same lm_head matmul "
                                         f"runs, with {p.head['vocab_size'] * p.head['hidden_size']:,} more weights"}


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2) + "\n")


def _model_dir(path: Path, config: dict[str, Any], marker: dict[str, Any] | None) -> None:
    path.mkdir(parents=True)
    _write_json(path / "config.json", config)
    if marker is not None:
        _write_json(path / D.MARKER, marker)


def build_pair(name: str, mode: str, out_dir: str | os.PathLike, *, seed: int = 0, scale: str = "real") -> Path:
    """Write the pair's folder at ``out_dir`` (replacing what is there) and return it. ``mode`` is ``dummy`` (vLLM's
    ``--load-format dummy``: acceptance ~0) or ``designed`` (known acceptance: a perfect and a ~60% head)."""
    bad = problem(name, mode, scale)
    if bad:
        raise PortableSpecError(f"real_shapes: {bad}")
    p, out = pair(name, scale), Path(out_dir)
    design = design_of(p, seed)
    bad = design.problem() or draft_design(p, design).problem()
    if bad:
        raise PortableSpecError(f"real_shapes: {bad}")
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    designed = mode == "designed"
    _model_dir(tmp / "target", p.target, D.marker("target", p.family, design, None) if designed else None)
    tokenizer.write(tmp / "target", p.vocabulary, p.target["max_position_embeddings"])
    _write_json(tmp / "target" / "generation_config.json",
                {"bos_token_id": p.target["bos_token_id"], "eos_token_id": list(p.vocabulary.eos),
                 **({"pad_token_id": p.vocabulary.pad} if p.vocabulary.pad is not None else {})})
    variants = D.VARIANTS if designed else ("dummy",)
    drafts = {}
    for variant in variants:
        folder = f"draft_{variant}" if designed else "draft"
        _model_dir(tmp / folder, draft_config(p, mode),
                   D.marker(p.method, p.family, draft_design(p, design), variant) if designed else None)
        drafts[variant] = folder
    _write_json(tmp / PAIR_FILE, describe(p, mode, seed, scale, design, drafts))
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    os.replace(tmp, out)
    return out


def describe(p: Pair, mode: str, seed: int, scale: str, design: D.Design, drafts: dict[str, str]) -> dict[str, Any]:
    """``pair.json``: paths relative to the pair folder (``load`` resolves them)."""
    return {
        "pair": p.name, "mode": mode, "seed": seed, "scale": scale, "public": p.public, "method": p.method,
        "family": p.family, "target": "target", "drafts": drafts, "load_format": LOAD_FORMATS[mode],
        "shapes": {"target": p.target, "head": p.head}, "deviations": deviations(p, mode),
        "design": {"active_tokens": design.active, "logit": design.logit, "agreement": design.agreement,
                   "min_margin": D.MIN_MARGIN} if mode == "designed" else None,
        "expected_acceptance": ({v: {"per_position_k3": D.expected_acceptance(v, 3, design.agreement)}
                                 for v in D.VARIANTS} if mode == "designed" else
                                {"dummy": "about 0 (random weights)"}),
        "memory": memory.plan(p),
    }


def load(pair_dir: str | os.PathLike) -> dict[str, Any]:
    """A built pair's ``pair.json`` with absolute paths (one-line error when the folder is not one)."""
    root = Path(pair_dir).resolve()
    try:
        info = json.loads((root / PAIR_FILE).read_text())
    except (OSError, ValueError):
        raise PortableSpecError(f"real_shapes: {root} has no readable {PAIR_FILE}; build it with "
                                "python -m portable_spec_harness.real_shapes build") from None
    info["target"] = str(root / info["target"])
    info["drafts"] = {v: str(root / d) for v, d in info["drafts"].items()}
    return info


def serve_args(pair_dir: str | os.PathLike, variant: str | None = None, k: int = 3) -> list[str]:
    """``vllm serve`` arguments for a built pair (``variant``: perfect / partial for designed, default the first)."""
    info = load(pair_dir)
    variant = variant or next(iter(info["drafts"]))
    if variant not in info["drafts"]:
        raise PortableSpecError(f"real_shapes: {info['pair']} ({info['mode']}) has no {variant!r} head; use one of "
                                f"{', '.join(info['drafts'])}")
    if k < 1:
        raise PortableSpecError("real_shapes: num_speculative_tokens must be >= 1")
    spec = {"method": info["method"], "model": info["drafts"][variant], "num_speculative_tokens": k}
    return [info["target"], "--load-format", info["load_format"], "--speculative-config", json.dumps(spec)]
