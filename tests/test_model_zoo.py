"""The generated model zoo (harness/portable_spec_harness/model_zoo.py) and the GPU boot script's CPU-side plumbing.

* targets really produce the f-chain (HF transformers, fp32, CPU), with one-hot logits;
* each draft, run by a plain-torch mirror of vLLM 0.26.0's draft forward on the saved weights, predicts what the
  manifest claims (and the attention variant goes wrong under emulated KV-cache/metadata bugs);
* vLLM's own loader and modules (bf16, CPU, separate process) accept every checkpoint and reproduce the construction;
* ci/gpu/vllm_boot.py: dry-run plan, environment, and the checks it applies to GPU results.
"""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tokenizers")
pytest.importorskip("safetensors")
transformers = pytest.importorskip("transformers")

from safetensors.torch import load_file  # noqa: E402

from portable_spec.errors import PortableSpecError  # noqa: E402
from portable_spec_harness import model_zoo as zoo  # noqa: E402

PROMPTS = ["The quick brown fox", "Hello, my name is", "qua brest 42.", "z"]
F_CHAIN_PAIRS = {name: spec for name, spec in zoo.PAIRS.items() if name not in zoo.CONTEXT_PAIRS}
"""The pairs whose target follows one token's successor f (the context pairs: tests/test_model_zoo_context.py)."""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("zoo")
    pairs = {}
    for name, (_, _, variants) in F_CHAIN_PAIRS.items():
        for variant in variants:
            pairs[name, variant] = zoo.build_pair(name, out, variant=variant, seed=0)
    return out, pairs


def _weights(path) -> dict[str, torch.Tensor]:
    return {k: v.float() for k, v in load_file(f"{path}/model.safetensors").items()}


_TARGETS: dict[str, object] = {}


@pytest.fixture(scope="module", autouse=True)
def _drop_hf_targets():
    yield
    _TARGETS.clear()


def _target(path):
    """The HF model for a generated target (loaded once per test module run)."""
    if str(path) in _TARGETS:
        return _TARGETS[str(path)]
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    _TARGETS[str(path)] = model.eval()
    return _TARGETS[str(path)]


# ------------------------------------------------------------------- plain-torch mirrors of vLLM's draft modules


def _rms(x, w, eps=zoo.RMS_EPS):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _rope(x, pos, theta):
    """Neox-style rotary embedding on [T, heads, head_dim]."""
    half = x.shape[-1] // 2
    inv = 1.0 / theta ** (torch.arange(0, x.shape[-1], 2, dtype=torch.float64) / x.shape[-1])
    ang = (pos[:, None].double() * inv[None]).float()
    cos, sin = ang.cos()[:, None, :], ang.sin()[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def _attend(q, k, v, q_pos, k_pos, causal):
    heads, kv_heads, hd = q.shape[1], k.shape[1], q.shape[2]
    k = k.repeat_interleave(heads // kv_heads, 1)
    v = v.repeat_interleave(heads // kv_heads, 1)
    scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
    if causal:
        scores = scores.masked_fill(k_pos[None, None, :] > q_pos[None, :, None], float("-inf"))
    return torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(q.shape[0], heads * hd)


def _self_attn(w, p, x, pos, theta=10000.0, causal=True, kv_x=None, hide_last_key=False):
    """Causal self-attention; ``kv_x`` (K/V read from other inputs: a stale cache) and ``hide_last_key`` (the last
    query cannot see its own key: seq_lens one short) emulate KV-cache and metadata bugs."""
    hd = zoo.HEAD_DIM
    kv_x = x if kv_x is None else kv_x
    q = (x @ w[f"{p}.q_proj.weight"].t()).view(x.shape[0], -1, hd)
    k = (kv_x @ w[f"{p}.k_proj.weight"].t()).view(x.shape[0], -1, hd)
    v = (kv_x @ w[f"{p}.v_proj.weight"].t()).view(x.shape[0], -1, hd)
    k_pos = pos.clone()
    if hide_last_key:
        k_pos[-1] = pos.max() + 1  # masked for every query
    return _attend(_rope(q, pos, theta), _rope(k, pos, theta), v, pos, k_pos, causal) @ w[f"{p}.o_proj.weight"].t()


def _mlp(w, p, x):
    gate = x @ w[f"{p}.gate_proj.weight"].t()
    return (torch.nn.functional.silu(gate) * (x @ w[f"{p}.up_proj.weight"].t())) @ w[f"{p}.down_proj.weight"].t()


def eagle1_forward(draft_w, target_w, token_ids, hidden, *, stale_last_kv=None, hide_last_key=False):
    """vLLM EagleLlamaForCausalLM: fc(cat(embed, hidden)) -> layer 0 without input norm -> h + residual (no
    final norm) -> the target's lm_head. Returns (logits, output hidden). ``stale_last_kv`` (a token id) puts that
    token's K/V in the last slot instead of the current one's."""
    embed = draft_w.get("embed_tokens.weight", target_w["model.embed_tokens.weight"])
    pos = torch.arange(len(token_ids))
    x = torch.cat([embed[token_ids], hidden], -1) @ draft_w["fc.weight"].t()
    kv_x = None
    if stale_last_kv is not None:
        kv_x = x.clone()
        kv_x[-1] = torch.cat([embed[stale_last_kv], hidden[-2]]) @ draft_w["fc.weight"].t()
    residual = x + _self_attn(draft_w, "layers.0.self_attn", x, pos, kv_x=kv_x, hide_last_key=hide_last_key)
    h = _mlp(draft_w, "layers.0.mlp", _rms(residual, draft_w["layers.0.post_attention_layernorm.weight"]))
    out = h + residual
    return out @ target_w["lm_head.weight"].t(), out


def eagle3_forward(draft_w, target_w, token_ids, hidden):
    """vLLM Eagle3 LlamaModel (norm after residual): ``hidden`` is already fc-combined. Returns (logits, prenorm)."""
    p = "midlayer"
    pos = torch.arange(len(token_ids))
    embeds = _rms(target_w["model.embed_tokens.weight"][token_ids], draft_w[f"{p}.input_layernorm.weight"])
    residual = hidden
    x = torch.cat([embeds, _rms(hidden, draft_w[f"{p}.hidden_norm.weight"])], -1)
    residual = residual + _self_attn(draft_w, f"{p}.self_attn", x, pos)
    residual = residual + _mlp(draft_w, f"{p}.mlp", _rms(residual, draft_w[f"{p}.post_attention_layernorm.weight"]))
    out = _rms(residual, draft_w["norm.weight"])
    return out @ target_w["lm_head.weight"].t(), residual


def dflash_forward(draft_w, target_w, aux, bonus, k):
    """vLLM DFlashQwen3 (``context_zoo.reference.dflash_forward``): context K/V from fc(aux), the query block
    [bonus, mask * k] at the next positions, non-causal attention. Returns logits at the k mask slots."""
    from portable_spec_harness.context_zoo import reference

    return reference.dflash_forward(draft_w, target_w, aux, torch.arange(aux.shape[0]), bonus, k, zoo.MASK_ID,
                                    theta=zoo.DFLASH_ROPE_THETA)


def _margin(logits):
    top = logits.topk(2, -1).values
    return (top[..., 0] - top[..., 1]).min().item()


# -------------------------------------------------------------------------------------------------------- tests


def test_function_is_one_long_cycle_over_printable_tokens():
    fn = zoo.zoo_function(0)
    cycle = fn.cycle
    assert len(cycle) > 500 and len(set(cycle)) == len(cycle)
    seen, t = [], cycle[0]
    for _ in range(len(cycle)):
        seen.append(t)
        t = fn(t)
    assert t == cycle[0] and sorted(seen) == sorted(cycle)  # a single cycle: no short loops
    assert sum(fn.f[t] == t + 1 for t in cycle) < 10  # not a shift of the id space
    assert all(fn.f[t] in set(cycle) for t in range(zoo.VOCAB) if t != zoo.MASK_ID)
    assert fn.f[zoo.MASK_ID] == -1 and fn.f[zoo.EOS_ID] != zoo.EOS_ID
    with pytest.raises(PortableSpecError):
        fn(zoo.MASK_ID)
    assert zoo.zoo_function(1).f != fn.f


def test_tokenizer_round_trips_and_has_a_chat_template(built):
    out, pairs = built
    tok = transformers.AutoTokenizer.from_pretrained(pairs["llama_eagle", "perfect"]["target"])
    assert len(tok) == zoo.VOCAB and tok.bos_token_id == zoo.BOS_ID and tok.eos_token_id == zoo.EOS_ID
    for text in PROMPTS + ["Ünïcode & tabs\t\n ok"]:
        ids = tok(text).input_ids
        assert ids[0] == zoo.BOS_ID
        assert tok.decode(ids, skip_special_tokens=True) == text
    assert tok.chat_template == zoo.CHAT_TEMPLATE
    cfg = json.loads((out / "llama_target" / "tokenizer_config.json").read_text())
    assert cfg["chat_template"] == zoo.CHAT_TEMPLATE
    text = tok.apply_chat_template([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
                                   add_generation_prompt=True, tokenize=False)
    assert text == "<s><|system|>\nbe brief<|end|>\n<|user|>\nhi<|end|>\n<|assistant|>\n"
    ids = tok(text, add_special_tokens=False).input_ids
    assert ids.count(zoo.BOS_ID) == 1 and zoo.SPECIAL_TOKENS.index("<|assistant|>") in ids
    gen = json.loads((out / "llama_target" / "generation_config.json").read_text())
    assert gen["eos_token_id"] == zoo.EOS_ID


@pytest.mark.parametrize("family", ["llama", "mixtral", "qwen3"])
def test_target_greedy_generation_is_the_f_chain(built, family):
    out, _ = built
    path = out / f"{family}_target"
    model = _target(path)
    tok = transformers.AutoTokenizer.from_pretrained(path)
    fn = zoo.zoo_function(0)
    for prompt in PROMPTS[:2]:
        ids = tok(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            gen = model.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=zoo.PAD_ID)
            logits = model(gen).logits[0]
        got = gen[0, ids.shape[1]:].tolist()
        assert got == zoo.expected_continuation(fn, ids[0].tolist(), 16)
        assert _margin(logits) > 0.9 * zoo.LOGIT  # one-hot logits: bf16 cannot flip the argmax
    # every token but the mask maps to f(t), whatever its context
    every = torch.tensor([[t for t in range(zoo.VOCAB) if t != zoo.MASK_ID]])
    with torch.no_grad():
        pred = model(every).logits[0].argmax(-1).tolist()
    assert pred == [fn.f[t] for t in every[0].tolist()]


def test_weights_are_zeroed_where_the_construction_needs_it(built):
    out, _ = built
    for family in ("llama", "mixtral", "qwen3"):
        w = _weights(out / f"{family}_target")
        for name, tensor in w.items():
            if name.endswith(("o_proj.weight", "down_proj.weight", "w2.weight")):
                assert not tensor.any(), name
            if name.endswith(("q_proj.weight", "gate_proj.weight", "w1.weight")):
                assert tensor.abs().sum() > 0, name  # attention and MLP still compute something
        emb = w["model.embed_tokens.weight"]
        assert torch.equal(emb @ emb.t(), zoo.HIDDEN * torch.eye(zoo.VOCAB))  # exactly orthogonal in bf16


def _chain_inputs(target_path, prompt):
    model = _target(target_path)
    tok = transformers.AutoTokenizer.from_pretrained(target_path)
    ids = tok(prompt).input_ids
    tokens = ids + zoo.expected_continuation(zoo.zoo_function(0), ids, 12)
    with torch.no_grad():
        hs = model(torch.tensor([tokens]), output_hidden_states=True).hidden_states
    return tokens, [h[0] for h in hs]


@pytest.mark.parametrize("pair", ["llama_eagle", "mixtral_eagle"])
def test_eagle_perfect_head_predicts_f_on_the_chain_and_when_chained(built, pair):
    _, pairs = built
    info = pairs[pair, "perfect"]
    dw, tw = _weights(info["draft"]), _weights(info["target"])
    assert "embed_tokens.weight" not in dw and "lm_head.weight" not in dw  # vLLM shares the target's
    f = info["expected"]["f"]
    tokens, hidden = _chain_inputs(info["target"], PROMPTS[0])
    # first pass: position i sees the target's final hidden state at i and token i + 1
    logits, out = eagle1_forward(dw, tw, tokens[1:], hidden[-1][:-1])
    assert logits.argmax(-1).tolist() == [f[t] for t in tokens[1:]]
    assert _margin(logits) > 0.9 * zoo.LOGIT
    # chained draft steps: feed back the draft's own output hidden state and its sampled token
    for _seq, _hid, nxt, step_logits in draft_chain(dw, tw, tokens[1:], hidden[-1][:-1], logits, out):
        assert step_logits[-1].argmax().item() == f[nxt]
    assert zoo.expected_acceptance_per_position("eagle", "perfect", 3) == [1.0, 1.0, 1.0]


def test_soft_target_samples_off_its_chain_and_its_perfect_head_matches_it_bit_for_bit(tmp_path):
    """The soft target (logit 8) for sampling runs: exact logits 8 / 0 in bf16, p(f(t)) ~ 0.745 at temperature 1,
    and the perfect EAGLE head's logits equal the target's at every position (draft distribution == target
    distribution: probabilistic draft sampling accepts every draft token)."""
    soft = zoo.build_pair("llama_eagle", tmp_path, variant="perfect", target_logit=zoo.SOFT_LOGIT)
    sharp = zoo.build_pair("llama_eagle", tmp_path, variant="perfect")
    assert soft["target"] != sharp["target"] and soft["draft"] != sharp["draft"]  # both can live in one zoo
    assert soft["expected"]["target_logit"] == zoo.SOFT_LOGIT
    assert 0.7 < soft["expected"]["target_top_probability_t1"] < 0.8
    assert sharp["expected"]["target_top_probability_t1"] > 0.9998  # why the sharp target cannot test sampling
    assert soft["expected"]["acceptance_per_position"] == [1.0, 1.0, 1.0]
    tw, dw = _weights(soft["target"]), _weights(soft["draft"])
    f = soft["expected"]["f"]
    model = _target(soft["target"])
    tokens = [5, 17, 42, 99, 300, 12]
    with torch.no_grad():
        out = model(torch.tensor([tokens]), output_hidden_states=True)
    assert out.logits[0].argmax(-1).tolist() == [f[t] for t in tokens]
    # vLLM runs bf16: the target's final (normed) hidden state rounds to the token's embedding, so its logits are
    # exactly 8 at f(t) and 0 elsewhere ...
    hidden = out.hidden_states[-1][0].bfloat16().float()
    assert torch.equal(hidden, tw["model.embed_tokens.weight"][tokens])
    target_logits = hidden @ tw["lm_head.weight"].t()
    winners = target_logits.argmax(-1)
    assert torch.equal(target_logits.gather(-1, winners[:, None]), torch.full((len(tokens), 1), zoo.SOFT_LOGIT))
    assert torch.equal(target_logits.scatter(-1, winners[:, None], 0.0), torch.zeros_like(target_logits))
    probs = target_logits.softmax(-1).max(-1).values
    assert torch.allclose(probs, torch.full_like(probs, soft["expected"]["target_top_probability_t1"]))
    # ... and the head, seeing token t+1 with the target's hidden state at t, gives the target's logits at t+1
    draft_logits, _ = eagle1_forward(dw, tw, tokens[1:], hidden[:-1])
    assert torch.equal(draft_logits, target_logits[1:])
    for inexact in (7.3, 0.0, -8.0):
        with pytest.raises(PortableSpecError, match="bf16 cannot hold exactly.*use e.g. 16 or 8"):
            zoo.build_pair("llama_eagle", tmp_path, target_logit=inexact)


def draft_chain(dw, tw, tokens, hid, logits, out, steps=3, forward=None):
    """Chained EAGLE draft steps: feed back the draft's own output hidden state and its sampled token; yields
    (sequence, hidden states, sampled token, logits of the step) after each step. ``forward`` defaults to the
    EAGLE-1 head; EAGLE-3 feeds back its prenorm output the same way."""
    forward = forward or eagle1_forward
    seq = list(tokens)
    for _ in range(steps):
        nxt = logits[-1].argmax().item()
        seq.append(nxt)
        hid = torch.cat([hid, out[-1:]])
        logits, out = forward(dw, tw, seq, hid)
        yield seq, hid, nxt, logits


@pytest.mark.parametrize("pair", ["llama_eagle", "mixtral_eagle"])
def test_eagle_attention_head_is_perfect_only_through_its_own_kv(built, pair):
    _, pairs = built
    info = pairs[pair, "attention"]
    dw, tw = _weights(info["draft"]), _weights(info["target"])
    f = info["expected"]["f"]
    assert info["expected"]["g"] == f and info["expected"]["acceptance_per_position"] == [1.0, 1.0, 1.0]
    tokens, hidden = _chain_inputs(info["target"], PROMPTS[3])
    n_prompt = len(tokens) - 12
    logits, out = eagle1_forward(dw, tw, tokens[1:], hidden[-1][:-1])
    pred = logits.argmax(-1).tolist()
    assert pred[n_prompt - 1:] == [f[t] for t in tokens[n_prompt:]]  # from the last prompt token on
    assert _margin(logits[n_prompt - 1:]) > 0.9 * zoo.LOGIT
    for seq, hid, nxt, step_logits in draft_chain(dw, tw, tokens[1:], hidden[-1][:-1], logits, out):
        assert step_logits[-1].argmax().item() == f[nxt]
        # the same step with a stale KV slot, seq_lens one short, or a stale input token goes wrong
        assert eagle1_forward(dw, tw, seq, hid, stale_last_kv=seq[-2])[0][-1].argmax().item() != f[nxt]
        assert eagle1_forward(dw, tw, seq, hid, hide_last_key=True)[0][-1].argmax().item() != f[nxt]
        assert eagle1_forward(dw, tw, seq[:-1] + [seq[-2]], hid)[0][-1].argmax().item() != f[nxt]
    # the plain perfect head cannot tell: its attention output is multiplied by a zero o_proj
    plain = _weights(pairs[pair, "perfect"]["draft"])
    assert eagle1_forward(plain, tw, seq, hid, stale_last_kv=seq[-2])[0][-1].argmax().item() == f[seq[-1]]


def test_eagle_partial_head_agrees_on_the_stated_fraction(built):
    _, pairs = built
    info = pairs["llama_eagle", "partial"]
    dw, tw = _weights(info["draft"]), _weights(info["target"])
    exp = info["expected"]
    assert "embed_tokens.weight" in dw and not torch.equal(dw["embed_tokens.weight"], tw["model.embed_tokens.weight"])
    every = [t for t in range(zoo.VOCAB) if t != zoo.MASK_ID]
    hidden = torch.randn(len(every), zoo.HIDDEN, generator=torch.Generator().manual_seed(0))
    logits, _ = eagle1_forward(dw, tw, every, hidden)
    pred = logits.argmax(-1).tolist()
    assert pred == [exp["g"][t] for t in every]
    assert _margin(logits) > 0.9 * zoo.LOGIT
    cycle = exp["cycle"]
    agree = sum(pred[every.index(t)] == exp["f"][t] for t in cycle) / len(cycle)
    assert agree == exp["agreement_on_cycle"] and abs(agree - zoo.PARTIAL_AGREEMENT) < 1 / len(cycle)
    # disagreement is never accidental: where g differs it predicts f(f(t)), which is not f(t) on a long cycle
    assert all(exp["g"][t] == exp["f"][exp["f"][t]] for t in cycle if exp["g"][t] != exp["f"][t])
    sim = zoo.simulate_greedy_spec_decode(exp["f"], zoo.draft_proposer("eagle", "partial"), [every[5]], 400, 3)
    rates = [a / sim["num_drafts"] for a in sim["accepted_per_position"]]
    assert 0 < rates[2] <= rates[1] <= rates[0] < 1
    assert sim["output"] == zoo.expected_continuation(exp["f"], [every[5]], 400)


def test_eagle3_head_advances_its_state_along_f(built):
    _, pairs = built
    info = pairs["llama_eagle3", "perfect"]
    dw, tw = _weights(info["draft"]), _weights(info["target"])
    f = info["expected"]["f"]
    cfg = json.loads(open(f"{info['draft']}/config.json").read())
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["draft_vocab_size"] == zoo.VOCAB
    assert dw["fc.weight"].shape == (zoo.HIDDEN, 3 * zoo.HIDDEN)
    tokens, hidden = _chain_inputs(info["target"], PROMPTS[1])
    aux = torch.cat([hidden[i] for i in cfg["eagle_aux_hidden_state_layer_ids"]], -1)  # vLLM: h + residual
    logits, prenorm = eagle3_forward(dw, tw, tokens[1:], aux[:-1] @ dw["fc.weight"].t())
    # the head reads the state (the embedding of token i), not the input token: it predicts f(f(token i)), which
    # is f(token i + 1) wherever the target generated token i + 1 -- from the last prompt token on
    pred = logits.argmax(-1).tolist()
    assert pred == [f[f[t]] for t in tokens[:-1]]
    n_prompt = len(tokens) - 12
    assert pred[n_prompt - 1:] == [f[t] for t in tokens[n_prompt:]]
    assert _margin(logits) > 0.5 * zoo.LOGIT
    # chained steps see the draft's prenorm output, not fc(aux)
    for _seq, _hid, nxt, step_logits in draft_chain(dw, tw, tokens[1:], aux[:-1] @ dw["fc.weight"].t(), logits,
                                                     prenorm, forward=eagle3_forward):
        assert step_logits[-1].argmax().item() == f[nxt]
    # the lookup holds for every state, not only those on this chain
    emb = tw["model.embed_tokens.weight"]
    every = [t for t in range(zoo.VOCAB) if t != zoo.MASK_ID]
    state = torch.cat([emb[every]] * 3, -1) @ dw["fc.weight"].t()
    logits, prenorm = eagle3_forward(dw, tw, [0] * len(every), state)
    assert logits.argmax(-1).tolist() == [f[f[t]] for t in every]
    assert torch.allclose(prenorm, emb[[f[t] for t in every]], atol=1e-3)


def test_eagle3_d2t_head_is_the_perfect_head_over_a_draft_vocabulary(built):
    """The published EAGLE-3 shape: a draft vocabulary (every token f can produce, rising: 855 of 1024 ids), its own
    lm_head (the target's rows there), a ``d2t`` map (int64, non-zero offsets that change along the vocabulary);
    scattered into the target vocabulary as vLLM does, its logits are the perfect head's."""
    _, pairs = built
    info, perfect = pairs["llama_eagle3", "d2t"], pairs["llama_eagle3", "perfect"]
    raw = load_file(f"{info['draft']}/model.safetensors")
    dw, pw, tw = _weights(info["draft"]), _weights(perfect["draft"]), _weights(info["target"])
    ids = zoo.draft_vocabulary()
    cfg = json.loads(open(f"{info['draft']}/config.json").read())
    assert cfg["draft_vocab_size"] == len(ids) == info["expected"]["draft_vocab_size"] == 855 < cfg["vocab_size"]
    assert ids == sorted(set(info["expected"]["f"]) - {-1})  # exactly what the target can produce
    assert raw["d2t"].dtype == torch.int64 and raw["d2t"].tolist() == zoo.d2t_offsets(ids)
    assert len(set(raw["d2t"].tolist())) > 1 and min(raw["d2t"].tolist()) > 0
    assert torch.equal(dw["lm_head.weight"], tw["lm_head.weight"][ids])
    assert {k: v for k, v in dw.items() if k not in ("lm_head.weight", "d2t")}.keys() == pw.keys()
    assert all(torch.equal(dw[k], pw[k]) for k in pw)
    state = torch.randn(64, zoo.HIDDEN, generator=torch.Generator().manual_seed(0))
    scattered = torch.full((64, zoo.VOCAB), float("-inf"))
    scattered[:, torch.arange(len(ids)) + raw["d2t"]] = state @ dw["lm_head.weight"].t()
    full = state @ tw["lm_head.weight"].t()
    assert torch.equal(scattered[:, ids], full[:, ids]) and scattered.argmax(-1).tolist() == full.argmax(-1).tolist()
    for bad in ([], [3, 3], [5, 4], [-1, 2]):
        with pytest.raises(PortableSpecError, match="strictly rising"):
            zoo.d2t_offsets(bad)


def test_dflash_head_predicts_f_of_the_bonus_at_every_mask_slot(built):
    _, pairs = built
    info = pairs["qwen3_dflash", "perfect"]
    dw, tw = _weights(info["draft"]), _weights(info["target"])
    f = info["expected"]["f"]
    cfg = json.loads(open(f"{info['draft']}/config.json").read())
    assert cfg["architectures"] == ["DFlashDraftModel"]
    assert cfg["dflash_config"]["mask_token_id"] == zoo.MASK_ID and len(cfg["layer_types"]) == cfg["num_hidden_layers"]
    tokens, hidden = _chain_inputs(info["target"], PROMPTS[2])
    aux = torch.cat([hidden[i + 1] for i in cfg["dflash_config"]["target_layer_ids"]], -1)  # vLLM: id + 1
    rng = torch.Generator().manual_seed(1)
    bonuses = [tokens[-1]] + torch.randint(zoo.MASK_ID + 1, zoo.VOCAB, (24,), generator=rng).tolist()
    for bonus in bonuses:
        logits = dflash_forward(dw, tw, aux, bonus, 3)
        assert logits.argmax(-1).tolist() == [f[bonus]] * 3
        assert _margin(logits) > 0.5 * zoo.LOGIT
    assert zoo.expected_acceptance_per_position("dflash", "perfect", 3) == [1.0, 0.0, 0.0]
    sim = zoo.simulate_greedy_spec_decode(f, zoo.draft_proposer("dflash", "perfect"), tokens, 60, 3)
    assert sim["accepted_per_position"] == [sim["num_drafts"], 0, 0]


def test_simulated_perfect_eagle_accepts_every_draft_token():
    f = zoo.zoo_function(0).f
    sim = zoo.simulate_greedy_spec_decode(f, zoo.draft_proposer("eagle", "perfect"), [zoo.BOS_ID], 33, 3)
    assert sim["num_accepted_tokens"] == sim["num_draft_tokens"] == 3 * sim["num_drafts"]
    assert sim["output"] == zoo.expected_continuation(f, [zoo.BOS_ID], 33)


def test_build_is_deterministic_and_reused(built, tmp_path):
    out, pairs = built
    again = zoo.build_pair("llama_eagle", tmp_path, variant="partial", seed=0)
    for role in ("target", "draft"):
        first = open(f"{pairs['llama_eagle', 'partial'][role]}/model.safetensors", "rb").read()
        assert first == open(f"{again[role]}/model.safetensors", "rb").read()
    stamp = (tmp_path / "llama_target" / "model.safetensors").stat().st_mtime_ns
    zoo.build_pair("llama_eagle3", tmp_path)
    assert (tmp_path / "llama_target" / "model.safetensors").stat().st_mtime_ns == stamp  # target reused
    assert zoo.load_expected(again["draft"]) == again["expected"]
    assert again["speculative_config"] == {"method": "eagle", "model": again["draft"], "num_speculative_tokens": 3}


def test_bad_requests_name_the_fix(tmp_path):
    with pytest.raises(PortableSpecError, match="use one of"):
        zoo.build_pair("gpt_medusa", tmp_path)
    with pytest.raises(PortableSpecError, match="perfect"):
        zoo.build_pair("llama_eagle3", tmp_path, variant="partial")
    with pytest.raises(PortableSpecError, match="regenerate"):
        zoo.load_expected(tmp_path)
    assert zoo.main([str(tmp_path), "--which", "nope"]) == 2


def test_cli_builds_and_prints_one_json_object(tmp_path, capsys):
    assert zoo.main([str(tmp_path), "--which", "qwen3_dflash", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [pair] = report["pairs"]
    assert pair["pair"] == "qwen3_dflash" and pair["speculative_config"]["method"] == "dflash"
    assert (tmp_path / "qwen3_dflash_head_perfect" / "config.json").is_file()


# ------------------------------------------------------------------ ci/gpu/vllm_boot.py: plumbing and checks on CPU

BOOT_SCRIPT = __import__("pathlib").Path(__file__).resolve().parents[1] / "ci" / "gpu" / "vllm_boot.py"


@pytest.fixture(scope="module")
def boot():
    from ci_scripts import load_ci_script

    return load_ci_script("ci/gpu/vllm_boot.py")


def test_boot_dry_run_plans_time_bounded_runs(tmp_path):
    import subprocess
    import sys

    def plan(*extra):
        proc = subprocess.run([sys.executable, str(BOOT_SCRIPT), str(tmp_path / "out"), "--dry-run", "--json",
                               "--zoo-dir", str(tmp_path / "zoo"), *extra], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    full = plan()
    steps = full["steps"]
    assert [s["step"] for s in steps] == ["llm:native", "llm:vllm_platform_cuda", "serve:vllm_platform_cuda"]
    assert [s["env"]["VLLM_PLATFORM"] for s in steps] == [None, "cuda", "cuda"]
    assert all(s["timeout_s"] > 0 for s in steps)
    spec = steps[1]["spec"]
    assert spec["speculative_config"] == {"method": "eagle", "num_speculative_tokens": 3,
                                          "model": str(tmp_path / "zoo" / "llama_eagle_head_perfect")}
    assert spec["max_model_len"] == 512 and spec["max_num_seqs"] == 8 and spec["max_tokens"] == 32
    serve = steps[2]["command"]
    assert serve[serve.index("--host") + 1] == "127.0.0.1" and serve[serve.index("--port") + 1] == "8765"
    assert json.loads(serve[serve.index("--speculative-config") + 1]) == spec["speculative_config"]
    assert not (tmp_path / "zoo").exists()  # a dry run builds nothing
    assert [s["step"] for s in plan("--quick")["steps"]] == ["llm:native", "llm:vllm_platform_cuda"]
    attention = plan("--quick", "--variant", "attention", "--pair", "mixtral_eagle")["steps"][0]["spec"]
    assert attention["speculative_config"]["model"] == str(tmp_path / "zoo" / "mixtral_eagle_head_attention")
    assert attention["target"] == str(tmp_path / "zoo" / "mixtral_target")
    bad = subprocess.run([sys.executable, str(BOOT_SCRIPT), str(tmp_path), "--dry-run", "--pair", "llama_eagle3",
                          "--variant", "partial"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "perfect" in bad.stderr


def test_boot_run_env_sets_or_removes_vllm_platform(boot):
    base = {"VLLM_PLATFORM": "musa", "PATH": "/bin"}
    assert "VLLM_PLATFORM" not in boot.run_env(base, None) and boot.run_env(base, None)["PATH"] == "/bin"
    assert boot.run_env(base, "cuda")["VLLM_PLATFORM"] == "cuda"
    assert base["VLLM_PLATFORM"] == "musa"


def _fake_run(f, platform_module, platform_class, corrupt=None):
    outputs = []
    for i, ids in enumerate([[1, 40, 41], [1, 300], [1, 77, 78, 79]]):
        toks = zoo.expected_continuation(f, ids, 32)
        if corrupt == i:
            toks = toks[:5] + [f[toks[5]]] + toks[6:]
        outputs.append({"prompt_token_ids": ids, "token_ids": toks})
    return {"ok": True, "outputs": outputs, "platform": {"module": platform_module, "qualname": platform_class},
            "worker": [{"platform": f"{platform_module}.{platform_class}"}]}


def test_boot_greedy_checks_catch_divergence_and_the_wrong_platform(boot):
    f = list(zoo.zoo_function(0).f)
    native = _fake_run(f, "vllm.platforms.cuda", "CudaPlatform")
    ours = _fake_run(f, "portable_spec.vllm_adapter.platform.cuda", "PortableCudaPlatform")
    checks = boot.greedy_checks({"native": native, "vllm_platform_cuda": ours}, f, 32)
    assert all(c["ok"] for c in checks.values()), checks
    assert set(checks) >= {"greedy_outputs_equal", "native_expected_chain", "vllm_platform_cuda_expected_chain",
                           "vllm_platform_cuda_is_ours", "native_is_stock_vllm"}
    diverged = _fake_run(f, "portable_spec.vllm_adapter.platform.cuda", "PortableCudaPlatform", corrupt=1)
    checks = boot.greedy_checks({"native": native, "vllm_platform_cuda": diverged}, f, 32)
    assert not checks["greedy_outputs_equal"]["ok"] and "[1]" in checks["greedy_outputs_equal"]["detail"]
    assert not checks["vllm_platform_cuda_expected_chain"]["ok"] and checks["native_expected_chain"]["ok"]
    stock = _fake_run(f, "vllm.platforms.cuda", "CudaPlatform")
    checks = boot.greedy_checks({"native": native, "vllm_platform_cuda": stock}, f, 32)
    assert not checks["vllm_platform_cuda_is_ours"]["ok"]
    failed = boot.greedy_checks({"native": native, "vllm_platform_cuda": {"ok": False, "error": "boom"}}, f, 32)
    assert not failed["vllm_platform_cuda_ok"]["ok"] and "greedy_outputs_equal" not in failed


def test_boot_acceptance_check_matches_the_zoo_expectation(boot):
    perfect = zoo.expected_acceptance_per_position("eagle", "perfect", 3)
    good = {"spec_decode_num_drafts": 10, "spec_decode_num_draft_tokens": 30, "spec_decode_num_accepted_tokens": 30,
            "spec_decode_num_accepted_tokens_per_pos": [10, 10, 10]}
    assert boot.acceptance_check(good, perfect)["ok"]
    assert not boot.acceptance_check({**good, "spec_decode_num_accepted_tokens": 29}, perfect)["ok"]
    assert not boot.acceptance_check({}, perfect)["ok"]
    assert not boot.acceptance_check({**good, "spec_decode_num_drafts": 0}, perfect)["ok"]
    dflash = zoo.expected_acceptance_per_position("dflash", "perfect", 3)
    assert boot.acceptance_check({**good, "spec_decode_num_accepted_tokens_per_pos": [10, 0, 0]}, dflash)["ok"]
    assert not boot.acceptance_check(good, dflash)["ok"]
    assert not boot.acceptance_check({**good, "spec_decode_num_accepted_tokens_per_pos": [10]}, dflash)["ok"]
    assert boot.acceptance_check(good, None)["ok"]  # partial heads: informational


def test_boot_serve_checks_and_expected_chat(boot, built):
    _, pairs = built
    pair = pairs["llama_eagle", "perfect"]
    f = pair["expected"]["f"]
    chat = boot.expected_chat(pair["target"], f, 16)
    assert chat["prompt_token_ids"][0] == zoo.BOS_ID and len(chat["token_ids"]) == 16
    assert chat["token_ids"] == zoo.expected_continuation(f, chat["prompt_token_ids"], 16)
    serve = {"ok": True, "response": {"text": chat["text"], "token_ids": chat["token_ids"],
                                      "prompt_token_ids": chat["prompt_token_ids"]}}
    log = "INFO [vllm_boot] api-server current_platform=portable_spec.vllm_adapter.platform.cuda.PortableCudaPlatform"
    checks = boot.serve_checks(serve, log, f, chat)
    assert all(c["ok"] for c in checks.values()), checks
    wrong = {"ok": True, "response": {**serve["response"], "token_ids": chat["token_ids"][::-1]}}
    assert not boot.serve_checks(wrong, log, f, chat)["serve_expected_chain"]["ok"]
    assert not boot.serve_checks(serve, "INFO Automatically detected platform cuda.", f, chat)[
        "serve_log_names_platform_class"]["ok"]


def test_boot_log_excerpt_keeps_the_evidence_lines(boot):
    text = "\n".join([
        "INFO 11-22 [__init__.py:237] Platform plugin portable_spec is activated",
        "INFO noise line",
        "INFO [core.py:117] Initializing a V1 LLM engine with config: " + "x" * 2000
        + " cudagraph_capture_sizes=[1, 2, 4, 8] " + "y" * 2000,
        "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|##########| 5/5\r",
        "INFO [metrics.py:121] SpecDecoding metrics: Mean acceptance length: 4.00, Avg Draft acceptance rate: 100.0%",
    ])
    out = boot.log_excerpt("run", text)
    joined = "\n".join(out)
    assert "Platform plugin portable_spec is activated" in joined and "noise" not in joined
    assert "cudagraph_capture_sizes=[1, 2, 4, 8]" in joined and max(len(ln) for ln in out) < 700
    assert "SpecDecoding metrics" in joined and "--- errors" not in joined


# ------------------------------------------------- vLLM's own loaders and modules, on CPU, in a separate process


def vllm_cpu_session():
    """Pin a minimal CPU platform before vLLM resolves one; return ``engine_config(pair)``, which makes a pair's
    VllmConfig and, the first time, a 1-rank gloo group (model-parallel groups are made from that first config)."""
    import socket

    import vllm.platforms
    from vllm.platforms.interface import Platform, PlatformEnum

    class ZooCpuPlatform(Platform):
        _enum = PlatformEnum.OOT
        device_name = "cpu"
        device_type = "cpu"
        dispatch_key = "CPU"
        dist_backend = "gloo"

        @classmethod
        def get_attn_backend_cls(cls, selected_backend, attn_selector_config, num_heads=None):
            return "vllm.v1.attention.backends.flex_attention.FlexAttentionBackend"

    vllm.platforms._current_platform = ZooCpuPlatform()
    from vllm.config import set_current_vllm_config
    from vllm.distributed import ensure_model_parallel_initialized, init_distributed_environment
    from vllm.engine.arg_utils import EngineArgs

    state = {"initialised": False}

    def engine_config(pair):
        vc = EngineArgs(model=pair["target"], speculative_config=pair["speculative_config"], max_model_len=512,
                        max_num_seqs=8, enforce_eager=True).create_engine_config()
        if not state["initialised"]:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            with set_current_vllm_config(vc):
                init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                             distributed_init_method=f"tcp://127.0.0.1:{port}")
                ensure_model_parallel_initialized(1, 1)
            state["initialised"] = True
        return vc

    return engine_config


def _vllm_cpu_check(zoo_dir: str) -> dict[str, bool]:
    """Load every zoo pair with vLLM 0.26.0's real model loader (bf16, CPU) and run its real modules.

    Runs in its own process (``python tests/test_model_zoo.py --vllm-cpu-check DIR``): it pins a minimal CPU
    platform before vLLM resolves one and initialises a 1-rank gloo group. Attention runs with no metadata
    (vLLM's profiling path returns zeros), which is exact for the targets and the EAGLE heads because their
    ``o_proj`` is zero; the DFlash head's attention is computed here from vLLM's own q/k/v, q/k-norm and RoPE modules.
    """
    engine_config = vllm_cpu_session()  # before any other vllm import: the platform is resolved once
    from vllm.config import set_current_vllm_config
    from vllm.forward_context import set_forward_context
    from vllm.model_executor.model_loader import get_model

    results: dict[str, bool] = {}
    every = [t for t in range(zoo.VOCAB) if t != zoo.MASK_ID]
    ids, pos = torch.tensor(every), torch.arange(len(every))
    # the model-parallel groups are made once, from the first config: a MoE one, or no expert-parallel group exists
    order = sorted(F_CHAIN_PAIRS, key=lambda n: zoo.PAIRS[n][0] != "mixtral")
    # The pairs of a family share one target checkpoint (build_pair reuses it): its forward over every token (bf16
    # on CPU, seconds each) runs once per checkpoint and aux-layer choice, not once per pair; each pair still loads
    # the target with its own config and checks that target's logits.
    target_runs: dict[tuple, tuple] = {}
    for name in order:
        _, method, variants = zoo.PAIRS[name]
        for variant in variants:
            pair = zoo.build_pair(name, zoo_dir, variant=variant)
            f, g = pair["expected"]["f"], pair["expected"]["g"]
            vc = engine_config(pair)
            key = f"{name}/{variant}"
            with set_current_vllm_config(vc):
                tm = get_model(vllm_config=vc)
                dm = get_model(vllm_config=vc, model_config=vc.speculative_config.draft_model_config)
                results[f"{key}: draft class"] = type(dm).__name__ == {
                    "eagle": "EagleLlamaForCausalLM", "eagle3": "Eagle3LlamaForCausalLM",
                    "dflash": "DFlashQwen3ForCausalLM"}[method]
                if not dm.has_own_embed_tokens:  # what the proposer's load_model does
                    dm.model.embed_tokens = tm.model.embed_tokens
                if variant == "d2t":  # its own lm_head over the draft vocabulary, and the d2t map vLLM loaded
                    results[f"{key}: own lm_head and d2t"] = (
                        dm.has_own_lm_head and dm.lm_head.org_vocab_size == dm.config.draft_vocab_size
                        == len(zoo.draft_vocabulary()) and dm.draft_id_to_target_id.tolist()
                        == zoo.d2t_offsets(zoo.draft_vocabulary()))
                else:
                    results[f"{key}: lm_head shared"] = not getattr(dm, "has_own_lm_head", False)
                    dm.lm_head = tm.lm_head
                aux_layers = None
                if method == "eagle3":
                    aux_layers = tuple(dm.config.eagle_aux_hidden_state_layer_ids)
                if method == "dflash":
                    aux_layers = tuple(i + 1 for i in dm.config.dflash_config["target_layer_ids"])
                if aux_layers is not None:
                    tm.set_aux_hidden_state_layers(aux_layers)
                if name.startswith("mixtral"):
                    continue  # FusedMoE has no CPU path on an out-of-tree platform: loading is what we check
                with torch.inference_mode(), set_forward_context(None, vc):
                    if (pair["target"], aux_layers) not in target_runs:
                        out = tm(ids, pos)
                        target_runs[pair["target"], aux_layers] = out if isinstance(out, tuple) else (out, None)
                    hidden, aux = target_runs[pair["target"], aux_layers]
                    results[f"{key}: target argmax is f"] = (
                        tm.compute_logits(hidden).argmax(-1).tolist() == [f[t] for t in every])
                    if method == "eagle" and variant == "attention":
                        results[f"{key}: eagle attention step"] = _vllm_eagle_attention(dm, ids, pos, hidden, f)
                    elif method == "eagle":
                        h, _ = dm(ids, pos, hidden)
                        results[f"{key}: eagle argmax is g"] = (
                            dm.compute_logits(h).argmax(-1).tolist() == [g[t] for t in every])
                    elif method == "eagle3":
                        h, pre = dm(ids, pos, dm.combine_hidden_states(torch.cat(aux, -1)))
                        results[f"{key}: eagle3 first step"] = (
                            dm.compute_logits(h).argmax(-1).tolist() == [f[f[t]] for t in every])
                        h, _ = dm(torch.tensor([f[t] for t in every]), pos + 1, pre)
                        results[f"{key}: eagle3 chained step"] = (
                            dm.compute_logits(h).argmax(-1).tolist() == [f[f[f[t]]] for t in every])
                    else:
                        results[f"{key}: dflash mask slots"] = _vllm_dflash_block(dm, aux, f)
    return results


def _vllm_eagle_attention(dm, ids, pos, hidden, f) -> bool:
    """The attention EAGLE head through vLLM's own fc, qkv, RoPE, o_proj, norm and MLP modules; only the causal
    softmax attention is written out here (vLLM's CPU path has no attention without metadata)."""
    layer = dm.model.layers[0]
    attn = layer.self_attn
    hd, n = attn.head_dim, len(ids)
    x = dm.model.fc(torch.cat([dm.model.embed_tokens(ids), hidden], -1))
    qkv, _ = attn.qkv_proj(layer.input_layernorm(x))
    q, k, v = qkv.split([attn.q_size, attn.kv_size, attn.kv_size], -1)
    q, k = attn.rotary_emb.forward_native(pos, q, k)
    o = _attend(q.view(n, -1, hd).float(), k.view(n, -1, hd).float(), v.view(n, -1, hd).float(), pos, pos,
                causal=True).to(x.dtype)
    h, residual = layer.post_attention_layernorm(attn.o_proj(o)[0], x)
    out = layer.mlp(h) + residual
    return dm.compute_logits(out).argmax(-1).tolist() == [f[t] for t in ids.tolist()]


def _vllm_dflash_block(dm, aux, f) -> bool:
    """DFlash query blocks through vLLM's own DFlash modules; only the softmax attention is written out here."""
    import torch.nn.functional as F

    layer, model = dm.model.layers[0], dm.model
    attn = layer.self_attn
    hd = attn.head_dim
    ctx = model.hidden_norm(dm.combine_hidden_states(torch.cat(aux, -1)))[:40]  # 40 context positions
    ctx_pos = torch.arange(ctx.shape[0])
    ckv = F.linear(ctx, attn.qkv_proj.weight[attn.q_size:])  # as _project_context_kv
    ck, cv = ckv.split([attn.kv_size, attn.kv_size], -1)
    ck = attn.k_norm(ck.reshape(-1, attn.num_kv_heads, hd)).reshape(ck.shape)
    ck, _ = attn.rotary_emb.forward_native(ctx_pos, ck, None)
    ok = True
    for bonus in (f[zoo.BOS_ID], 100, 517, zoo.VOCAB - 1):
        ids = torch.tensor([bonus] + [zoo.MASK_ID] * 3)
        q_pos = torch.arange(ctx.shape[0], ctx.shape[0] + 4)
        x = model.embed_input_ids(ids)
        qkv, _ = attn.qkv_proj(layer.input_layernorm(x))
        q, k, v = qkv.split([attn.q_size, attn.kv_size, attn.kv_size], -1)
        q = attn.q_norm(q.reshape(4, -1, hd)).reshape(q.shape)
        k = attn.k_norm(k.reshape(4, -1, hd)).reshape(k.shape)
        q, k = attn.rotary_emb.forward_native(q_pos, q, k)
        keys = torch.cat([ck, k]).view(-1, attn.num_kv_heads, hd).float()
        vals = torch.cat([cv, v]).view(-1, attn.num_kv_heads, hd).float()
        o = _attend(q.view(4, -1, hd).float(), keys, vals, q_pos, None, causal=False).to(x.dtype)
        h, residual = layer.post_attention_layernorm(attn.o_proj(o)[0], x)
        h, _ = model.norm(layer.mlp(h), residual)
        ok &= dm.compute_logits(h[1:]).argmax(-1).tolist() == [f[bonus]] * 3
    return ok


def test_vllm_loads_every_pair_and_its_modules_reproduce_the_construction(built):
    """vLLM's loader accepts every checkpoint and its real modules (bf16, CPU) give f, g and the DFlash slots."""
    pytest.importorskip("vllm")
    import os
    import subprocess
    import sys

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "VLLM_PLUGINS": "", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, __file__, "--vllm-cpu-check", str(built[0])], env=env,
                          capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    results = json.loads(lines[-1])
    assert len(results) >= 20 and all(results.values()), results


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--vllm-cpu-check"]:
        print(json.dumps(_vllm_cpu_check(sys.argv[2])), flush=True)
