"""The ground both generated zoos stand on (``model_zoo``, the simple pairs, and ``context_zoo``, the pairs that see
context): the shared shapes, the special tokens and the trained tokenizer, the greedy function ``f`` of the simple
pairs (whose printable cycle the context pairs draw their tokens from), seeded weights and the config skeleton.

Why its own module: ``model_zoo`` dispatches its context pairs to ``context_zoo``, and ``context_zoo`` needs these
pieces; with them in ``model_zoo`` the two imported each other (every import deferred into a function). Here the
imports run one way: ``model_zoo`` and ``context_zoo`` both import this module, and ``model_zoo`` imports
``context_zoo``. ``model_zoo`` re-exports every name, so ``model_zoo.VOCAB`` and its other users are unchanged.
"""

from __future__ import annotations

import functools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from portable_spec.errors import PortableSpecError

VOCAB = 1024
HIDDEN = VOCAB  # == VOCAB: one exactly orthogonal embedding per token
NUM_HEADS = 16
NUM_KV_HEADS = 8  # kv heads * head_dim == HIDDEN: V can carry a whole embedding; every layer has one KV page size
HEAD_DIM = 128
INTERMEDIATE = 512
RMS_EPS = 1e-6
MAX_POSITIONS = 2048
assert NUM_KV_HEADS * HEAD_DIM == HIDDEN and NUM_HEADS % NUM_KV_HEADS == 0

SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|mask|>")
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
MASK_ID = SPECIAL_TOKENS.index("<|mask|>")
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] + '<|end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)
MANIFEST = "zoo_manifest.json"


# ----------------------------------------------------------------------------------------------------- tokenizer


def _corpus(seed: int, lines: int = 4000) -> list[str]:
    """Pseudo-English sentences: enough distinct words for byte-level BPE to fill the vocabulary."""
    rng = random.Random(f"corpus-{seed}")
    onsets = ["", "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
              "br", "ch", "st", "tr", "pl", "gr", "sh", "th", "qu"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "ou", "io", "y"]
    codas = ["", "n", "r", "s", "t", "l", "m", "ng", "st", "nd", "x", "ck"]

    def word() -> str:
        return "".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(rng.randint(1, 3)))

    out = []
    for _ in range(lines):
        sentence = " ".join(word() for _ in range(rng.randint(4, 14)))
        if rng.random() < 0.3:
            sentence = sentence.capitalize()
        out.append(sentence + rng.choice([".", ",", "!", "?", ";", ":", " 42.", " 7,"]))
    return out


@functools.lru_cache(maxsize=4)
def _tokenizer_json(seed: int) -> str:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", BOS_ID)]
    )
    if tok.get_vocab_size() != VOCAB:
        raise PortableSpecError(
            f"model_zoo: the trained tokenizer has {tok.get_vocab_size()} tokens, not {VOCAB}; "
            "enlarge the generated corpus in zoo_base._corpus"
        )
    for i, name in enumerate(SPECIAL_TOKENS):
        if tok.token_to_id(name) != i:
            raise PortableSpecError(f"model_zoo: special token {name} did not get id {i}; check SPECIAL_TOKENS")
    return tok.to_str()


def tokenizer(seed: int = 0):
    """The zoo's trained ``tokenizers.Tokenizer`` (deterministic per seed)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_str(_tokenizer_json(seed))


def _write_tokenizer(path: Path, seed: int) -> None:
    (path / "tokenizer.json").write_text(_tokenizer_json(seed))
    added = {
        str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                 "special": True}
        for i, t in enumerate(SPECIAL_TOKENS)
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": "</s>",
        "pad_token": "<pad>",
        "additional_special_tokens": [t for t in SPECIAL_TOKENS if t not in ("<pad>", "<s>", "</s>")],
        "added_tokens_decoder": added,
        "model_max_length": MAX_POSITIONS,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    _write_json(path / "tokenizer_config.json", config)
    _write_json(path / "special_tokens_map.json",
                {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
                 "additional_special_tokens": config["additional_special_tokens"]})


def _is_printable(text: str) -> bool:
    return len(text) > 0 and all(32 <= ord(c) < 127 for c in text)


# ------------------------------------------------------------------------------------------------ the function f


@dataclass(frozen=True)
class ZooFunction:
    """``f``: the target's greedy next token for each current token (-1: never an input, the mask token)."""

    f: tuple[int, ...]
    cycle: tuple[int, ...]  # the printable tokens in f's cycle order: f(cycle[i]) == cycle[i + 1]

    def __call__(self, token: int) -> int:
        nxt = self.f[token]
        if nxt < 0:
            raise PortableSpecError(f"model_zoo: token {token} (the mask token) has no greedy successor; "
                                    "do not feed <|mask|> to the target")
        return nxt


@functools.lru_cache(maxsize=4)
def zoo_function(seed: int = 0) -> ZooFunction:
    """One seeded cycle through every printable non-special token; everything else maps into the cycle."""
    tok = tokenizer(seed)
    printable = [i for i in range(len(SPECIAL_TOKENS), VOCAB) if _is_printable(tok.decode([i]))]
    rng = random.Random(f"f-{seed}")
    cycle = printable[:]
    rng.shuffle(cycle)
    f = [-1] * VOCAB
    for i, t in enumerate(cycle):
        f[t] = cycle[(i + 1) % len(cycle)]
    for t in range(VOCAB):
        if f[t] < 0 and t != MASK_ID:
            f[t] = cycle[rng.randrange(len(cycle))]
    return ZooFunction(tuple(f), tuple(cycle))


# ------------------------------------------------------------------------------------------------------ weights


def _torch():
    import torch

    return torch


def _generator(seed: int, tag: str):
    torch = _torch()
    g = torch.Generator()
    g.manual_seed(random.Random(f"{tag}-{seed}").getrandbits(63))
    return g


def _randn(shape: tuple[int, ...], seed: int, tag: str, std: float = 0.02):
    return _torch().randn(*shape, generator=_generator(seed, tag)) * std


# ------------------------------------------------------------------------------------------------------- configs


def _base_config(model_type: str, arch: str, layers: int, *, intermediate: int = INTERMEDIATE,
                 kv_heads: int = NUM_KV_HEADS, rope_theta: float = 10000.0) -> dict[str, Any]:
    return {
        "architectures": [arch],
        "model_type": model_type,
        "vocab_size": VOCAB,
        "hidden_size": HIDDEN,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": NUM_HEADS,
        "num_key_value_heads": kv_heads,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": RMS_EPS,
        "rope_theta": rope_theta,
        "attention_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": BOS_ID,
        "eos_token_id": EOS_ID,
        "pad_token_id": PAD_ID,
        "torch_dtype": "bfloat16",
        "use_cache": True,
    }


# ------------------------------------------------------------------------------------------------------ writing


def _write_json(path: Path, obj: Any) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n")
