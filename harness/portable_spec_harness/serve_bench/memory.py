"""GPU memory per benchmark server, and whether every variant's server fits on the device at once.

Why: booting the variants' servers together and interleaving the client runs across them is the fairest and
cheapest order (one boot each), but an 8B target holds 16 GB per server and a 30B MoE 61 GB, so three of them may
not fit. The estimate is deliberately plain (weights + a KV cache sized for the workload + a fixed overhead) and is
written into the report beside the decision, so a reader can check it; ``--placement`` overrides it.

At tensor parallel ``tp`` every server spans GPUs 0..tp-1 (vLLM's ranks take the visible devices in order), so the
servers of a benchmark share those GPUs: the estimate is per GPU (weights split ``tp`` ways, the KV cache per rank
as vLLM holds it, the overhead on every rank) against the least free memory among them.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

GIB = 1 << 30
OVERHEAD_BYTES = 3 * GIB
"""Per server beyond weights and KV cache: the CUDA context, activations at the step's token budget, CUDA graphs,
the sampler's logits and torch.compile's workspace (an 8B server on an H100 measured 2-3 GiB of these in vLLM's
own boot log)."""
OVERHEAD_WEIGHT_SHARE = 0.05
"""Plus this share of the weights (buffers that grow with the model: rotary caches, MoE workspaces)."""
HEADROOM = 0.92
"""Servers together may take at most this share of the free memory (fragmentation, the client's own context)."""
MIN_KV_BYTES = 256 << 20
KV_SLACK = 1.25
"""The KV cache holds every concurrent request at its full length 1.25 times over (block rounding, drafts)."""
BLOCK = 16
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


def dtype_bytes(config: dict[str, Any]) -> int:
    return DTYPE_BYTES.get(str(config.get("torch_dtype") or config.get("dtype") or "bfloat16"), 2)


def kv_bytes_per_token(config: dict[str, Any], tp: int = 1) -> int:
    """K and V bytes one token takes in every layer of this model on one of ``tp`` ranks: MLA's latent and rope part
    on every rank whole (vLLM replicates it), else the rank's share of the KV heads (one at least: with fewer KV
    heads than ranks vLLM replicates them)."""
    layers = int(config.get("num_hidden_layers") or 1)
    size = dtype_bytes(config)
    if config.get("kv_lora_rank"):
        return layers * (int(config["kv_lora_rank"]) + int(config.get("qk_rope_head_dim") or 64)) * size
    heads = int(config.get("num_attention_heads") or 1)
    kv_heads = max(1, int(config.get("num_key_value_heads") or heads) // tp)
    head_dim = int(config.get("head_dim") or int(config.get("hidden_size", 0)) // heads)
    return layers * 2 * kv_heads * head_dim * size


def kv_cache_bytes(target: dict[str, Any], draft: dict[str, Any], max_model_len: int, max_seqs: int,
                   tp: int = 1) -> int:
    """``--kv-cache-memory-bytes`` (vLLM: per GPU): every one of ``max_seqs`` requests at ``max_model_len``, for
    target and draft, on one of ``tp`` ranks. Fixed per server so that vLLM skips memory profiling (servers that boot
    together would disturb it) and every variant gets the same cache."""
    tokens = max_seqs * (math.ceil(max_model_len / BLOCK) + 1) * BLOCK
    per_token = kv_bytes_per_token(target, tp) + kv_bytes_per_token(draft, tp)
    return max(MIN_KV_BYTES, int(tokens * per_token * KV_SLACK))


def param_count(config: dict[str, Any]) -> int:
    """A Llama/Qwen/Mixtral-shaped model's parameters from its config (embeddings, attention, MLP or experts)."""
    hidden = int(config.get("hidden_size") or 0)
    vocab = int(config.get("vocab_size") or 0)
    layers = int(config.get("num_hidden_layers") or 0)
    heads = int(config.get("num_attention_heads") or 1)
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or hidden // heads)
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    experts = max((int(config.get(k) or 0) for k in ("num_local_experts", "num_experts", "n_routed_experts")),
                  default=0)
    if experts:
        inter = int(config.get("moe_intermediate_size") or config.get("intermediate_size") or 0)
        mlp = experts * 3 * hidden * inter + hidden * experts
    else:
        mlp = 3 * hidden * int(config.get("intermediate_size") or 0)
    head_vocab = int(config.get("draft_vocab_size") or vocab)
    head = 0 if config.get("tie_word_embeddings") else hidden * head_vocab
    return vocab * hidden + head + layers * (attention + mlp)


def weights_bytes(folder: str | os.PathLike, config: dict[str, Any]) -> tuple[int, str]:
    """The model's weight files' size, or (dummy-weight folders without files) its parameters times its dtype;
    with which of the two it is."""
    files = [p for p in Path(folder).iterdir() if p.name.endswith(WEIGHT_SUFFIXES)] if Path(folder).is_dir() else []
    on_disk = sum(p.stat().st_size for p in files)
    if on_disk > 1 << 20:  # more than a Git LFS pointer or an index
        return on_disk, "files"
    return param_count(config) * dtype_bytes(config), "config"


def server_bytes(weights: int, kv: int, tp: int = 1) -> int:
    """One server's bytes on each of its ``tp`` GPUs: its share of the weights (``weights`` is the whole model's),
    the KV cache as ``--kv-cache-memory-bytes`` gives it (already per GPU) and the overhead."""
    share = weights / tp
    return int(share + kv + OVERHEAD_BYTES + OVERHEAD_WEIGHT_SHARE * share)


def placement(n_servers: int, per_server: int, free_bytes: int | None, asked: str = "auto",
              tp: int = 1) -> dict[str, Any]:
    """``together`` (every variant's server at once, client runs interleaved across them) or ``in_turn`` (one
    server at a time, each variant booted once per round). ``per_server`` and ``free_bytes`` are per GPU (at
    tensor parallel ``tp`` every server spans the same ``tp`` GPUs; ``free_bytes`` the least free of them).
    ``asked`` other than ``auto`` wins."""
    needed = n_servers * per_server
    facts = {"servers": n_servers, "tensor_parallel_size": tp, "per_server_gib": round(per_server / GIB, 2),
             "needed_gib": round(needed / GIB, 2), "per": "GPU",
             "free_gib": None if free_bytes is None else round(free_bytes / GIB, 2), "headroom": HEADROOM}
    if asked != "auto":
        return {"mode": asked, "reason": f"--placement {asked}", **facts}
    if free_bytes is None:
        return {"mode": "together", "reason": "no device memory reading (CPU test run): servers together", **facts}
    if needed <= HEADROOM * free_bytes:
        return {"mode": "together", "reason": f"{n_servers} servers need ~{needed / GIB:.1f} GiB of "
                f"{free_bytes / GIB:.1f} GiB free (<= {HEADROOM:.0%}): booted together, runs interleaved", **facts}
    return {"mode": "in_turn", "reason": f"{n_servers} servers need ~{needed / GIB:.1f} GiB, more than {HEADROOM:.0%} "
            f"of {free_bytes / GIB:.1f} GiB free: one server at a time, each variant booted once per round", **facts}


DEVICE_QUERY = ("import json, torch\n"
                "n = torch.cuda.device_count() if torch.cuda.is_available() else 0\n"
                "devices = [dict(zip(('free_bytes', 'total_bytes'), torch.cuda.mem_get_info(i))) for i in range(n)]\n"
                "print(json.dumps({'name': torch.cuda.get_device_name() if n else None, 'count': n,"
                " 'free_bytes': devices[0]['free_bytes'] if n else None,"
                " 'total_bytes': devices[0]['total_bytes'] if n else None, 'devices': devices}))")


def free_on(reading: dict[str, Any], gpus: int) -> int | None:
    """The least free memory among the first ``gpus`` GPUs of a ``device_memory`` reading (the ones a server at
    tensor parallel ``gpus`` uses), or None without a reading of each (a CPU test run's reading has none)."""
    devices = reading.get("devices") or [{"free_bytes": reading.get("free_bytes")}]
    free = [d.get("free_bytes") for d in devices[:gpus]]
    return None if len(free) < gpus or None in free else min(free)


def device_memory(timeout_s: float = 120.0) -> dict[str, Any]:
    """Every GPU's free/total memory (``devices``; the first's also at the top level), their count and the first's
    name, asked in a child process: a CUDA context in this process would hold memory for the whole benchmark."""
    try:
        done = subprocess.run([sys.executable, "-c", DEVICE_QUERY], capture_output=True, text=True, timeout=timeout_s)
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return {"name": None, "free_bytes": None, "total_bytes": None, "error": f"{type(exc).__name__}: {exc}"}
