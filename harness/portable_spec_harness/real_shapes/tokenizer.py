"""A tokenizer with exactly the model's vocabulary, so that ``vllm serve DIR`` and ``vllm bench serve --dataset-name
random`` run unchanged.

``tokenizers`` WordLevel: id ``i`` below ``Vocabulary.words`` is the word spelled by ``i`` in bijective base 26
(``a`` .. ``z``, ``aa`` ..), split on whitespace; every other id is a special token (the named ones of the real
tokenizer, e.g. ``<|begin_of_text|>``, the rest reserved), added as special. So ``decode`` joins words with spaces and
``encode`` gives the same ids back: the random dataset's decode / re-encode (``gen_prompt_decode_to_target_len``) keeps
every prompt's length, and its ``tokenizer.vocab_size`` (what it samples ids below) is the model's vocabulary. Llama's
tokenizer puts ``<|begin_of_text|>`` in front of a prompt (``num_special_tokens_to_add() == 1``), Qwen3's adds
nothing, as the real ones do.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from portable_spec_harness.real_shapes.shapes import Vocabulary


def word(token: int) -> str:
    """Bijective base 26: 0 -> a, 25 -> z, 26 -> aa, ..."""
    out, n = "", token + 1
    while n > 0:
        n -= 1
        out = chr(97 + n % 26) + out
        n //= 26
    return out


def build(vocab: Vocabulary):
    """The ``tokenizers.Tokenizer`` for ``vocab``."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors

    specials = {i: vocab.token_name(i) for i in range(vocab.words, vocab.size)}
    table = {word(i): i for i in range(vocab.words)}
    table.update({name: i for i, name in specials.items()})
    tok = Tokenizer(models.WordLevel(table, unk_token=specials[vocab.size - 1]))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([AddedToken(specials[i], special=True, normalized=False) for i in sorted(specials)])
    if vocab.bos is not None:
        bos = specials[vocab.bos]
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, vocab.bos)])
    return tok


def write(path: Path, vocab: Vocabulary, max_length: int) -> None:
    """``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json`` into ``path``."""
    tok = build(vocab)
    (path / "tokenizer.json").write_text(tok.to_str())
    special: dict[str, Any] = {"eos_token": vocab.token_name(vocab.eos[0])}
    if vocab.bos is not None:
        special["bos_token"] = vocab.token_name(vocab.bos)
    if vocab.pad is not None:
        special["pad_token"] = vocab.token_name(vocab.pad)
    config = {"tokenizer_class": "PreTrainedTokenizerFast", **special, "model_max_length": max_length,
              "clean_up_tokenization_spaces": False, "add_bos_token": vocab.bos is not None}
    (path / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (path / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n")
