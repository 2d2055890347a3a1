"""Which target and draft a serving benchmark runs: a prepared pair folder, a model-zoo pair, or a real-shape pair
built by ``harness.real_shapes.build_pair(name, mode, out_dir)``.

A prepared pair folder holds ``target/`` and ``draft/`` (HF model folders) and, optionally, ``pair.json``:

    {"name": "llama31_8b_eagle", "mode": "dummy", "method": "eagle", "num_speculative_tokens": 3,
     "target": "target", "draft": "draft", "tokenizer": "target",
     "serve_args": ["--load-format", "dummy"], "env": {}, "shapes": {...}}

Paths are relative to the folder. Without ``pair.json`` the method comes from the draft's ``zoo_manifest.json``.
``serve_args`` go to every variant's ``vllm serve`` (a load format, a loader plugin's flags), ``env`` into every
server's environment.

A folder ``real_shapes.build_pair`` wrote (its ``pair.json`` has ``drafts``) is read through real_shapes' own
readers (``load``, ``serve_args``, ``plugin.plugin_env``), so its layout has one definition: its load format
(``dummy`` or the designed loader's) goes to every server, a designed pair's loader plugin onto every server's
``PYTHONPATH``, and ``head`` picks the draft folder (``perfect`` / ``partial``; a dummy pair has one).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from portable_spec.capture_sizes import METHODS
from portable_spec.errors import PortableSpecError

PAIR_FILE = "pair.json"
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


def from_folder(folder: str | os.PathLike, mode: str | None = None, k: int | None = None,
                head: str | None = None) -> BenchPair:
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
    if "drafts" in spec:
        return from_real_shapes(root, mode, k, head)
    if head is not None:
        raise PortableSpecError(f"--head {head}: only a real_shapes pair has heads to pick; drop --head for {root}")
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


def from_real_shapes(folder: str | os.PathLike, mode: str | None = None, k: int | None = None,
                     head: str | None = None) -> BenchPair:
    """A folder ``real_shapes.build_pair`` wrote, read by real_shapes' ``load`` / ``serve_args`` / ``plugin_env``:
    its target, the ``head``'s draft folder (default ``perfect`` for designed, the one head of a dummy pair), its
    load format on every server and, for the designed loader, the loader plugin on every server's PYTHONPATH."""
    from portable_spec_harness.real_shapes import build as real_build
    from portable_spec_harness.real_shapes.plugin import plugin_env

    info = real_build.load(folder)
    heads = list(info["drafts"])
    head = head or ("perfect" if "perfect" in heads else heads[0])
    args = real_build.serve_args(folder, head, k or 3)
    at = args.index("--speculative-config")
    speculative = json.loads(args[at + 1])
    target, draft = args[0], speculative["model"]
    target_config, draft_config = read_config(target), read_config(draft)
    designed = info["load_format"] != "dummy"
    return BenchPair(name=str(info["pair"]), mode=mode or (f"{info['mode']}-{head}" if designed else info["mode"]),
                     method=speculative["method"], k=int(speculative["num_speculative_tokens"]), target=target,
                     draft=draft, tokenizer=target, serve_args=tuple(args[1:at] + args[at + 2:]),
                     env=plugin_env() if designed else {}, shapes=shapes_of(target_config, draft_config),
                     moe=is_moe(target_config), source="real_shapes")


def _zoo_method(draft: Path) -> str | None:
    try:
        return json.loads((draft / "zoo_manifest.json").read_text()).get("method")
    except (OSError, ValueError, AttributeError):
        return None


def from_info(info: dict[str, Any], mode: str, source: str) -> BenchPair:
    """``model_zoo.build_pair``'s result (``target``, ``draft``, ``method`` and the speculative config)."""
    target_config, draft_config = read_config(info["target"]), read_config(info["draft"])
    k = int((info.get("speculative_config") or {}).get("num_speculative_tokens") or info.get("k") or 3)
    return BenchPair(name=str(info.get("pair") or info.get("name") or Path(info["target"]).name), mode=mode,
                     method=info["method"], k=k, target=str(info["target"]), draft=str(info["draft"]),
                     tokenizer=str(info.get("tokenizer") or info["target"]),
                     serve_args=tuple(info.get("serve_args") or ()), env=dict(info.get("env") or {}),
                     shapes=info.get("shapes") or shapes_of(target_config, draft_config), moe=is_moe(target_config),
                     source=source)


def resolve(pair: str, mode: str | None, k: int | None, work_dir: str | os.PathLike,
            head: str | None = None) -> BenchPair:
    """``pair``: a prepared folder, a model-zoo pair (``mode`` is its variant, default ``perfect``; built under
    ``work_dir``) or a name ``real_shapes.build_pair`` knows (``mode`` dummy or designed, built under ``work_dir``;
    ``head`` picks a designed pair's draft)."""
    if Path(pair).is_dir():
        return from_folder(pair, mode, k, head)
    from portable_spec_harness import model_zoo

    if pair in model_zoo.PAIRS:
        if head is not None:
            raise PortableSpecError(f"--head {head}: only a real_shapes pair has heads to pick; drop --head")
        variant = mode or "perfect"
        problem = model_zoo.pair_problem(pair, variant)
        if problem:
            raise PortableSpecError(f"--mode: {problem}")
        info = model_zoo.build_pair(pair, work_dir, variant=variant,
                                    num_speculative_tokens=k or model_zoo.DEFAULT_NUM_SPECULATIVE_TOKENS)
        return from_info(info, f"zoo-{variant}", "model_zoo")
    from portable_spec_harness.real_shapes import PAIR_NAMES, build_pair

    if pair not in PAIR_NAMES:
        raise PortableSpecError(f"--pair {pair!r} is neither a prepared pair folder (target/ and draft/, see "
                                f"serve_bench/pairs.py) nor a model-zoo pair ({', '.join(model_zoo.PAIRS)}) nor a "
                                f"real_shapes pair ({', '.join(PAIR_NAMES)})")
    weights = mode or "dummy"
    folder = build_pair(pair, weights, Path(work_dir) / f"real_shapes_{pair}_{weights}")
    return from_real_shapes(folder, None, k, head)
