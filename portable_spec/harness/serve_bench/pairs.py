"""Which target and draft a serving benchmark runs: a prepared pair folder, a model-zoo pair, or a real-shape pair
built by ``harness.real_shapes.build_pair(name, mode, out_dir)`` where that module exists.

A prepared pair folder holds ``target/`` and ``draft/`` (HF model folders) and, optionally, ``pair.json``:

    {"name": "llama31_8b_eagle", "mode": "dummy", "method": "eagle", "num_speculative_tokens": 3,
     "target": "target", "draft": "draft", "tokenizer": "target",
     "serve_args": ["--load-format", "dummy"], "env": {}, "shapes": {...}}

Paths are relative to the folder. Without ``pair.json`` the method comes from the draft's ``zoo_manifest.json``.
``serve_args`` go to every variant's ``vllm serve`` (a load format, a loader plugin's flags), ``env`` into every
server's environment. Why a folder: the pairs at real sizes come from another builder, and the bench must not
depend on how it writes them, only on what ``vllm serve`` needs.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portable_spec.errors import PortableSpecError

PAIR_FILE = "pair.json"
METHODS = ("eagle", "eagle3", "mtp", "dflash")
MOE_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
SHAPE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
              "intermediate_size", "moe_intermediate_size", "vocab_size", "draft_vocab_size", *MOE_KEYS,
              "num_experts_per_tok", "torch_dtype", "architectures")


@dataclass(frozen=True)
class BenchPair:
    name: str
    mode: str
    """What the weights are (``dummy``, ``designed-perfect``, a zoo variant, ...): a label the report keys on."""
    method: str
    k: int
    target: str
    draft: str
    tokenizer: str
    serve_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    shapes: dict[str, Any] = field(default_factory=dict)
    moe: bool = False
    source: str = "folder"

    @property
    def runner(self) -> str:
        """``v1`` (forced for the V1 variants) or ``auto`` (MoE targets: vLLM 0.26.0 picks V1 by itself)."""
        return "auto" if self.moe else "v1"

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "mode": self.mode, "method": self.method, "k": self.k, "target": self.target,
                "draft": self.draft, "tokenizer": self.tokenizer, "serve_args": list(self.serve_args),
                "env": dict(self.env), "shapes": self.shapes, "moe": self.moe, "source": self.source}


def read_config(folder: str | os.PathLike) -> dict[str, Any]:
    path = Path(folder) / "config.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        raise PortableSpecError(f"{path} is missing or not JSON: pass a prepared pair folder whose target/ and draft/ "
                                "are model folders") from None


def is_moe(config: dict[str, Any]) -> bool:
    return any(int(config.get(key) or 0) > 0 for key in MOE_KEYS)


def shapes_of(target: dict[str, Any], draft: dict[str, Any]) -> dict[str, Any]:
    """The numbers a reader needs to place a result (hidden size, layers, heads, experts, vocabularies)."""
    return {"target": {k: target[k] for k in SHAPE_KEYS if k in target},
            "draft": {k: draft[k] for k in SHAPE_KEYS if k in draft}}


def from_folder(folder: str | os.PathLike, mode: str | None = None, k: int | None = None) -> BenchPair:
    """A prepared pair folder (see the module text); one-line errors name what is missing."""
    root = Path(folder)
    spec: dict[str, Any] = {}
    if (root / PAIR_FILE).is_file():
        try:
            spec = json.loads((root / PAIR_FILE).read_text())
        except ValueError as exc:
            raise PortableSpecError(f"{root / PAIR_FILE} is not JSON ({exc}): fix or remove it") from None
        if not isinstance(spec, dict):
            raise PortableSpecError(f"{root / PAIR_FILE} must hold one JSON object: fix or remove it")
    target = root / spec.get("target", "target")
    draft = root / spec.get("draft", "draft")
    for role, path in (("target", target), ("draft", draft)):
        if not (path / "config.json").is_file():
            raise PortableSpecError(f"{root} has no {role} model folder ({path} lacks config.json): a prepared pair "
                                    "folder holds target/ and draft/ (or names them in pair.json)")
    method = spec.get("method") or _zoo_method(draft)
    if method not in METHODS:
        raise PortableSpecError(f"{root}: speculative method {method!r} unknown: set \"method\" in {PAIR_FILE} to "
                                f"one of {', '.join(METHODS)}")
    target_config, draft_config = read_config(target), read_config(draft)
    k = k or int(spec.get("num_speculative_tokens") or 3)
    env = spec.get("env") or {}
    serve_args = spec.get("serve_args") or []
    if not isinstance(env, dict) or not isinstance(serve_args, list):
        raise PortableSpecError(f"{root / PAIR_FILE}: \"env\" must be an object and \"serve_args\" a list")
    return BenchPair(name=str(spec.get("name") or root.name), mode=mode or str(spec.get("mode") or "as-built"),
                     method=method, k=k, target=str(target), draft=str(draft),
                     tokenizer=str(root / spec["tokenizer"]) if spec.get("tokenizer") else str(target),
                     serve_args=tuple(str(a) for a in serve_args), env={str(a): str(b) for a, b in env.items()},
                     shapes=spec.get("shapes") or shapes_of(target_config, draft_config), moe=is_moe(target_config),
                     source="folder")


def _zoo_method(draft: Path) -> str | None:
    try:
        return json.loads((draft / "zoo_manifest.json").read_text()).get("method")
    except (OSError, ValueError, AttributeError):
        return None


def from_info(info: dict[str, Any], mode: str, source: str) -> BenchPair:
    """A builder's result (``model_zoo.build_pair`` or ``real_shapes.build_pair``: ``target``, ``draft``,
    ``method`` and the speculative config)."""
    target_config, draft_config = read_config(info["target"]), read_config(info["draft"])
    k = int((info.get("speculative_config") or {}).get("num_speculative_tokens") or info.get("k") or 3)
    return BenchPair(name=str(info.get("pair") or info.get("name") or Path(info["target"]).name), mode=mode,
                     method=info["method"], k=k, target=str(info["target"]), draft=str(info["draft"]),
                     tokenizer=str(info.get("tokenizer") or info["target"]),
                     serve_args=tuple(info.get("serve_args") or ()), env=dict(info.get("env") or {}),
                     shapes=info.get("shapes") or shapes_of(target_config, draft_config), moe=is_moe(target_config),
                     source=source)


def resolve(pair: str, mode: str | None, k: int | None, work_dir: str | os.PathLike) -> BenchPair:
    """``pair``: a prepared folder, a model-zoo pair (``mode`` is its variant, default ``perfect``; built under
    ``work_dir``) or a name ``real_shapes.build_pair`` knows (when that module is installed)."""
    if Path(pair).is_dir():
        return from_folder(pair, mode, k)
    from portable_spec.harness import model_zoo

    if pair in model_zoo.PAIRS:
        variant = mode or "perfect"
        problem = model_zoo.pair_problem(pair, variant)
        if problem:
            raise PortableSpecError(f"--mode: {problem}")
        info = model_zoo.build_pair(pair, work_dir, variant=variant,
                                    num_speculative_tokens=k or model_zoo.DEFAULT_NUM_SPECULATIVE_TOKENS)
        return from_info(info, f"zoo-{variant}", "model_zoo")
    neither = (f"--pair {pair!r} is neither a prepared pair folder (target/ and draft/, see serve_bench/pairs.py) "
               f"nor a model-zoo pair ({', '.join(model_zoo.PAIRS)})")
    builder = _real_shapes_builder()
    if builder is None:
        raise PortableSpecError(neither)
    try:
        built = builder(pair, mode or "dummy", Path(work_dir))
    except (KeyError, ValueError, TypeError, PortableSpecError) as exc:
        raise PortableSpecError(f"{neither} nor one real_shapes.build_pair builds ({exc})") from None
    if isinstance(built, (str, os.PathLike)):
        return from_folder(built, mode or "dummy", k)
    return from_info(built, mode or "dummy", "real_shapes")


def _real_shapes_builder() -> Any:
    import importlib
    import importlib.util

    if importlib.util.find_spec("portable_spec.harness.real_shapes") is None:
        return None
    return getattr(importlib.import_module("portable_spec.harness.real_shapes"), "build_pair", None)
